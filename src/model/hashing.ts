/**
 * The hashes Treadle computes over JSON: canonical JSON (equal for equal JSON whatever its key order), its
 * SHA-256, and seed 003's idempotency key, `hash(run_id + step_name + input_hash)`, built from it. Every step's
 * key (stage context, approval actions) and the client's run ids use these, so they live below all of them.
 *
 * Pure and dependency-free (a small SHA-256 instead of `node:crypto`, UTF-8 encoded by hand instead of
 * `Buffer`/`TextEncoder`), so workflow code may import it as well as activities: the lint rule on
 * `src/workflows/**` forbids Node built-ins there, and a key computed in either place is the same.
 */

/**
 * The seed's idempotency key: the SHA-256, as 64 lowercase hex digits, of the UTF-8 bytes of
 * `runId + "\0" + step + "\0" + inputHash`.
 *
 * The seed writes `run_id + step_name + input_hash`; the NUL separators keep that composition injective
 * (plain concatenation gives run `a-1` step `x` and run `a-` step `1x` the same key). For the same reason
 * `runId` and `step` may not contain NUL: that throws a `TypeError`.
 */
export function idempotencyKey(runId: string, step: string, inputHash: string): string {
  if (runId.includes('\0') || step.includes('\0'))
    throw new TypeError('idempotencyKey: runId and step must not contain NUL characters');
  return sha256Hex(`${runId}\0${step}\0${inputHash}`);
}

/** SHA-256 (64 lowercase hex digits) of a value's canonical JSON ({@link canonicalJson}): equal for equal JSON whatever its key order. */
export function inputHash(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

/**
 * Canonical JSON: object keys sorted by UTF-16 code units, no whitespace, strings and numbers written as
 * `JSON.stringify` writes them (the ordering and number form of RFC 8785). Object properties that are
 * `undefined` are left out, as `JSON.stringify` does, since they do not survive the wire either.
 * Throws a `TypeError` naming the path for anything that is not JSON: non-finite numbers, `undefined` in
 * an array or at the top, functions, symbols, bigints and objects other than plain objects and arrays.
 */
export function canonicalJson(value: unknown): string {
  return canonical(value, '$');
}

function canonical(value: unknown, path: string): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`canonicalJson: ${path} is ${value}, which JSON cannot hold`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((item, index) => canonical(item, `${path}[${index}]`)).join(',')}]`;
  if (typeof value === 'object' && isPlainObject(value)) {
    const record = value as Record<string, unknown>;
    const members: string[] = [];
    for (const key of Object.keys(record).sort()) {
      if (record[key] === undefined) continue;
      members.push(`${JSON.stringify(key)}:${canonical(record[key], `${path}.${key}`)}`);
    }
    return `{${members.join(',')}}`;
  }
  const what =
    typeof value === 'object' ? `a ${(value as object).constructor?.name ?? 'non-plain'} object` : typeof value;
  throw new TypeError(`canonicalJson: ${path} is ${what}, which is not JSON`);
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** SHA-256 of a string's UTF-8 bytes as 64 lowercase hex digits (FIPS 180-4; same as `createHash('sha256')`). */
export function sha256Hex(text: string): string {
  const words = sha256(utf8(text));
  let hex = '';
  for (const word of words) hex += (word >>> 0).toString(16).padStart(8, '0');
  return hex;
}

/** UTF-8 bytes; a lone surrogate becomes U+FFFD, as `TextEncoder` and `Buffer.from` make it. */
function utf8(text: string): Uint8Array {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    let code = text.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0;
      if (next >= 0xdc00 && next <= 0xdfff) {
        code = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00);
        i++;
      } else {
        code = 0xfffd;
      }
    } else if (code >= 0xdc00 && code <= 0xdfff) {
      code = 0xfffd;
    }
    if (code < 0x80) bytes.push(code);
    else if (code < 0x800) bytes.push(0xc0 | (code >> 6), 0x80 | (code & 0x3f));
    else if (code < 0x10000) bytes.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f));
    else
      bytes.push(0xf0 | (code >> 18), 0x80 | ((code >> 12) & 0x3f), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f));
  }
  return Uint8Array.from(bytes);
}

// The first 32 bits of the fractional parts of the cube roots of the first 64 primes (FIPS 180-4, 4.2.2).
const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

function sha256(message: Uint8Array): Uint32Array {
  // Padding: a 1 bit, zeros, then the message length in bits as a 64-bit big-endian number.
  const bitLength = message.length * 8;
  const blocks = Math.ceil((message.length + 9) / 64);
  const padded = new Uint8Array(blocks * 64);
  padded.set(message);
  padded[message.length] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(bitLength / 0x100000000));
  view.setUint32(padded.length - 4, bitLength >>> 0);

  // The first 32 bits of the fractional parts of the square roots of the first 8 primes.
  const h = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const w = new Uint32Array(64);
  for (let offset = 0; offset < padded.length; offset += 64) {
    for (let t = 0; t < 16; t++) w[t] = view.getUint32(offset + t * 4);
    for (let t = 16; t < 64; t++) {
      const w15 = w[t - 15]!;
      const w2 = w[t - 2]!;
      const s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >>> 3);
      const s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >>> 10);
      w[t] = (w[t - 16]! + s0 + w[t - 7]! + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, hh] = [h[0]!, h[1]!, h[2]!, h[3]!, h[4]!, h[5]!, h[6]!, h[7]!];
    for (let t = 0; t < 64; t++) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t]! + w[t]!) >>> 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) >>> 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) >>> 0;
    }
    h[0] = h[0]! + a;
    h[1] = h[1]! + b;
    h[2] = h[2]! + c;
    h[3] = h[3]! + d;
    h[4] = h[4]! + e;
    h[5] = h[5]! + f;
    h[6] = h[6]! + g;
    h[7] = h[7]! + hh;
  }
  return h;
}

function rotr(x: number, n: number): number {
  return (x >>> n) | (x << (32 - n));
}
