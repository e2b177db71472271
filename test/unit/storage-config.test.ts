/**
 * Choosing the blob store from the environment. Cases: the file store by default (in the home) and with
 * TREADLE_BLOB_DIR, absolute or relative to the home;
 * S3 chosen explicitly or by TREADLE_S3_BUCKET alone; the defaults for prefix, region and path style with
 * and without an endpoint; prefix normalisation; an explicit `file` winning over a bucket; one-line errors
 * naming the variable for every malformed value; the factory building the store the settings describe.
 */
import { loadConfig } from '../../src/config';
import { FileBlobStore } from '../../src/storage/blob-store';
import { createBlobStore } from '../../src/storage';
import { S3BlobStore } from '../../src/storage/s3-blob-store';

it('uses the file store by default, in the home, or in TREADLE_BLOB_DIR when set (relative: to the home)', () => {
  const home = { TREADLE_HOME: '/srv/home' };
  expect(loadConfig(home).blobStore).toEqual({ kind: 'file', dir: '/srv/home/blobs' });
  expect(loadConfig({ ...home, TREADLE_BLOB_DIR: '/srv/blobs' }).blobStore).toEqual({
    kind: 'file',
    dir: '/srv/blobs',
  });
  expect(loadConfig({ ...home, TREADLE_BLOB_DIR: 'shared' }).blobStore).toEqual({
    kind: 'file',
    dir: '/srv/home/shared',
  });
  expect(loadConfig({ ...home, TREADLE_BLOB_STORE: 'file', TREADLE_S3_BUCKET: 'ignored' }).blobStore).toEqual({
    kind: 'file',
    dir: '/srv/home/blobs',
  });
});

it('uses S3 on AWS when a bucket is named: virtual-hosted URLs, the region from AWS_REGION or the SDK', () => {
  expect(loadConfig({ TREADLE_S3_BUCKET: 'team-treadle' }).blobStore).toEqual({
    kind: 's3',
    bucket: 'team-treadle',
    prefix: 'treadle/',
    forcePathStyle: false,
  });
  expect(
    loadConfig({ TREADLE_BLOB_STORE: 's3', TREADLE_S3_BUCKET: 'team-treadle', AWS_REGION: 'eu-west-1' }).blobStore,
  ).toMatchObject({ region: 'eu-west-1' });
  expect(
    loadConfig({ TREADLE_S3_BUCKET: 'b', AWS_REGION: 'eu-west-1', TREADLE_S3_REGION: 'us-west-2' }).blobStore,
  ).toMatchObject({ region: 'us-west-2' });
});

it('uses path-style URLs and a default region for an S3-compatible endpoint, unless told otherwise', () => {
  const env = { TREADLE_BLOB_STORE: 's3', TREADLE_S3_BUCKET: 'treadle', TREADLE_S3_ENDPOINT: 'http://minio:9000' };
  expect(loadConfig(env).blobStore).toEqual({
    kind: 's3',
    bucket: 'treadle',
    prefix: 'treadle/',
    endpoint: 'http://minio:9000',
    region: 'us-east-1',
    forcePathStyle: true,
  });
  expect(loadConfig({ ...env, TREADLE_S3_FORCE_PATH_STYLE: 'false' }).blobStore).toMatchObject({
    forcePathStyle: false,
  });
  expect(loadConfig({ TREADLE_S3_BUCKET: 'b', TREADLE_S3_FORCE_PATH_STYLE: 'TRUE' }).blobStore).toMatchObject({
    forcePathStyle: true,
  });
});

it('normalises the key prefix to "" or "folder/"', () => {
  const prefix = (value: string) =>
    (loadConfig({ TREADLE_S3_BUCKET: 'b', TREADLE_S3_PREFIX: value }).blobStore as { prefix: string }).prefix;
  expect(prefix('')).toBe('');
  expect(prefix('/')).toBe('');
  expect(prefix('/team/treadle')).toBe('team/treadle/');
  expect(prefix('team/')).toBe('team/');
});

it.each([
  [{ TREADLE_BLOB_STORE: 'gcs' }, 'TREADLE_BLOB_STORE must be "file" or "s3", got "gcs"'],
  [
    { TREADLE_BLOB_STORE: 's3' },
    'TREADLE_BLOB_STORE=s3 needs TREADLE_S3_BUCKET, the name of the bucket to keep blobs in',
  ],
  [
    { TREADLE_S3_BUCKET: 's3://team/treadle' },
    'TREADLE_S3_BUCKET must be a bare bucket name (put any folder in TREADLE_S3_PREFIX), got "s3://team/treadle"',
  ],
  [
    { TREADLE_S3_BUCKET: 'b', TREADLE_S3_ENDPOINT: 'minio:9000' },
    'TREADLE_S3_ENDPOINT must be an http(s) URL such as http://minio:9000, got "minio:9000"',
  ],
  [
    { TREADLE_S3_BUCKET: 'b', TREADLE_S3_ENDPOINT: 'not a url' },
    'TREADLE_S3_ENDPOINT must be an http(s) URL such as http://minio:9000, got "not a url"',
  ],
  [
    { TREADLE_S3_BUCKET: 'b', TREADLE_S3_FORCE_PATH_STYLE: 'yes' },
    'TREADLE_S3_FORCE_PATH_STYLE must be true or false, got "yes"',
  ],
])('refuses %j with one line naming the variable', (env, message) => {
  // The whole message, exactly: one line, naming the variable and the value.
  expect(() => loadConfig(env)).toThrow(new Error(message));
});

it('builds the store the settings describe', () => {
  const file = createBlobStore(loadConfig({ TREADLE_BLOB_DIR: '/srv/blobs' }).blobStore);
  expect(file).toBeInstanceOf(FileBlobStore);
  expect((file as FileBlobStore).dir).toBe('/srv/blobs');
  const s3 = createBlobStore(loadConfig({ TREADLE_S3_BUCKET: 'team-treadle', TREADLE_S3_PREFIX: 'x' }).blobStore);
  expect(s3).toBeInstanceOf(S3BlobStore);
  expect(s3).toMatchObject({ bucket: 'team-treadle', prefix: 'x/' });
});
