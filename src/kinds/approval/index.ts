/**
 * Approval actions (seed 003): the action type registry and its typed errors. The seed's five example types
 * and the task list they write to are in examples/task-list; the idempotency key is in model/hashing.
 */
export * from './actions';
export * from './errors';
