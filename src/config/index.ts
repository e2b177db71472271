/**
 * Configuration from the environment, with the defaults docs/configuration.md lists.
 */
import { DEFAULT_BLOB_THRESHOLD_BYTES } from '../storage/defaults';
import { homeLocation, treadleHome } from './home';
import type { BlobStoreSettings } from '../storage';
import { ENGINE_VERSION, isEngineVersion } from '../model/state';
import { isPostgresUrl } from '../storage/open-call-log';
import { configError } from './errors';

/** Treadle's settings. */
export interface TreadleConfig {
  /** The task queue workers poll and items start on. Where Temporal is: src/config/connection.ts (`temporalSettings`). */
  taskQueue: string;
  /** Where the local state below lives, absolute (`TREADLE_HOME`, else per user: src/config/home.ts). */
  home: string;
  /** The file blob store's folder, absolute (`TREADLE_BLOB_DIR`, relative to the home; default `<home>/blobs`). */
  blobDir: string;
  blobThresholdBytes: number;
  /** Which blob store workers, clients and the CLI use (`TREADLE_BLOB_STORE`, `TREADLE_S3_*`). */
  blobStore: BlobStoreSettings;
  /** The local task list the example approval actions write to, absolute (`TREADLE_TASKS_FILE`, relative to the home). */
  tasksFile: string;
  /**
   * The cross-run call log (`TREADLE_CALL_LOG`): a SQLite file, absolute (relative to the home), or a
   * `postgres://` URL as given; null when `off`. Open it with `openCallLog` (src/storage/open-call-log.ts).
   */
  callLog: string | null;
  /** The engine version workers start items on (`TREADLE_ENGINE_VERSION`, default the newest): see docs/versioning.md. */
  engineVersion: number;
  /**
   * Workflows a worker keeps in its cache (`TREADLE_WORKFLOW_CACHE`, default {@link DEFAULT_WORKFLOW_CACHE}):
   * each waiting item held costs about 252 KiB (BENCHMARKS.md); one evicted replays when it is next woken.
   */
  workflowCache: number;
}

/** The workflow cache's default size: 1,000 waiting items ≈ 250 MB of worker memory. */
export const DEFAULT_WORKFLOW_CACHE = 1_000;

export const DEFAULT_TASK_QUEUE = 'treadle';

/** Reads the configuration; throws naming the variable when a value is malformed. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): TreadleConfig {
  const threshold = env.TREADLE_BLOB_THRESHOLD;
  const blobThresholdBytes =
    threshold === undefined || threshold === '' ? DEFAULT_BLOB_THRESHOLD_BYTES : Number(threshold);
  if (!Number.isInteger(blobThresholdBytes) || blobThresholdBytes < 0) {
    throw configError(`TREADLE_BLOB_THRESHOLD must be a whole number of bytes, got "${threshold}"`);
  }
  const engine = env.TREADLE_ENGINE_VERSION?.trim();
  const engineVersion = engine ? Number(engine) : ENGINE_VERSION;
  if (!isEngineVersion(engineVersion)) {
    throw configError(
      `TREADLE_ENGINE_VERSION must be a whole number from 1 to ${ENGINE_VERSION} (this worker's newest engine), got "${engine}"`,
    );
  }
  const cache = env.TREADLE_WORKFLOW_CACHE?.trim();
  const workflowCache = cache ? Number(cache) : DEFAULT_WORKFLOW_CACHE;
  if (!Number.isInteger(workflowCache) || workflowCache < 0)
    throw configError(`TREADLE_WORKFLOW_CACHE must be a whole number of workflows (0 or more), got "${cache}"`);
  return {
    taskQueue: env.TREADLE_TASK_QUEUE || DEFAULT_TASK_QUEUE,
    home: treadleHome(env),
    blobDir: homeLocation('TREADLE_BLOB_DIR', env),
    blobThresholdBytes,
    blobStore: blobStoreSettings(env),
    tasksFile: homeLocation('TREADLE_TASKS_FILE', env),
    callLog: callLogOf(env),
    engineVersion,
    workflowCache,
  };
}

function callLogOf(env: NodeJS.ProcessEnv): string | null {
  const given = env.TREADLE_CALL_LOG?.trim();
  if (given && ['off', 'none', 'false', '0'].includes(given.toLowerCase())) return null;
  // A database URL is not a place in the home.
  if (given && isPostgresUrl(given)) return given;
  return homeLocation('TREADLE_CALL_LOG', env);
}

/** Key prefix in the bucket when `TREADLE_S3_PREFIX` is unset. */
export const DEFAULT_S3_PREFIX = 'treadle/';

