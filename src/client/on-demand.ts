/**
 * The client's parts loaded on first use: starting items (the pipeline model and its validation), audits and
 * approval lookups are what few commands do, and `status`, `reviews` and `approve list` start faster without
 * them (issue 26 §5; test/integration/start-modules.test.ts checks what the client loads).
 */
import type * as AuditModule from './audit';
import type * as ApprovalLookupModule from './approval-lookup';
import type * as StartModule from './start';
import type * as ScheduleCreateModule from './schedule-create';
import type * as ForkModule from './fork';
import { load } from './lazy-modules';

const { start: startModule, audit: auditModule, approvalLookup, scheduleCreate, fork: forkModule } = load;

export const startWorkItem: typeof StartModule.startWorkItem = (...args) => startModule().startWorkItem(...args);
export const startTddTree: typeof StartModule.startTddTree = (...args) => startModule().startTddTree(...args);
export const createSchedule: typeof ScheduleCreateModule.createSchedule = (...args) =>
  scheduleCreate().createSchedule(...args);
export const startFork: typeof ForkModule.startFork = (...args) => forkModule().startFork(...args);
export const startInputOf: typeof ForkModule.startInputOf = (...args) => forkModule().startInputOf(...args);
export const forksOf: typeof ForkModule.forksOf = (...args) => forkModule().forksOf(...args);
export const audit: typeof AuditModule.audit = (...args) => auditModule().audit(...args);
export const approvalItem: typeof ApprovalLookupModule.approvalItem = (...args) =>
  approvalLookup().approvalItem(...args);
export const decidedBefore: typeof ApprovalLookupModule.decidedBefore = (...args) =>
  approvalLookup().decidedBefore(...args);

/**
 * The default id of a work item: `<pipeline>-<first 16 hex of sha256(canonical input)>`, so the same input
 * names the same run (seed 003: a run is found by its pipeline and input hash).
 */
export const runIdFor: typeof StartModule.runIdFor = (pipeline, input) => startModule().runIdFor(pipeline, input);
