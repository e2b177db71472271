/**
 * The S3 blob store with the real AWS SDK client against s3rver (a real S3-protocol server on a free
 * 127.0.0.1 port, data in a temporary folder), and a real work item whose worker keeps its blobs there.
 *
 * s3rver does not implement conditional writes: it accepts a PutObject whose If-None-Match / If-Match
 * fails. So:
 * - against s3rver itself: blobs (1 MB round trip, dedupe, corruption detected, missing bucket named),
 *   names, selection through the configuration with credentials from the AWS environment variables,
 *   and the store *refusing* compare-and-swap with a one-line error once its probe sees the writes ignored;
 * - against s3rver behind the conditional-write proxy of test/support/s3.ts, which evaluates If-None-Match /
 *   If-Match against s3rver's current ETag (HEAD) before forwarding, one PUT per key at a time, as S3 does: the
 *   whole BlobStore contract, including concurrent compare-and-swap and concurrent conversation appends, and the
 *   headers the store sends. This proves Treadle's side (the conditions it asks for, how it reads 412 and
 *   409, its retries); the atomicity itself is the server's guarantee, which s3rver cannot show.
 * - a work item with a 1 MB input and 1 MB artefacts through a worker and a client that share only s3rver:
 *   the blobs are in the bucket and the history stays small.
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { createHash, randomUUID } from 'node:crypto';
import { TreadleClient } from '../../src/client';
import { loadConfig } from '../../src/config';
import { pipeline } from '../../src/kinds/builder';
import { isBlobRef } from '../../src/model/shapes';
import { createBlobStore } from '../../src/storage';
import { BlobNotFoundError } from '../../src/storage/blob-store';
import { ConditionalWritesUnsupportedError, S3BlobStore } from '../../src/storage/s3-blob-store';
import { describeBlobStoreContract } from '../support/blob-store-contract';
import { startHarness, type Harness } from '../support/harness';
import { S3_CREDENTIALS as CREDENTIALS, startS3, type TestS3 } from '../support/s3';

const BUCKET = 'treadle-test';
const MB = 1024 * 1024;

let s3: TestS3;
let endpoint: string;
let proxy: TestS3['proxy'];
let raw: TestS3['client'];
const stores: S3BlobStore[] = [];

beforeAll(async () => {
  s3 = await startS3(BUCKET);
  ({ s3rverEndpoint: endpoint, proxy, client: raw } = s3);
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await s3?.close();
});

/** A store on its own prefix, straight to s3rver or through the conditional-write proxy. */
function s3Store(via: 's3rver' | 'proxy' = 's3rver', prefix = `run-${randomUUID()}/`): S3BlobStore {
  const store = new S3BlobStore({
    bucket: BUCKET,
    prefix,
    endpoint: via === 'proxy' ? proxy.endpoint : endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: CREDENTIALS,
  });
  stores.push(store);
  return store;
}

const keysUnder = (prefix: string): Promise<string[]> => s3.keysUnder(prefix);

