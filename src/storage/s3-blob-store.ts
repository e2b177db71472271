/**
 * The S3-compatible blob store, for workers on several machines (AWS S3, MinIO, R2, ...). Blobs are objects
 * `<prefix>blobs/<hex>`; a name is one object `<prefix>names/<sha256 of name>` holding `{ name, ref }`,
 * changed by compare-and-swap with S3 conditional writes (`If-None-Match: *` to create, `If-Match: <etag>`
 * to replace). Credentials come from the AWS SDK's default chain (environment, profile, instance role).
 */
import { createHash } from 'node:crypto';
import type * as S3Sdk from '@aws-sdk/client-s3';
import { BlobNotFoundError, blobHex, nameHash, parsePointer, type BlobStore, type StoredBlob } from './blob-store';
import type { BlobRef } from '../model/shapes';
import { loadOptional } from '../config/optional-packages';

/** Where an {@link S3BlobStore} keeps its objects, and how it reaches them. */
export interface S3BlobStoreOptions {
  bucket: string;
  /** Prepended to every key, e.g. `treadle/`; default none. */
  prefix?: string;
  /** An S3-compatible endpoint such as `http://127.0.0.1:9000`; default AWS S3. */
  endpoint?: string;
  /** Default: the SDK's (`AWS_REGION`, the profile). */
  region?: string;
  /** `http://host/bucket/key` rather than `http://bucket.host/key` (MinIO and most S3-compatibles need it). */
  forcePathStyle?: boolean;
  /** Default: the SDK's credential chain. */
  credentials?: S3Credentials | (() => Promise<S3Credentials>);
}

/**
 * Static credentials, or (as a function) a provider such as `fromIni()` of `@aws-sdk/credential-providers`. Declared
 * here rather than taken from `@aws-sdk/client-s3`, an optional package, so Treadle's types compile without it.
 */
export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/** The endpoint accepts a conditional write it should have refused, so compare-and-swap cannot be made safe. */
export class ConditionalWritesUnsupportedError extends Error {
  constructor(where: string) {
    super(
      `${where} ignores S3 conditional writes (If-None-Match / If-Match on PutObject), which Treadle needs to update conversation pointers without losing writes; use AWS S3, a recent MinIO, or another server that honours them`,
    );
    this.name = 'ConditionalWritesUnsupportedError';
  }
}

/** The SDK module and a client built from it. */
interface S3Connection {
  s3: S3Sdk.S3Client;
  sdk: typeof S3Sdk;
}

/** An S3 error as the SDK throws it: a name (`NoSuchKey`) and the HTTP status. */
interface S3Failure {
  name?: string;
  $metadata?: { httpStatusCode?: number };
}

function statusOf(error: unknown): number | undefined {
  return (error as S3Failure | undefined)?.$metadata?.httpStatusCode;
}

/** 412: a precondition did not hold; 409: a concurrent conditional write to the same key won (AWS asks to retry). */
function isLostRace(error: unknown): boolean {
  const status = statusOf(error);
  return status === 412 || status === 409;
}

function isNotFound(error: unknown): boolean {
  const name = (error as S3Failure | undefined)?.name;
  return name === 'NoSuchKey' || name === 'NotFound' || statusOf(error) === 404;
}

/** What a missing blob in a bucket says about where the bucket and prefix come from. */
const S3_STORE_SETTINGS =
  'TREADLE_S3_BUCKET, TREADLE_S3_PREFIX, TREADLE_S3_ENDPOINT; the workers and the CLI must use the same bucket and prefix';

/** Blobs and names in an S3 bucket; see the file comment for the layout and the compare-and-swap. */
export class S3BlobStore implements BlobStore {
  readonly bucket: string;
  readonly prefix: string;
  private client?: Promise<S3Connection>;
  private conditionalWrites?: Promise<void>;

  /** @throws a configuration error when `@aws-sdk/client-s3` (an optional peer dependency) is not installed. */
  constructor(private readonly options: S3BlobStoreOptions) {
    // Found now, loaded on first use: a worker or a command fails at start, naming the package to install.
    loadOptional('s3', () => require.resolve('@aws-sdk/client-s3'));
    this.bucket = options.bucket;
    this.prefix = options.prefix ?? '';
  }

  /** `s3://bucket/prefix`, for messages. */
  get where(): string {
    return `s3://${this.bucket}/${this.prefix}${this.options.endpoint ? ` at ${this.options.endpoint}` : ''}`;
  }

