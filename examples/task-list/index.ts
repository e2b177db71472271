/**
 * The task-list example (seed 003): the seed's five approval action types and the local task list file
 * they write to, with its typed errors. The triage pipeline's approval step requests these actions.
 */
export * from './actions';
export * from './errors';
export * from './task-list';
