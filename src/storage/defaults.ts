/**
 * Blob store defaults, in a module of their own so that reading the configuration loads no store (and no
 * zod): the CLI's start time depends on it.
 */
import path from 'node:path';

/** Default blob folder, relative to the working directory. */
export const DEFAULT_BLOB_DIR = path.join('.treadle', 'blobs');

/** Artefacts whose JSON is larger than this go to the blob store (override: `TREADLE_BLOB_THRESHOLD`). */
export const DEFAULT_BLOB_THRESHOLD_BYTES = 2 * 1024;
