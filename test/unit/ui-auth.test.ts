/**
 * The inbox's identity and cross-site checks: the tokens file (format, comments, refused when group/world
 * readable), token lookup, bearer headers, the proxy user header (only when configured and only from a trusted
 * address), and the Host/Origin/Sec-Fetch-Site/content-type checks on state-changing requests.
 */
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  bearerToken,
  newToken,
  parseTokens,
  readTokensFile,
  reviewerForToken,
  reviewerFromProxy,
  TokensFileError,
} from '../../src/ui/auth';
import { checkStateChange } from '../../src/ui/csrf';

describe('tokens', () => {
  it('a new token resolves to its reviewer through the stored line alone', () => {
    const alice = newToken('alice');
    const bob = newToken('bob');
    const entries = parseTokens(`# reviewers\n\n${alice.line}\n  ${bob.line}  \n`);
    expect(alice.line).not.toContain(alice.token);
    expect(reviewerForToken(entries, alice.token)).toBe('alice');
    expect(reviewerForToken(entries, bob.token)).toBe('bob');
    expect(reviewerForToken(entries, `${alice.token}x`)).toBeUndefined();
    expect(reviewerForToken(entries, '')).toBeUndefined();
  });

  it('refuses malformed lines and names, saying where', () => {
    expect(() => parseTokens('alice sha256:abc', 'f')).toThrow(
      'f:1: expected "<name> sha256:<64 hex digits> [groups=<group>,…]"',
    );
    expect(() => parseTokens(`# c\nal<ice sha256:${'0'.repeat(64)}`, 'f')).toThrow('f:2:');
    expect(() => newToken('a b')).toThrow(TokensFileError);
  });

  it('refuses a tokens file that group or others can read', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'treadle-tokens-'));
    const file = path.join(dir, 'tokens');
    writeFileSync(file, `${newToken('alice').line}\n`);
    chmodSync(file, 0o644);
    expect(() => readTokensFile(file)).toThrow(/readable by group or others \(mode 644\); run: chmod 600/);
    chmodSync(file, 0o600);
    expect(readTokensFile(file).map((e) => e.name)).toEqual(['alice']);
  });

  it('reads bearer tokens', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer  abc')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});

describe('proxy user header', () => {
  const proxy = { header: 'X-Forwarded-User', trustedAddresses: ['10.0.0.5'] };
  it('is honoured only when configured and only from a trusted address', () => {
    const headers = { 'x-forwarded-user': 'carol' };
    expect(reviewerFromProxy(proxy, '10.0.0.5', headers)).toBe('carol');
    expect(reviewerFromProxy(proxy, '::ffff:10.0.0.5', headers)).toBe('carol');
    expect(reviewerFromProxy(proxy, '10.0.0.6', headers)).toBeUndefined();
    expect(reviewerFromProxy(undefined, '10.0.0.5', headers)).toBeUndefined();
    expect(reviewerFromProxy(proxy, '10.0.0.5', {})).toBeUndefined();
    expect(reviewerFromProxy(proxy, '10.0.0.5', { 'x-forwarded-user': ['a', 'b'] })).toBeUndefined();
  });
});

describe('checkStateChange', () => {
  const hosts = ['127.0.0.1:8234', 'localhost:8234'];
  const json = 'application/json; charset=utf-8';
  it('lets a same-origin JSON request through', () => {
    expect(
      checkStateChange({ host: '127.0.0.1:8234', origin: 'http://127.0.0.1:8234', 'content-type': json }, hosts),
    ).toBeUndefined();
    expect(
      checkStateChange({ host: 'localhost:8234', 'sec-fetch-site': 'same-origin', 'content-type': json }, hosts),
    ).toBeUndefined();
  });

  it('refuses a foreign Host, a cross origin, a missing origin and a form body', () => {
    expect(
      checkStateChange({ host: 'evil.example', origin: 'http://evil.example', 'content-type': json }, hosts),
    ).toMatchObject({ status: 403 });
    expect(
      checkStateChange({ host: '127.0.0.1:8234', origin: 'http://evil.example', 'content-type': json }, hosts),
    ).toMatchObject({ status: 403, message: expect.stringContaining('cross-origin') });
    expect(
      checkStateChange({ host: '127.0.0.1:8234', origin: 'http://localhost:8234', 'content-type': json }, hosts),
    ).toMatchObject({ status: 403 });
    expect(checkStateChange({ host: '127.0.0.1:8234', origin: 'null', 'content-type': json }, hosts)).toMatchObject({
      status: 403,
    });
    expect(
      checkStateChange({ host: '127.0.0.1:8234', 'sec-fetch-site': 'cross-site', 'content-type': json }, hosts),
    ).toMatchObject({ status: 403 });
    expect(checkStateChange({ host: '127.0.0.1:8234', 'content-type': json }, hosts)).toMatchObject({ status: 403 });
    expect(
      checkStateChange(
        {
          host: '127.0.0.1:8234',
          origin: 'http://127.0.0.1:8234',
          'content-type': 'application/x-www-form-urlencoded',
        },
        hosts,
      ),
    ).toMatchObject({ status: 415 });
  });

  it('lets a bearer script omit Origin but still checks Host and JSON', () => {
    expect(checkStateChange({ host: '127.0.0.1:8234', 'content-type': json }, hosts, { script: true })).toBeUndefined();
    expect(checkStateChange({ host: 'evil.example', 'content-type': json }, hosts, { script: true })).toMatchObject({
      status: 403,
    });
    expect(
      checkStateChange({ host: '127.0.0.1:8234', 'content-type': 'text/plain' }, hosts, { script: true }),
    ).toMatchObject({ status: 415 });
  });
});
