/**
 * Cross-site request checks for the inbox: every request must name a Host the server answers as (a page on
 * another site that rebinds its DNS name to the inbox's address sends its own name); state-changing requests
 * (the session cookie is SameSite=Strict; these are the second layer) must also come from the page's own
 * origin (Origin, else Sec-Fetch-Site) with a JSON body, which a cross-site form cannot send.
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

/** Checks any request's Host header (DNS rebinding); undefined when it is one of `allowedHosts`. */
export function checkHost(host: string | undefined, allowedHosts: readonly string[]): CsrfRefusal | undefined {
  if (hostAllowed(host, allowedHosts)) return undefined;
  return {
    status: 403,
    message: `host ${JSON.stringify(host ?? '')} is not one this inbox serves (add it to TREADLE_UI_ALLOWED_HOSTS if it is)`,
  };
}

/** Checks a state-changing request; undefined when it may proceed. Bearer-token scripts send no Origin: see `script`. */
export function checkStateChange(
  headers: RequestHeaders,
  allowedHosts: readonly string[],
  options: { script?: boolean } = {},
): CsrfRefusal | undefined {
  const wrongHost = checkHost(headers.host, allowedHosts);
  if (wrongHost) return wrongHost;
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
