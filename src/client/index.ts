/**
 * The SDK client's public face: `import { TreadleClient } from '../client'` reads this folder. `TreadleClient`
 * lives in treadle-client.ts; its parts (items, decisions, approvals, loops, trees) in their own files.
 */
export * from './treadle-client';
