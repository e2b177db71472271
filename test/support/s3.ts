/**
 * A real S3-protocol server for tests: s3rver on a free 127.0.0.1 port with its data in a temporary folder, one
 * bucket, and in front of it a small proxy that adds the conditional writes s3rver lacks.
 *
 * s3rver accepts a PutObject whose If-None-Match / If-Match fails, so the S3 blob store rightly refuses it for
 * compare-and-swap. The proxy evaluates those conditions against s3rver's current ETag (HEAD) before forwarding,
 * one request per key at a time, as S3 does: Treadle's side (the conditions it asks for, how it reads 412 and
 * 409, its retries) is then real; the atomicity itself is the server's guarantee, which s3rver cannot show.
 */
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { mkdtempSync, rmSync } from 'node:fs';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

// s3rver ships no types.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const S3rver = require('s3rver') as new (options: Record<string, unknown>) => {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
};

/** The static credentials s3rver accepts. */
export const S3_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/** A running s3rver with its bucket and the conditional-write proxy in front of it. */
export interface TestS3 {
  bucket: string;
  /** s3rver itself, which ignores conditional writes. */
  s3rverEndpoint: string;
  /** The conditional-write proxy: the endpoint a Treadle store that shares conversations needs. */
  endpoint: string;
  proxy: ConditionalWriteProxy;
  /** A client straight to s3rver, to look at (or tamper with) what a store wrote. */
  client: S3Client;
  /** The settings a `treadle` process needs to keep its blobs in the bucket under `prefix`, through the proxy. */
  env(prefix: string): Record<string, string>;
  /** Every key under a prefix, sorted. */
  keysUnder(prefix: string): Promise<string[]>;
  /** Stops the proxy and s3rver and removes the data. */
  close(): Promise<void>;
}

/** Starts s3rver with one bucket (default `treadle-test`) and the conditional-write proxy. */
export async function startS3(bucket = 'treadle-test'): Promise<TestS3> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'treadle-s3rver-'));
  const s3rver = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: dataDir,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await s3rver.run();
  const s3rverEndpoint = `http://127.0.0.1:${port}`;
  const proxy = await startConditionalWriteProxy(port);
  const client = new S3Client({
    endpoint: s3rverEndpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: S3_CREDENTIALS,
  });
  return {
    bucket,
    s3rverEndpoint,
    endpoint: proxy.endpoint,
    proxy,
    client,
    env: (prefix) => ({
      TREADLE_BLOB_STORE: 's3',
      TREADLE_S3_BUCKET: bucket,
      TREADLE_S3_PREFIX: prefix,
      TREADLE_S3_ENDPOINT: proxy.endpoint,
      TREADLE_S3_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
    }),
    keysUnder: async (prefix) => {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const listed = await client.send(
          new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
        );
        keys.push(...(listed.Contents ?? []).map((o) => o.Key!));
        token = listed.IsTruncated ? listed.NextContinuationToken : undefined;
      } while (token);
      return keys.sort();
    },
    close: async () => {
      client.destroy();
      await proxy.close();
      await s3rver.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** One request the proxy saw, with the conditions it carried and what came of it. */
export interface SeenRequest {
  method: string;
  path: string;
  ifMatch: string | undefined;
  ifNoneMatch: string | undefined;
  /** A copy's source (`x-amz-copy-source`) and metadata directive. */
  copySource?: string;
  metadataDirective?: string;
  status?: number;
  responseEtag?: string;
}

/** The proxy's address and what it saw; a test may stage a race before the next conditional PUT. */
export interface ConditionalWriteProxy {
  endpoint: string;
  requests: SeenRequest[];
  /** Runs once, when the next conditional PUT arrives, before it is queued (to stage a race). */
  beforeConditionalPut: (() => Promise<void>) | undefined;
  close(): Promise<void>;
}

/**
 * Forwards everything to s3rver; a PUT with If-None-Match / If-Match is first checked against the object's
 * current ETag (HEAD to s3rver) and refused as S3 refuses it: 412 PreconditionFailed, or 404 NoSuchKey for
 * If-Match on a missing key. Requests to one key run one at a time, so check and write are atomic, and
 * writes are atomic to readers, as in S3.
 */
async function startConditionalWriteProxy(upstreamPort: number): Promise<ConditionalWriteProxy> {
  const queues = new Map<string, Promise<unknown>>();
  const requestTo = (method: string, pathAndQuery: string, headers: IncomingHttpHeaders, body?: Buffer) =>
    new Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const upstream = http.request(
        { host: '127.0.0.1', port: upstreamPort, method, path: pathAndQuery, headers },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (c: Buffer) => chunks.push(c));
          response.on('end', () =>
            resolve({ status: response.statusCode ?? 502, headers: response.headers, body: Buffer.concat(chunks) }),
          );
        },
      );
      upstream.on('error', reject);
      upstream.end(body);
    });
  const refuse = (status: number, code: string): { status: number; headers: IncomingHttpHeaders; body: Buffer } => ({
    status,
    headers: { 'content-type': 'application/xml' },
    body: Buffer.from(
      `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code}</Message></Error>`,
    ),
  });
  const unquote = (etag: string | undefined) => etag?.replace(/^"|"$/g, '');

  const state: ConditionalWriteProxy = {
    endpoint: '',
    requests: [],
    beforeConditionalPut: undefined,
    close: async () => undefined,
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const pathname = new URL(req.url!, 'http://proxy').pathname;
      const seen: SeenRequest = {
        method: req.method!,
        path: pathname,
        ifMatch: req.headers['if-match'],
        ifNoneMatch: req.headers['if-none-match'],
      };
      const copySource = req.headers['x-amz-copy-source'];
      if (typeof copySource === 'string') seen.copySource = decodeURIComponent(copySource);
      const directive = req.headers['x-amz-metadata-directive'];
      if (typeof directive === 'string') seen.metadataDirective = directive;
      state.requests.push(seen);
      const conditional = req.method === 'PUT' && (seen.ifMatch !== undefined || seen.ifNoneMatch !== undefined);
      const handle = async () => {
        if (conditional) {
          const head = await requestTo('HEAD', pathname, {});
          const current = head.status === 200 ? unquote(head.headers.etag as string | undefined) : undefined;
          if (seen.ifNoneMatch === '*' && current !== undefined) return refuse(412, 'PreconditionFailed');
          if (seen.ifMatch !== undefined && current === undefined) return refuse(404, 'NoSuchKey');
          if (seen.ifMatch !== undefined && unquote(seen.ifMatch) !== current) return refuse(412, 'PreconditionFailed');
        }
        return requestTo(req.method!, req.url!, req.headers, body);
      };
      const run = async () => {
        const result = await handle().catch((error: Error) => ({
          ...refuse(502, 'BadGateway'),
          body: Buffer.from(error.message),
        }));
        seen.status = result.status;
        if (typeof result.headers.etag === 'string') seen.responseEtag = result.headers.etag;
        res.writeHead(result.status, result.headers);
        res.end(result.body);
      };
      // Requests to one key run one at a time: a condition cannot be overtaken between check and write, and
      // a read never sees a write half done (s3rver writes objects in place; S3 never shows a partial one).
      const enqueue = () => queues.set(pathname, (queues.get(pathname) ?? Promise.resolve()).then(run, run));
      const hook = conditional ? state.beforeConditionalPut : undefined;
      state.beforeConditionalPut = conditional ? undefined : state.beforeConditionalPut;
      if (hook) void hook().then(enqueue, enqueue);
      else enqueue();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}
