/**
 * Creating a schedule (`client.schedules.create`): a Temporal Schedule whose action starts a work item, checked
 * as `startWorkItem` checks a start (./start.ts `prepareWorkItem`). Loaded on first use, with the start path.
 */
import { ScheduleAlreadyRunning, ServiceError, type ScheduleOptions } from '@temporalio/client';
import type { TemporalPriority } from '../model/priority';
import type { WorkItemInput } from '../model/state';
import { TreadleError } from './errors';
import {
  DEFAULT_CATCHUP_WINDOW_MS,
  MIN_CATCHUP_WINDOW_MS,
  OVERLAP_POLICIES,
  SCHEDULE_MEMO_KEY,
  SCHEDULE_OVERLAPS,
  scheduleNameProblem,
  type ScheduleCreateOptions,
  type ScheduleMemo,
} from './schedule-shapes';
import {
  itemSummary,
  prepareWorkItem,
  startAttributes,
  startRefused,
  WORK_ITEM_WORKFLOW_TYPE,
  type StartContext,
} from './start';

/**
 * Creates schedule `name` firing work items on `pipeline` (see `SchedulesClient.create`). Everything is checked
 * before the schedule is made, each refusal an `invalid_input` or `invalid_pipeline` TreadleError: the name (and
 * that no schedule has it), the cron strings and time zone (as the server reads them), the overlap, the catchup
 * window, the spec (every problem listed), the input, the token budget and the priority.
 */
export async function createSchedule(
  ctx: StartContext,
  name: string,
  pipeline: unknown,
  options: ScheduleCreateOptions,
): Promise<void> {
  const cron = checkedOptions(name, options);
  const overlap = options.overlap ?? 'skip';
  const item = await prepareWorkItem(ctx, pipeline, options.input ?? null, options);
  // No item id and no correlation id: the workflow takes the id Temporal gives each firing, `<name>-<time>`.
  const args: WorkItemInput = {
    pipeline: item.raw,
    input: item.input,
    ...(options.tokenBudget !== undefined ? { tokenBudget: options.tokenBudget } : {}),
  };
  const memo: ScheduleMemo = { pipeline: item.spec.name, cron, overlap };
  const schedule: ScheduleOptions = {
    scheduleId: name,
    spec: { cronExpressions: cron, ...(options.timezone ? { timezone: options.timezone } : {}) },
    action: {
      type: 'startWorkflow',
      workflowType: WORK_ITEM_WORKFLOW_TYPE,
      // Temporal appends each firing's time to it: the item ids are `<name>-<time>`.
      workflowId: name,
      taskQueue: ctx.taskQueue,
      args: [args],
      typedSearchAttributes: startAttributes(item.spec),
      staticSummary: itemSummary(item.spec),
      // The SDK sends an action's priority (it reads it back in describe) though its create type omits it.
      ...(item.priority as { priority?: TemporalPriority }),
    },
    policies: {
      overlap: OVERLAP_POLICIES[overlap],
      catchupWindow: options.catchupWindowMs ?? DEFAULT_CATCHUP_WINDOW_MS,
    },
    memo: { [SCHEDULE_MEMO_KEY]: memo },
    state: { paused: options.paused ?? false, ...(options.note !== undefined ? { note: options.note } : {}) },
  };
  try {
    await ctx.client.schedule.create(schedule);
  } catch (error) {
    throw createRefused(name, error);
  }
}

/** The cron strings, after refusing options that cannot work (before anything is stored). */
function checkedOptions(name: string, options: ScheduleCreateOptions): string[] {
  const nameProblem = scheduleNameProblem(name);
  if (nameProblem) throw new TreadleError(nameProblem, 'invalid_input');
  const cron = (Array.isArray(options.cron) ? options.cron : [options.cron]).map((c) => c?.trim());
  if (cron.length === 0 || cron.some((c) => !c))
    throw new TreadleError(`schedule ${name} needs a cron string (e.g. "0 2 * * *" or "@every 1h")`, 'invalid_input');
  if (options.overlap !== undefined && !SCHEDULE_OVERLAPS.includes(options.overlap))
    throw new TreadleError(
      `overlap must be ${SCHEDULE_OVERLAPS.join(' or ')}, got ${String(options.overlap)}`,
      'invalid_input',
    );
  const window = options.catchupWindowMs;
  if (window !== undefined && !(Number.isFinite(window) && window >= MIN_CATCHUP_WINDOW_MS))
    throw new TreadleError(`the catchup window must be at least 10 s, got ${window} ms`, 'invalid_input');
  return cron;
}

/**
 * What a refused create throws: a name in use, or what the server found wrong with the spec (a cron string, a
 * time zone: the SDK throws those, and only those, as TypeError) as `invalid_input`; another refusal with the
 * server's reason (search attributes the server lacks, explained); anything else as it came.
 */
function createRefused(name: string, error: unknown): unknown {
  if (error instanceof ScheduleAlreadyRunning)
    return new TreadleError(
      `a schedule named "${name}" exists already (delete it first, or choose another name)`,
      'invalid_input',
      [],
      { cause: error },
    );
  if (error instanceof TypeError)
    return new TreadleError(`schedule ${name} is invalid: ${error.message}`, 'invalid_input', [error.message], {
      cause: error,
    });
  if (error instanceof ServiceError) return startRefused(`schedule ${name}`, error);
  return error;
}
