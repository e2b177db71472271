/**
 * Blob store defaults, in a module of their own so that reading the configuration loads no store (and no
 * zod): the CLI's start time depends on it. The default folder is the home's (src/config/home.ts).
 */
export { DEFAULT_BLOB_THRESHOLD_BYTES } from '../model/limits';
