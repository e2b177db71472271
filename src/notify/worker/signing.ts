/**
 * Webhook signatures (docs/notifications.md "Verifying a delivery"): every POST carries
 * `X-Treadle-Timestamp: <unix seconds>` and `X-Treadle-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`
 * under the webhook's secret. {@link verifySignature} is what a receiver runs; it is self-contained (node:crypto
 * only), so it can be copied into a receiver as is.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The signature header's value for `body` sent at `timestamp` (unix seconds) under `secret`. */
export function signatureOf(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** How old a delivery's timestamp may be by default (against replays of a captured request). */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/**
 * Whether `header` (`X-Treadle-Signature`) signs `body` (the raw request body, as received) sent at `timestamp`
 * (`X-Treadle-Timestamp`) under `secret`, and the timestamp is within `toleranceSeconds` of now (default 300; 0
 * skips the check). Compares in constant time.
 */
export function verifySignature(
  secret: string,
  timestamp: string,
  body: string,
  header: string,
  options: { toleranceSeconds?: number; nowMs?: number } = {},
): boolean {
  const tolerance = options.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS;
  const sent = Number(timestamp);
  if (!/^\d+$/.test(timestamp) || !Number.isSafeInteger(sent)) return false;
  if (tolerance > 0 && Math.abs((options.nowMs ?? Date.now()) / 1000 - sent) > tolerance) return false;
  const expected = Buffer.from(signatureOf(secret, timestamp, body));
  const given = Buffer.from(header);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