describe('S3BlobStore against s3rver', () => {
  it('round-trips a 1 MB blob under <prefix>blobs/<hex>, uploads the same bytes once, and renews them when stored again', async () => {
    const store = s3Store('proxy');
    const bytes = Buffer.alloc(MB, 'treadle');
    const hex = createHash('sha256').update(bytes).digest('hex');
    expect(await store.put(bytes, 'application/octet-stream', '1 MB')).toEqual({
      ref: `sha256:${hex}`,
      bytes: MB,
      mediaType: 'application/octet-stream',
      summary: '1 MB',
    });
    const mine = () => proxy.requests.filter((r) => r.method === 'PUT' && r.path.includes(store.prefix));
    const uploads = () => mine().filter((r) => r.copySource === undefined).length;
    expect(uploads()).toBe(1);
    await store.put(Buffer.from(bytes), 'application/octet-stream', 'again');
    expect(uploads()).toBe(1);
    // Stored again, the object is copied onto itself: S3 renews its LastModified, so garbage collection's
    // grace period covers this put as it covers a new blob (s3rver keeps the file's time, so only the request
    // shows here; the file store's test shows the time itself).
    expect(mine().filter((r) => r.copySource !== undefined)).toEqual([
      expect.objectContaining({
        copySource: `${BUCKET}/${store.prefix}blobs/${hex}`,
        metadataDirective: 'REPLACE',
        status: 200,
      }),
    ]);
    expect((await store.get(`sha256:${hex}`)).equals(bytes)).toBe(true);
    expect(await keysUnder(store.prefix)).toEqual([`${store.prefix}blobs/${hex}`]);
  });

  it('reads and writes names, and says so when a blob is missing or its bytes are not the blob', async () => {
    const store = s3Store();
    await store.setName('conversation:x', 'sha256:aa');
    expect(await store.getName('conversation:x')).toBe('sha256:aa');
    expect(await store.getName('conversation:y')).toBeUndefined();
    const missing = `sha256:${'0'.repeat(64)}`;
    // The bucket, the prefix and the settings that choose them, since a CLI and a worker on different ones is the usual cause.
    const error = await store.get(missing).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BlobNotFoundError);
    expect((error as Error).message).toBe(
      `blob ${missing} not found in s3://${BUCKET}/${store.prefix} at ${endpoint} (TREADLE_S3_BUCKET, TREADLE_S3_PREFIX, ` +
        'TREADLE_S3_ENDPOINT; the workers and the CLI must use the same bucket and prefix)',
    );
    const { ref } = await store.put(Buffer.from('the real bytes'), 'text/plain', 'x');
    await raw.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: `${store.prefix}blobs/${ref.slice(7)}`, Body: 'tampered' }),
    );
    await expect(store.get(ref)).rejects.toThrow(
      `blob ${ref} in ${store.where} is corrupt: its bytes hash to sha256:${createHash('sha256').update('tampered').digest('hex')}`,
    );
  });

  it('names a missing bucket in one line', async () => {
    const store = new S3BlobStore({
      bucket: 'no-such-bucket',
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: CREDENTIALS,
    });
    stores.push(store);
    const failure = await store.put(Buffer.from('x'), 'text/plain', 'x').then(
      () => undefined,
      (error: Error) => error,
    );
    expect(failure?.message).toMatch(
      /^S3 PUT s3:\/\/no-such-bucket\/blobs\/[0-9a-f]{64} at http:\/\/127\.0\.0\.1:\d+ failed: the bucket "no-such-bucket" does not exist$/,
    );
  });

  it('refuses compare-and-swap on s3rver, which ignores conditional writes, rather than losing updates silently', async () => {
    const store = s3Store();
    await expect(store.compareAndSetName('conversation:x', undefined, 'sha256:aa')).rejects.toThrow(
      new ConditionalWritesUnsupportedError(store.where),
    );
    expect(await store.getName('conversation:x')).toBeUndefined();
  });

  it('is what TREADLE_BLOB_STORE=s3 selects, with credentials from the AWS environment variables', async () => {
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = CREDENTIALS.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = CREDENTIALS.secretAccessKey;
    try {
      const prefix = `config-${randomUUID()}`;
      const config = loadConfig({
        TREADLE_BLOB_STORE: 's3',
        TREADLE_S3_BUCKET: BUCKET,
        TREADLE_S3_PREFIX: prefix,
        TREADLE_S3_ENDPOINT: endpoint,
      });
      const store = createBlobStore(config.blobStore);
      expect(store).toBeInstanceOf(S3BlobStore);
      stores.push(store as S3BlobStore);
      const { ref } = await store.put(Buffer.from('via configuration'), 'text/plain', 'x');
      expect((await store.get(ref)).toString()).toBe('via configuration');
      expect(await keysUnder(`${prefix}/`)).toEqual([`${prefix}/blobs/${ref.slice(7)}`]);
    } finally {
      for (const [name, value] of [
        ['AWS_ACCESS_KEY_ID', saved.id],
        ['AWS_SECRET_ACCESS_KEY', saved.secret],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});

describeBlobStoreContract('S3BlobStore (s3rver behind the conditional-write proxy)', () => s3Store('proxy'));

describe('S3BlobStore compare-and-swap on the wire', () => {
  it('creates with If-None-Match: *, replaces with If-Match: <the ETag it read>, and reads 412 as "lost"', async () => {
    const store = s3Store('proxy');
    const key = `/${BUCKET}/${store.prefix}names/${createHash('sha256').update('conversation:w').digest('hex')}`;
    const writes = () => proxy.requests.filter((r) => r.method === 'PUT' && r.path === key);

    expect(await store.compareAndSetName('conversation:w', undefined, 'sha256:aa')).toBe(true);
    expect(writes()).toEqual([expect.objectContaining({ ifNoneMatch: '*', ifMatch: undefined, status: 200 })]);
    const etag = writes()[0]!.responseEtag;

    expect(await store.compareAndSetName('conversation:w', 'sha256:aa', 'sha256:bb')).toBe(true);
    expect(writes()[1]).toEqual(expect.objectContaining({ ifMatch: etag, ifNoneMatch: undefined, status: 200 }));

    // Another writer replaces the pointer between this store's read and its write: the write must lose.
    const other = s3Store('proxy', store.prefix);
    proxy.beforeConditionalPut = () => other.setName('conversation:w', 'sha256:other');
    expect(await store.compareAndSetName('conversation:w', 'sha256:bb', 'sha256:cc')).toBe(false);
    const [, second, lost, interloper] = writes();
    expect(lost).toEqual(expect.objectContaining({ ifMatch: second!.responseEtag, status: 412 }));
    expect(interloper).toEqual(expect.objectContaining({ ifMatch: undefined, ifNoneMatch: undefined, status: 200 }));
    expect(await store.getName('conversation:w')).toBe('sha256:other');
  });
});

describe('a work item whose worker keeps its blobs in s3rver', () => {
  let h: Harness<S3BlobStore>;
  let prefix: string;
  beforeAll(async () => {
    prefix = `item-${randomUUID()}/`;
    h = await startHarness({ blobs: s3Store('s3rver', prefix) });
  });
  afterAll(async () => {
    await h?.shutdown();
  });

  it('moves a 1 MB input and 1 MB artefacts by reference through the bucket; the history stays small', async () => {
    const id = h.id('s3');
    // A client with its own store object: it shares nothing with the worker but the bucket.
    const client = new TreadleClient(h.temporal, { taskQueue: h.taskQueue, blobs: s3Store('s3rver', prefix) });
    const doc = 'd'.repeat(MB);
    const spec = pipeline('s3-draft-publish')
      .stage('draft', 'scripted')
      .stage('publish', 'scripted')
      .dependency('publish', 'draft');
    await client.start(spec, { doc, script: { draft: [{ outputBytes: MB }] } }, { id });
    expect((await client.result(id)).status).toBe('completed');

    const state = await client.getState(id);
    const draftRef = state.stages.draft!.artefact;
    const publishRef = state.stages.publish!.artefact;
    expect(isBlobRef(draftRef) && isBlobRef(publishRef)).toBe(true);
    const draft = (await client.readArtefact(draftRef)) as { text: string };
    expect(draft.text).toHaveLength(MB);
    // publish received draft's artefact, resolved from the bucket by the worker.
    expect(
      ((await client.readArtefact(publishRef)) as { upstream: { draft: { text: string } } }).upstream.draft.text,
    ).toBe(draft.text);

    const keys = await keysUnder(prefix);
    const hexOf = (ref: unknown) => (ref as { ref: string }).ref.slice('sha256:'.length);
    const inputHex = createHash('sha256')
      .update(JSON.stringify({ doc, script: { draft: [{ outputBytes: MB }] } }))
      .digest('hex');
    expect(keys).toEqual(
      expect.arrayContaining([
        `${prefix}blobs/${inputHex}`,
        `${prefix}blobs/${hexOf(draftRef)}`,
        `${prefix}blobs/${hexOf(publishRef)}`,
      ]),
    );

    const description = await h.temporal.workflow.getHandle(id).describe();
    expect(description.historySize).toBeLessThan(40 * 1024);
  });
});
