/**
 * What Treadle's schedules are made of (`client.schedules`, `treadle schedule`): the options a schedule is created
 * with, what its listing and description show, and the checks of a name. No SDK import, so the CLI reads it at start.
 */
import type { ItemPriority } from '../model/priority';
import type { Json } from '../model/shapes';

/**
 * What a firing does while the schedule's previous item still runs: `skip` starts nothing (the firing is counted
 * as skipped), `buffer` starts one item when the running one ends (Temporal's SKIP and BUFFER_ONE).
 */
export type ScheduleOverlap = 'skip' | 'buffer';

/** The overlap values, for parsers and messages. */
export const SCHEDULE_OVERLAPS: readonly ScheduleOverlap[] = ['skip', 'buffer'];

/** Temporal's overlap policy for each of Treadle's. */
export const OVERLAP_POLICIES = { skip: 'SKIP', buffer: 'BUFFER_ONE' } as const;

/**
 * A firing the server could not take on time (it was down or overloaded) is still taken this late, and missed
 * (counted in `missedCatchup`) when later: a day's work an hour late is still wanted, a backlog of firings is not.
 */
export const DEFAULT_CATCHUP_WINDOW_MS = 60 * 60_000;
/** Temporal refuses a shorter catchup window. */
export const MIN_CATCHUP_WINDOW_MS = 10_000;

/** The memo key where a schedule keeps what Treadle shows of it (the server keeps cron only compiled). */
export const SCHEDULE_MEMO_KEY = 'treadleSchedule';

/** What the memo holds: the pipeline's name, the cron strings as given, the overlap. */
export interface ScheduleMemo {
  pipeline: string;
  cron: string[];
  overlap: ScheduleOverlap;
}

/** How a schedule is created (`client.schedules.create`). */
export interface ScheduleCreateOptions extends ItemPriority {
  /**
   * When it fires: one cron string or several (their union). Five to seven fields as Temporal reads them, or
   * `@hourly`, `@daily`, …, or `@every 10m` (an interval, `@every 1h/15m` with a phase). Required.
   */
  cron: string | string[];
  /** Every item's input (default null): plain JSON, stored in the blob store once when large. */
  input?: Json;
  /** Default `skip`. */
  overlap?: ScheduleOverlap;
  /** Created paused: it fires only when triggered until it is unpaused. */
  paused?: boolean;
  /** The schedule's note (why it is paused, say), shown by `list` and `describe`. */
  note?: string;
  /** The IANA time zone the cron strings are read in (default UTC), e.g. `Europe/Paris`. */
  timezone?: string;
  /** How late a firing the server missed may still be taken (default {@link DEFAULT_CATCHUP_WINDOW_MS}; 10 s at least). */
  catchupWindowMs?: number;
  /** Every item's token budget, over the pipeline's `token_budget`. */
  tokenBudget?: number;
}

/** One firing that started an item. */
export interface ScheduleFiring {
  /** The item's id, `<schedule name>-<firing time, RFC 3339 in UTC to the second>`: `nightly-2026-12-07T02:00:00Z`. */
  itemId: string;
  /** The time it was due (a triggered firing: when it was triggered), ISO 8601. */
  scheduledAt: string;
  /** When it started the item, ISO 8601. */
  takenAt: string;
  /**
   * The item's status as its `TreadleStatus` says (`running`, `waiting_review`, `completed`, `failed`, …), else
   * Temporal's (`terminated`), or `gone` when retention has removed it.
   */
  status: string;
}

/** A schedule as `list` shows it (from visibility, which follows a change by a moment). */
export interface ScheduleListing {
  name: string;
  pipeline: string;
  cron: string[];
  overlap: string;
  paused: boolean;
  note?: string;
  /** The next firing's time (ISO 8601), when it has one. */
  nextFiring?: string;
  /** The newest firing's item and when it started, when it has fired. */
  lastFiring?: { itemId: string; takenAt: string };
}

/** A schedule as `describe` shows it, read from the schedule itself. */
export interface ScheduleDetail extends ScheduleListing {
  /** The time zone the cron strings are read in. */
  timezone: string;
  catchupWindowMs: number;
  /** The task queue its items start on. */
  taskQueue: string;
  /** Up to ten next firing times, ISO 8601. */
  nextFirings: string[];
  /** The firings Temporal keeps (its last ten), newest first, with each item's status. */
  recentFirings: ScheduleFiring[];
  /** The items it started that still run. */
  runningItems: string[];
  /** Items started, in all. */
  firings: number;
  /** Firings that started nothing because an item still ran (`skip`). */
  skippedOverlap: number;
  /** Firings waiting for the running item to end (`buffer`: 0 or 1). */
  buffered: number;
  /** Firings the server missed by more than the catchup window. */
  missedCatchup: number;
  createdAt: string;
}

/** What a trigger did, as far as the schedule said within a few seconds. */
export type TriggerOutcome =
  | { outcome: 'started'; itemId: string }
  /** Nothing started: an item still runs (`skip`), or one firing waits already (`buffer`). */
  | { outcome: 'skipped'; running: string[] }
  | { outcome: 'buffered'; running: string[] }
  /** The schedule has not taken the firing yet: `describe` will show it. */
  | { outcome: 'fired' };

/** Longest schedule name: the item ids add 21 characters, and names are typed on command lines. */
export const MAX_SCHEDULE_NAME = 200;
const SCHEDULE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Why `name` cannot name a schedule, or undefined: letters, digits, `.`, `_` and `-`, starting with a letter or digit. */
export function scheduleNameProblem(name: string): string | undefined {
  if (name.length > MAX_SCHEDULE_NAME)
    return `a schedule name has at most ${MAX_SCHEDULE_NAME} characters, got ${name.length}`;
  if (!SCHEDULE_NAME.test(name))
    return `"${name}" cannot name a schedule: use letters, digits, ".", "_" and "-", starting with a letter or digit`;
  return undefined;
}
