/**
 * Cross-site request checks for the inbox's state-changing endpoints (the session cookie is SameSite=Strict;
 * these are the second layer): the Host must be one the server answers as, the request must come from the
 * page's own origin (Origin, else Sec-Fetch-Site), and its body must be JSON, which a cross-site form cannot send.
 */

/** Why a request was refused, with the status the server answers. */
export interface CsrfRefusal {
  status: 403 | 415;
  message: string;
}

/** The headers the checks read (lower-case names, as Node gives them). */
export interface RequestHeaders {
  host?: string;
  origin?: string;
  'sec-fetch-site'?: string;
  'content-type'?: string;
}

/** Whether `host` (the Host header) is one of `allowedHosts` (`host:port`, compared case-insensitively). */
function hostAllowed(host: string | undefined, allowedHosts: readonly string[]): boolean {
  return host !== undefined && allowedHosts.some((h) => h.toLowerCase() === host.toLowerCase());
}

/** Checks a state-changing request; undefined when it may proceed. Bearer-token scripts send no Origin: see `script`. */
export function checkStateChange(
  headers: RequestHeaders,
  allowedHosts: readonly string[],
  options: { script?: boolean } = {},
): CsrfRefusal | undefined {
  if (!hostAllowed(headers.host, allowedHosts)) {
    return { status: 403, message: `host ${JSON.stringify(headers.host ?? '')} is not one this inbox serves` };
  }
  if (!options.script) {
    if (headers.origin !== undefined) {
      const origin = originHost(headers.origin);
      if (
        origin === undefined ||
        !hostAllowed(origin, allowedHosts) ||
        origin.toLowerCase() !== headers.host!.toLowerCase()
      ) {
        return { status: 403, message: `cross-origin request refused (origin ${JSON.stringify(headers.origin)})` };
      }
    } else if (headers['sec-fetch-site'] !== 'same-origin') {
      return { status: 403, message: 'request without a same-origin Origin or Sec-Fetch-Site header refused' };
    }
  }
  // After the origin checks: a cross-site form (not JSON) is answered 403, saying why it was refused.
  if (!/^application\/json\s*(;|$)/i.test(headers['content-type'] ?? '')) {
    return { status: 415, message: 'decisions are sent as application/json' };
  }
  return undefined;
}

function originHost(origin: string): string | undefined {
  try {
    const url = new URL(origin);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.host : undefined;
  } catch {
    return undefined;
  }
}
