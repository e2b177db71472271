/**
 * Seed 003's idempotency key and input hash (src/model/hashing.ts). Cases: the pure SHA-256 equals
 * node:crypto's on every length across block boundaries, multi-byte text and lone surrogates; canonical JSON
 * sorts keys at every depth, drops undefined properties and refuses what is not JSON; the input hash ignores
 * key order; the key is sha256(runId NUL step NUL inputHash), injective where plain concatenation is not;
 * the module imports nothing, so workflow code may use it.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { canonicalJson, idempotencyKey, inputHash, sha256Hex } from '../../src/model/hashing';

const nodeSha256 = (text: string) => createHash('sha256').update(text).digest('hex');

it('sha256Hex equals node:crypto on every length from 0 to 300 and on any text', () => {
  const alphabet = 'aé€😀\ud800z';
  for (let length = 0; length <= 300; length++) {
    const text = Array.from({ length }, (_, i) => alphabet[(i * 7 + length) % alphabet.length]).join('');
    expect(sha256Hex(text)).toBe(nodeSha256(text));
  }
  expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  expect(sha256Hex('x'.repeat(100_000))).toBe(nodeSha256('x'.repeat(100_000)));
  // A lone low surrogate and a pair split the wrong way round: both U+FFFD in UTF-8, as Buffer makes them.
  expect(sha256Hex('\udc00\ud83d')).toBe(nodeSha256('\udc00\ud83d'));
});

it('canonical JSON sorts keys at every depth and writes no whitespace', () => {
  expect(canonicalJson({ b: 1, a: [{ d: true, c: null }, 'x'], '10': 'ten', '9': 'nine' })).toBe(
    '{"10":"ten","9":"nine","a":[{"c":null,"d":true},"x"],"b":1}',
  );
  expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
  expect(canonicalJson('é\n')).toBe('"é\\n"');
  expect(canonicalJson(1e21)).toBe('1e+21');
  expect(canonicalJson(Object.assign(Object.create(null) as object, { z: 1 }))).toBe('{"z":1}');
});

it('canonical JSON refuses what is not JSON, naming where', () => {
  expect(() => canonicalJson({ a: [1, Number.NaN] })).toThrow('canonicalJson: $.a[1] is NaN, which JSON cannot hold');
  expect(() => canonicalJson({ when: new Date(0) })).toThrow(
    'canonicalJson: $.when is a Date object, which is not JSON',
  );
  expect(() => canonicalJson([undefined])).toThrow('canonicalJson: $[0] is undefined, which is not JSON');
  expect(() => canonicalJson({ n: 1n })).toThrow('$.n is bigint');
});

it('the input hash is the SHA-256 of the canonical JSON, whatever the key order', () => {
  const a = { actionType: 'create_task', payload: { title: 'Call Bob', due: '2026-03-02' } };
  const b = { payload: { due: '2026-03-02', title: 'Call Bob' }, actionType: 'create_task' };
  expect(inputHash(a)).toBe(inputHash(b));
  expect(inputHash(a)).toBe(
    nodeSha256('{"actionType":"create_task","payload":{"due":"2026-03-02","title":"Call Bob"}}'),
  );
  expect(inputHash({ ...a, payload: { ...a.payload, title: 'Call Rob' } })).not.toBe(inputHash(a));
});

it('the key is sha256(runId NUL step NUL inputHash), so run and step cannot run into each other', () => {
  const hash = inputHash({ title: 'Call Bob' });
  expect(idempotencyKey('item-1', 'approve_tasks', hash)).toBe(nodeSha256(`item-1\0approve_tasks\0${hash}`));
  expect(idempotencyKey('item-1', 'approve_tasks', hash)).toMatch(/^[0-9a-f]{64}$/);
  // Plain concatenation would give these two the same key.
  expect(idempotencyKey('a-1', 'x', hash)).not.toBe(idempotencyKey('a-', '1x', hash));
  expect(idempotencyKey('item-1', 'approve_tasks', hash)).not.toBe(idempotencyKey('item-2', 'approve_tasks', hash));
  expect(() => idempotencyKey('item\0', 'step', hash)).toThrow('must not contain NUL');
});

it('imports nothing, so workflow code can compute the same key', () => {
  const source = readFileSync(path.join(__dirname, '..', '..', 'src', 'model', 'hashing.ts'), 'utf8').replace(
    /\/\*[\s\S]*?\*\/|\/\/.*$/gm,
    '',
  );
  expect(source).not.toMatch(/^\s*import\s/m);
  expect(source).not.toMatch(/\brequire\(|\bBuffer\b|\bprocess\./);
});