/**
 * The blob store settings: `TREADLE_BLOB_STORE=file|s3`, by default `s3` when `TREADLE_S3_BUCKET` is set and
 * `file` otherwise. Credentials are not read here: the AWS SDK's default chain finds them.
 */
function blobStoreSettings(env: NodeJS.ProcessEnv): BlobStoreSettings {
  const bucket = env.TREADLE_S3_BUCKET?.trim() ?? '';
  const kind = env.TREADLE_BLOB_STORE?.trim() || (bucket ? 's3' : 'file');
  if (kind === 'file') return { kind, dir: homeLocation('TREADLE_BLOB_DIR', env) };
  if (kind !== 's3') throw configError(`TREADLE_BLOB_STORE must be "file" or "s3", got "${kind}"`);

  if (!bucket)
    throw configError('TREADLE_BLOB_STORE=s3 needs TREADLE_S3_BUCKET, the name of the bucket to keep blobs in');
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(bucket)) {
    throw configError(
      `TREADLE_S3_BUCKET must be a bare bucket name (put any folder in TREADLE_S3_PREFIX), got "${bucket}"`,
    );
  }
  const settings: BlobStoreSettings = { kind, bucket, prefix: s3Prefix(env.TREADLE_S3_PREFIX) };

  const endpoint = env.TREADLE_S3_ENDPOINT?.trim();
  if (endpoint) {
    let url: URL | undefined;
    try {
      url = new URL(endpoint);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      throw configError(`TREADLE_S3_ENDPOINT must be an http(s) URL such as http://minio:9000, got "${endpoint}"`);
    }
    settings.endpoint = endpoint;
  }
  // An S3-compatible server usually ignores the region, but the SDK refuses to sign without one.
  const region =
    env.TREADLE_S3_REGION?.trim() ||
    env.AWS_REGION?.trim() ||
    env.AWS_DEFAULT_REGION?.trim() ||
    (endpoint ? 'us-east-1' : undefined);
  if (region) settings.region = region;

  const pathStyle = env.TREADLE_S3_FORCE_PATH_STYLE?.trim().toLowerCase();
  if (pathStyle === undefined || pathStyle === '') {
    // MinIO and most S3-compatible servers want path-style URLs; AWS itself wants virtual-hosted ones.
    settings.forcePathStyle = Boolean(endpoint);
  } else if (pathStyle === 'true' || pathStyle === '1') {
    settings.forcePathStyle = true;
  } else if (pathStyle === 'false' || pathStyle === '0') {
    settings.forcePathStyle = false;
  } else {
    throw configError(`TREADLE_S3_FORCE_PATH_STYLE must be true or false, got "${env.TREADLE_S3_FORCE_PATH_STYLE}"`);
  }
  return settings;
}

/** `TREADLE_S3_PREFIX` without a leading slash and with a trailing one, so keys are `<prefix>blobs/...`. */
function s3Prefix(value: string | undefined): string {
  if (value === undefined) return DEFAULT_S3_PREFIX;
  const trimmed = value.trim().replace(/^\/+/, '');
  return trimmed === '' || trimmed.endsWith('/') ? trimmed : `${trimmed}/`;
}
