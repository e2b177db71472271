/**
 * Blob store defaults, in a module of their own so that reading the configuration loads no store (and no
 * zod): the CLI's start time depends on it.
 */
import path from 'node:path';

/** Default blob folder, relative to the working directory. */
export const DEFAULT_BLOB_DIR = path.join('.treadle', 'blobs');

export { DEFAULT_BLOB_THRESHOLD_BYTES } from '../model/limits';