  async put(bytes: Buffer, mediaType: string, summary: string): Promise<BlobRef> {
    const hex = createHash('sha256').update(bytes).digest('hex');
    const key = this.blobKey(hex);
    const { s3, sdk } = await this.connect();
    const exists = await s3.send(new sdk.HeadObjectCommand({ Bucket: this.bucket, Key: key })).then(
      (head) => head.ContentLength === bytes.length,
      (error: unknown) => {
        // Without s3:ListBucket, S3 answers HEAD of a missing key with 403: upload, and let the PUT say if it may not.
        if (isNotFound(error) || statusOf(error) === 403) return false;
        throw this.failure('HEAD', key, error);
      },
    );
    if (!exists) {
      await s3
        .send(new sdk.PutObjectCommand({ Bucket: this.bucket, Key: key, Body: bytes, ContentType: mediaType }))
        .catch((error: unknown) => {
          throw this.failure('PUT', key, error);
        });
    } else {
      // Stored again: its time is now, so garbage collection's grace period covers this put as it does a new
      // blob (an old unreferenced blob put again by a running activity must not be collected before the
      // activity's result references it). A copy onto itself is how S3 renews LastModified without the bytes.
      const source = `${this.bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
      await s3
        .send(
          new sdk.CopyObjectCommand({
            Bucket: this.bucket,
            Key: key,
            CopySource: source,
            MetadataDirective: 'REPLACE',
            ContentType: mediaType,
          }),
        )
        .catch((error: unknown) => {
          throw this.failure('COPY', key, error);
        });
    }
    return { ref: `sha256:${hex}`, bytes: bytes.length, mediaType, summary };
  }

  async get(ref: string): Promise<Buffer> {
    const hex = blobHex(ref);
    const object = await this.read(this.blobKey(hex));
    if (!object) throw new BlobNotFoundError(ref, this.where, S3_STORE_SETTINGS);
    // Content addressing makes the check free: bytes that do not hash to their key are not the blob.
    const actual = createHash('sha256').update(object.bytes).digest('hex');
    if (actual !== hex) throw new Error(`blob ${ref} in ${this.where} is corrupt: its bytes hash to sha256:${actual}`);
    return object.bytes;
  }

  async setName(name: string, ref: string): Promise<void> {
    const key = this.nameKey(name);
    const { s3, sdk } = await this.connect();
    await s3
      .send(
        new sdk.PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: pointerBody(name, ref),
          ContentType: 'application/json',
        }),
      )
      .catch((error: unknown) => {
        throw this.failure('PUT', key, error);
      });
  }

  async getName(name: string): Promise<string | undefined> {
    const object = await this.read(this.nameKey(name));
    return object ? parsePointer(object.bytes.toString('utf8'), name) : undefined;
  }

  async compareAndSetName(name: string, expected: string | undefined, next: string): Promise<boolean> {
    await this.ensureConditionalWrites();
    const key = this.nameKey(name);
    let condition: { IfNoneMatch: string } | { IfMatch: string };
    if (expected === undefined) {
      condition = { IfNoneMatch: '*' };
    } else {
      const current = await this.read(key);
      if (!current || parsePointer(current.bytes.toString('utf8'), name) !== expected) return false;
      // The write succeeds only if the object is still the version just read.
      condition = { IfMatch: current.etag };
    }
    const { s3, sdk } = await this.connect();
    try {
      await s3.send(
        new sdk.PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: pointerBody(name, next),
          ContentType: 'application/json',
          ...condition,
        }),
      );
      return true;
    } catch (error) {
      // AWS answers If-Match on a key deleted meanwhile with 404: the expected version is gone all the same.
      if (isLostRace(error) || isNotFound(error)) return false;
      throw this.failure('PUT', key, error);
    }
  }

  /**
   * Once per store: proves that the endpoint refuses a conditional write whose condition fails. Servers that
   * ignore the headers (older MinIO, s3rver, some gateways) would let two writers both "win" silently.
   */
  private ensureConditionalWrites(): Promise<void> {
    this.conditionalWrites ??= this.probeConditionalWrites().catch((error: unknown) => {
      // A network failure is not a verdict: probe again next time.
      if (!(error instanceof ConditionalWritesUnsupportedError)) this.conditionalWrites = undefined;
      throw error;
    });
    return this.conditionalWrites;
  }

  private async probeConditionalWrites(): Promise<void> {
    const key = `${this.prefix}probe/conditional-writes`;
    const { s3, sdk } = await this.connect();
    const attempt = async (
      condition: { IfNoneMatch: string } | { IfMatch: string },
    ): Promise<'written' | 'refused'> => {
      try {
        await s3.send(new sdk.PutObjectCommand({ Bucket: this.bucket, Key: key, Body: 'probe', ...condition }));
        return 'written';
      } catch (error) {
        if (statusOf(error) === 412) return 'refused';
        throw this.failure('PUT', key, error);
      }
    };
    // Creates the probe object if it is missing (either answer is fine), then asks for two writes that must fail.
    await attempt({ IfNoneMatch: '*' });
    if (
      (await attempt({ IfNoneMatch: '*' })) === 'written' ||
      (await attempt({ IfMatch: '"treadle-probe-never-an-etag"' })) === 'written'
    ) {
      throw new ConditionalWritesUnsupportedError(this.where);
    }
  }

  async *list(): AsyncIterable<StoredBlob> {
    for await (const object of this.objects(`${this.prefix}blobs/`)) {
      const hex = object.Key!.slice(`${this.prefix}blobs/`.length);
      if (/^[0-9a-f]{64}$/.test(hex))
        yield { ref: `sha256:${hex}`, bytes: object.Size ?? 0, modified: object.LastModified ?? new Date(0) };
    }
  }

  async delete(ref: string): Promise<void> {
    const key = this.blobKey(blobHex(ref));
    const { s3, sdk } = await this.connect();
    await s3.send(new sdk.DeleteObjectCommand({ Bucket: this.bucket, Key: key })).catch((error: unknown) => {
      throw this.failure('DELETE', key, error);
    });
  }

  async *namedRefs(): AsyncIterable<string> {
    for await (const object of this.objects(`${this.prefix}names/`)) {
      const pointer = await this.read(object.Key!);
      if (pointer) yield parsePointer(pointer.bytes.toString('utf8'), object.Key!);
    }
  }

  /** The objects under a key prefix, page by page. */
  private async *objects(prefix: string): AsyncIterable<S3Sdk._Object> {
    const { s3, sdk } = await this.connect();
    let token: string | undefined;
    do {
      const page = await s3
        .send(
          new sdk.ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: prefix,
            ...(token !== undefined ? { ContinuationToken: token } : {}),
          }),
        )
        .catch((error: unknown) => {
          throw this.failure('LIST', prefix, error);
        });
      for (const object of page.Contents ?? []) if (object.Key) yield object;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  }

  /** An object's bytes and ETag, or undefined when it does not exist. */
  private async read(key: string): Promise<{ bytes: Buffer; etag: string } | undefined> {
    const { s3, sdk } = await this.connect();
    try {
      const object = await s3.send(new sdk.GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if (!object.Body || object.ETag === undefined) throw new Error('the response has no body or no ETag');
      return { bytes: Buffer.from(await object.Body.transformToByteArray()), etag: object.ETag };
    } catch (error) {
      if (isNotFound(error) && (error as S3Failure).name !== 'NoSuchBucket') return undefined;
      throw this.failure('GET', key, error);
    }
  }

  /** The SDK (loaded on first use: it costs ~100 ms, which CLI commands using the file store should not pay). */
  private connect(): Promise<S3Connection> {
    this.client ??= import('@aws-sdk/client-s3').then((sdk) => {
      const { endpoint, region, forcePathStyle, credentials } = this.options;
      const s3 = new sdk.S3Client({
        ...(endpoint !== undefined ? { endpoint } : {}),
        ...(region !== undefined ? { region } : {}),
        ...(forcePathStyle !== undefined ? { forcePathStyle } : {}),
        ...(credentials !== undefined ? { credentials } : {}),
      });
      return { s3, sdk };
    });
    return this.client;
  }

  /** One line naming the operation, the object and the cause (the SDK's messages alone name neither). */
  private failure(operation: string, key: string, error: unknown): Error {
    const cause = error as Error & S3Failure;
    const status = statusOf(error);
    const what =
      cause?.name === 'NoSuchBucket'
        ? `the bucket "${this.bucket}" does not exist`
        : `${cause?.name ?? 'Error'}${status !== undefined ? ` (HTTP ${status})` : ''}: ${cause?.message ?? String(error)}`;
    return new Error(
      `S3 ${operation} s3://${this.bucket}/${key}${this.options.endpoint ? ` at ${this.options.endpoint}` : ''} failed: ${what}`.replace(
        /\s+/g,
        ' ',
      ),
      { cause: error },
    );
  }

  /** Closes the SDK's connections (tests, short-lived tools). */
  async close(): Promise<void> {
    if (this.client) (await this.client).s3.destroy();
  }

  private blobKey(hex: string): string {
    return `${this.prefix}blobs/${hex}`;
  }

  private nameKey(name: string): string {
    return `${this.prefix}names/${nameHash(name)}`;
  }
}

function pointerBody(name: string, ref: string): string {
  return JSON.stringify({ name, ref });
}
