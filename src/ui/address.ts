/**
 * Where the review inbox listens by default and the link that signs a reviewer in: light on purpose (no fastify,
 * no SDK), so the CLI's `--help` and `treadle ui token add` read them without loading the server.
 */

/** The inbox's default listening address: loopback, so nothing outside the machine reaches it unless asked. */
export const INBOX_HOST = '127.0.0.1';

/** The inbox's default port (the Temporal Web UI's is 8233). */
export const INBOX_PORT = 8234;

/** The login address that signs `token` in (the fragment never reaches the server's logs). */
export function loginUrl(url: string, token: string): string {
  return `${url.replace(/\/+$/, '')}/login#token=${token}`;
}

/** `host:port` as a browser writes it in the Host header and the address bar: an IPv6 literal in brackets. */
export function hostAndPort(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}
