/**
 * The memory and file blob stores. Cases: the shared BlobStore contract (test/support/blob-store-contract.ts)
 * for both; the file store's compare-and-swap across processes (four OS processes incrementing one counter
 * through CAS: no increment is lost, and they did collide) and ConversationStore appends from several
 * processes all landing; a pointer written before names were versioned is still read and swapped; a
 * compare-and-swap leaves no temporary files behind.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync, mkdirSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describeBlobStoreContract } from '../support/blob-store-contract';
import { FileBlobStore, MemoryBlobStore, nameHash } from '../../src/storage/blob-store';
import { ConversationStore } from '../../src/storage/conversation';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'treadle-blob-store-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describeBlobStoreContract('MemoryBlobStore', () => new MemoryBlobStore());
describeBlobStoreContract('FileBlobStore', () => new FileBlobStore(path.join(dir, 'contract')));

const SRC = path.join(__dirname, '..', '..', 'src');

/**
 * Runs `body` (CommonJS, with `FileBlobStore` and `ConversationStore` from src/ in scope, compiled on the fly
 * with swc as jest does) in `count` separate node processes. They start `body` together: each reports ready,
 * then waits until every one has. Returns what each printed last (JSON).
 */
async function inProcesses<T>(count: number, body: string): Promise<T[]> {
  const work = mkdtempSync(path.join(dir, 'procs-'));
  const go = path.join(work, 'go');
  const script = path.join(work, 'child.js');
  writeFileSync(
    script,
    `
const fs = require('node:fs');
const swc = require(${JSON.stringify(require.resolve('@swc/core'))});
require.extensions['.ts'] = (module, filename) => {
  const { code } = swc.transformSync(fs.readFileSync(filename, 'utf8'), { filename, jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } });
  module._compile(code, filename);
};
const { FileBlobStore } = require(${JSON.stringify(path.join(SRC, 'storage', 'blob-store.ts'))});
const { ConversationStore } = require(${JSON.stringify(path.join(SRC, 'storage', 'conversation.ts'))});
const index = Number(process.argv[2]);
(async () => {
  process.stdout.write('ready\\n');
  while (!fs.existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 5));
  const result = await (async () => { ${body} })();
  process.stdout.write(JSON.stringify(result) + '\\n');
})().catch((error) => { process.stderr.write(String(error && error.stack || error)); process.exit(1); });
`,
  );
  let ready = 0;
  const children = Array.from({ length: count }, (_, index) => {
    const child = spawn(process.execPath, [script, String(index)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      if (!stdout.includes('ready\n') && (stdout + chunk).includes('ready\n') && ++ready === count)
        writeFileSync(go, '');
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    return new Promise<T>((resolve, reject) =>
      child.on('close', (code) => {
        if (code !== 0) reject(new Error(`child ${index} exited ${code}: ${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').pop()!) as T);
      }),
    );
  });
  return Promise.all(children);
}

describe('FileBlobStore across processes', () => {
  it('compare-and-swap loses no update: 4 processes x 40 increments of one counter make 160', async () => {
    const store = path.join(dir, 'counter');
    const results = await inProcesses<{ wins: number; losses: number }>(
      4,
      `
      const store = new FileBlobStore(${JSON.stringify(store)});
      let wins = 0, losses = 0;
      for (let i = 0; i < 40; i++) {
        for (;;) {
          const current = await store.getName('counter');
          const count = current === undefined ? 0 : JSON.parse((await store.get(current)).toString()).count;
          const next = await store.put(Buffer.from(JSON.stringify({ count: count + 1, by: index, i })), 'application/json', 'counter');
          if (await store.compareAndSetName('counter', current, next.ref)) { wins++; break; }
          losses++;
        }
      }
      return { wins, losses };`,
    );
    const blobs = new FileBlobStore(store);
    const final = JSON.parse((await blobs.get((await blobs.getName('counter'))!)).toString()) as { count: number };
    expect(results.map((r) => r.wins)).toEqual([40, 40, 40, 40]);
    // Two winners from one version would have counted one increment twice and left the total short.
    expect(final.count).toBe(160);
    // The processes did collide, so the compare-and-swap was what kept the count.
    expect(results.reduce((n, r) => n + r.losses, 0)).toBeGreaterThan(0);
  });

  it('ConversationStore appends from 4 processes at once all land', async () => {
    const store = path.join(dir, 'conversation');
    await inProcesses<null>(
      4,
      `
      const conversations = new ConversationStore(new FileBlobStore(${JSON.stringify(store)}));
      for (let i = 0; i < 10; i++) await conversations.append('shared', { correlationId: index + '/' + i, messages: [{ role: 'user', content: 'turn ' + index + '/' + i }] });
      return null;`,
    );
    const turns = await new ConversationStore(new FileBlobStore(store)).turns('shared');
    expect(turns).toHaveLength(40);
    expect(new Set(turns.map((t) => t.correlationId)).size).toBe(40);
    // Each process's own turns keep their order.
    for (let p = 0; p < 4; p++) {
      const mine = turns.filter((t) => t.correlationId.startsWith(`${p}/`)).map((t) => t.correlationId);
      expect(mine).toEqual(Array.from({ length: 10 }, (_, i) => `${p}/${i}`));
    }
  });
});

describe('FileBlobStore names on disk', () => {
  it('reads a pointer written before names were versioned, and swaps from it', async () => {
    const root = path.join(dir, 'legacy');
    mkdirSync(path.join(root, 'names'), { recursive: true });
    writeFileSync(
      path.join(root, 'names', nameHash('conversation:old')),
      JSON.stringify({ name: 'conversation:old', ref: 'sha256:old' }),
    );
    const blobs = new FileBlobStore(root);
    expect(await blobs.getName('conversation:old')).toBe('sha256:old');
    expect(await blobs.compareAndSetName('conversation:old', undefined, 'sha256:new')).toBe(false);
    expect(await blobs.compareAndSetName('conversation:old', 'sha256:old', 'sha256:new')).toBe(true);
    expect(await blobs.getName('conversation:old')).toBe('sha256:new');
  });

  it('keeps numbered versions and no temporary files', async () => {
    const root = path.join(dir, 'versions');
    const blobs = new FileBlobStore(root);
    await blobs.compareAndSetName('n', undefined, 'sha256:a');
    await blobs.compareAndSetName('n', 'sha256:a', 'sha256:b');
    await blobs.compareAndSetName('n', 'sha256:a', 'sha256:c');
    await blobs.setName('n', 'sha256:d');
    expect(readdirSync(path.join(root, 'pointers', nameHash('n'))).sort()).toEqual(['1', '2', '3']);
    expect(await blobs.getName('n')).toBe('sha256:d');
  });

  it('says which pointer is damaged rather than reading it as empty', async () => {
    const root = path.join(dir, 'damaged');
    mkdirSync(path.join(root, 'pointers', nameHash('conversation:x')), { recursive: true });
    writeFileSync(path.join(root, 'pointers', nameHash('conversation:x'), '1'), 'not json');
    await expect(new FileBlobStore(root).getName('conversation:x')).rejects.toThrow(
      'the stored pointer for name "conversation:x" is not {name, ref} JSON',
    );
  });
});

it('FileBlobStore: storing the same bytes again makes the blob new for garbage collection', async () => {
  const store = new FileBlobStore(path.join(dir, 'touched'));
  const { ref } = await store.put(Buffer.from('stored twice'), 'text/plain', 'twice');
  const hex = ref.slice('sha256:'.length);
  const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
  utimesSync(path.join(store.dir, hex.slice(0, 2), hex.slice(2)), twoDaysAgo, twoDaysAgo);
  const modified = async (): Promise<number> => {
    for await (const blob of store.list()) if (blob.ref === ref) return blob.modified.getTime();
    throw new Error('not listed');
  };
  expect(await modified()).toBeLessThan(Date.now() - 86_400_000);
  await store.put(Buffer.from('stored twice'), 'text/plain', 'again');
  expect(await modified()).toBeGreaterThan(Date.now() - 60_000);
});
