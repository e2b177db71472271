/**
 * The client's parts loaded on first use (./on-demand.ts wraps them): starting items (the pipeline model and its
 * validation), audits and approval lookups are what few commands do, and `status`, `reviews` and `approve list`
 * start faster without them (issue 26 §5). The client's one place for `require` (docs/architecture.md "Lazy
 * loading").
 */
import type * as AuditModule from './audit';
import type * as ApprovalLookupModule from './approval-lookup';
import type * as StartModule from './start';
import type * as EvalScorersModule from './eval-scorers';
import type * as EvalRunnerModule from './eval-runner';
import type * as ScheduleCreateModule from './schedule-create';
import type * as ForkModule from './fork';

/**
 * Each module, required the first time it is asked for (`require` caches it).
 * @internal Left out of the published declarations (tsconfig.build.json `stripInternal`), which must name no
 * optional package; the table is no API.
 */
export const load = {
  start: (): typeof StartModule => require('./start'),
  audit: (): typeof AuditModule => require('./audit'),
  approvalLookup: (): typeof ApprovalLookupModule => require('./approval-lookup'),
  evalScorers: (): typeof EvalScorersModule => require('./eval-scorers'),
  evalRunner: (): typeof EvalRunnerModule => require('./eval-runner'),
  /** Creating a schedule checks a start as `start` does, so it loads the same. */
  scheduleCreate: (): typeof ScheduleCreateModule => require('./schedule-create'),
  /** A fork validates its spec as a start does. */
  fork: (): typeof ForkModule => require('./fork'),
};
