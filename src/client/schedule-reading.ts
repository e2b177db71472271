/**
 * Reading Treadle's schedules back from Temporal: a schedule's listing (visibility) and description (the schedule
 * itself) as `ScheduleListing` and `ScheduleDetail`, each firing with its item's status.
 */
import type { Client, ScheduleDescription, ScheduleExecutionResult, ScheduleSummary } from '@temporalio/client';
import { TreadleStatus } from '../model/search-attributes';
import { isNotFound } from './errors';
import {
  OVERLAP_POLICIES,
  SCHEDULE_MEMO_KEY,
  type ScheduleDetail,
  type ScheduleFiring,
  type ScheduleListing,
  type ScheduleMemo,
  type ScheduleOverlap,
} from './schedule-shapes';

/** The memo Treadle gave a schedule, or undefined for a schedule Treadle did not create. */
export function scheduleMemo(memo: Record<string, unknown> | undefined): ScheduleMemo | undefined {
  const value = memo?.[SCHEDULE_MEMO_KEY];
  return typeof value === 'object' && value !== null ? (value as ScheduleMemo) : undefined;
}

/** Treadle's word for a Temporal overlap policy (`BUFFER_ONE` → `buffer`), or Temporal's for one Treadle has none for. */
function overlapName(policy: string | undefined): string {
  const entry = Object.entries(OVERLAP_POLICIES).find(([, p]) => p === policy);
  return entry ? (entry[0] as ScheduleOverlap) : (policy ?? 'SKIP').toLowerCase();
}

/** The newest recent action, when there is one (Temporal lists them oldest first). */
const newest = (actions: ScheduleExecutionResult[]): ScheduleExecutionResult | undefined => actions[actions.length - 1];

/** A schedule of a visibility listing, as `list` shows it; undefined for one Treadle did not create. */
export function listingOf(summary: ScheduleSummary): ScheduleListing | undefined {
  const memo = scheduleMemo(summary.memo);
  if (!memo) return undefined;
  const last = newest(summary.info.recentActions);
  const next = summary.info.nextActionTimes[0];
  return {
    name: summary.scheduleId,
    pipeline: memo.pipeline,
    cron: memo.cron,
    overlap: memo.overlap,
    paused: summary.state.paused,
    ...(summary.state.note ? { note: summary.state.note } : {}),
    ...(next ? { nextFiring: next.toISOString() } : {}),
    ...(last ? { lastFiring: { itemId: last.action.workflow.workflowId, takenAt: last.takenAt.toISOString() } } : {}),
  };
}

/**
 * An item's status: its `TreadleStatus` (kept current by the workflow), else Temporal's execution status in lower
 * case (a terminated item never set its own), or `gone` once retention has removed it.
 */
async function itemStatus(client: Client, itemId: string): Promise<string> {
  try {
    const described = await client.workflow.getHandle(itemId).describe();
    return described.typedSearchAttributes.get(TreadleStatus) ?? described.status.name.toLowerCase();
  } catch (error) {
    if (isNotFound(error)) return 'gone';
    throw error;
  }
}

/** A schedule's description as `describe` shows it, with each recent firing's item status (asked in parallel). */
export async function detailOf(client: Client, described: ScheduleDescription): Promise<ScheduleDetail> {
  const memo = scheduleMemo(described.memo);
  const { info, state, spec, action, policies } = described;
  const recent = [...info.recentActions].reverse();
  const statuses = await Promise.all(recent.map((r) => itemStatus(client, r.action.workflow.workflowId)));
  const recentFirings: ScheduleFiring[] = recent.map((r, i) => ({
    itemId: r.action.workflow.workflowId,
    scheduledAt: r.scheduledAt.toISOString(),
    takenAt: r.takenAt.toISOString(),
    status: statuses[i]!,
  }));
  const nextFirings = info.nextActionTimes.map((t) => t.toISOString());
  return {
    name: described.scheduleId,
    pipeline: memo?.pipeline ?? '?',
    cron: memo?.cron ?? [],
    overlap: overlapName(policies.overlap),
    paused: state.paused,
    ...(state.note ? { note: state.note } : {}),
    ...(nextFirings[0] ? { nextFiring: nextFirings[0] } : {}),
    ...(recentFirings[0] ? { lastFiring: { itemId: recentFirings[0].itemId, takenAt: recentFirings[0].takenAt } } : {}),
    timezone: spec.timezone || 'UTC',
    catchupWindowMs: policies.catchupWindow,
    taskQueue: action.taskQueue,
    nextFirings,
    recentFirings,
    runningItems: info.runningActions.map((a) => a.workflow.workflowId),
    firings: info.numActionsTaken,
    skippedOverlap: info.numActionsSkippedOverlap,
    buffered: Number(described.raw.info?.bufferSize ?? 0),
    missedCatchup: info.numActionsMissedCatchupWindow,
    createdAt: info.createdAt.toISOString(),
  };
}
