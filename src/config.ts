/**
 * Configuration from the environment, with the defaults the README's table lists.
 */
import { DEFAULT_BLOB_DIR, DEFAULT_BLOB_THRESHOLD_BYTES } from './storage/blob-store';

/** Treadle's settings. */
export interface TreadleConfig {
  /** Temporal frontend; when `TEMPORAL_ADDRESS` is set, `treadle dev` starts no server. */
  address: string;
  addressFromEnv: boolean;
  namespace: string;
  taskQueue: string;
  blobDir: string;
  blobThresholdBytes: number;
}

export const DEFAULT_ADDRESS = 'localhost:7233';
export const DEFAULT_NAMESPACE = 'default';
export const DEFAULT_TASK_QUEUE = 'treadle';

/** Reads the configuration; throws naming the variable when a value is malformed. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): TreadleConfig {
  const threshold = env.TREADLE_BLOB_THRESHOLD;
  const blobThresholdBytes = threshold === undefined || threshold === '' ? DEFAULT_BLOB_THRESHOLD_BYTES : Number(threshold);
  if (!Number.isInteger(blobThresholdBytes) || blobThresholdBytes < 0) {
    throw new Error(`TREADLE_BLOB_THRESHOLD must be a whole number of bytes, got "${threshold}"`);
  }
  return {
    address: env.TEMPORAL_ADDRESS || DEFAULT_ADDRESS,
    addressFromEnv: Boolean(env.TEMPORAL_ADDRESS),
    namespace: env.TEMPORAL_NAMESPACE || DEFAULT_NAMESPACE,
    taskQueue: env.TREADLE_TASK_QUEUE || DEFAULT_TASK_QUEUE,
    blobDir: env.TREADLE_BLOB_DIR || DEFAULT_BLOB_DIR,
    blobThresholdBytes,
  };
}
