/**
 * Approval actions (seed 003): the action type registry with the seed's five examples, the local task list
 * they write to, and the seed's idempotency key. Workflow code imports `./idempotency` directly: this index
 * also loads zod and Node's file system.
 */
export * from './actions';
export * from './errors';
export * from './task-list';
