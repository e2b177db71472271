/**
 * `client.schedules`: work items started on a schedule, over Temporal Schedules (issue 42). Each firing starts an
 * ordinary work item on this client's task queue whose id is `<schedule name>-<firing time>`
 * (`nightly-2026-12-07T02:00:00Z`): the same firing never starts two items, and the id says which firing it was.
 */
import { ScheduleNotFoundError, type ScheduleDescription, type ScheduleHandle } from '@temporalio/client';
import { createSchedule } from '../on-demand';
import { defaultReviewer, TreadleError } from '../errors';
import { detailOf, listingOf } from '../schedule-reading';
import type { ScheduleCreateOptions, ScheduleDetail, ScheduleListing, TriggerOutcome } from '../schedule-shapes';
import { ClientPart } from './context';

/** How long `trigger` waits for the schedule to say what the firing did. */
const TRIGGER_OUTCOME_WAIT_MS = 10_000;
/** How often `trigger` asks meanwhile. */
const TRIGGER_POLL_MS = 250;

/** The schedules part of `TreadleClient` (`client.schedules`). */
export class SchedulesClient extends ClientPart {
  /**
   * Creates schedule `name` (letters, digits, `.`, `_`, `-`): at each time `options.cron` names it starts a work
   * item on `pipeline` (a spec, a builder or a parsed pipeline file) with `options.input`, on this client's task
   * queue. Checked as `items.start` checks a start (every spec problem listed, `invalid_pipeline`; the input plain
   * JSON and offloaded when large; token budget, priority) and as the server reads cron strings and time zones,
   * before anything is made; a name in use is refused (`invalid_input`). Answers the schedule as `describe` does.
   */
  async create(name: string, pipeline: unknown, options: ScheduleCreateOptions): Promise<ScheduleDetail> {
    await createSchedule(this.context.startContext(), name, pipeline, options).catch(this.context.rethrow);
    return this.describe(name);
  }

  /**
   * The schedules Treadle created in the namespace (those of other tools are left out), by name. Read from
   * visibility, which follows a create, pause or delete by a moment.
   */
  async list(): Promise<ScheduleListing[]> {
    const listings: ScheduleListing[] = [];
    try {
      for await (const summary of this.context.client.schedule.list()) {
        const listing = listingOf(summary);
        if (listing) listings.push(listing);
      }
    } catch (error) {
      this.context.rethrow(error);
    }
    return listings.sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Schedule `name` as it is now: its pipeline, cron strings, time zone, overlap, catchup window, whether it is
   * paused and its note, its next firings, its recent firings (newest first, each with its item's id and status),
   * the items still running and its counts. `not_found` for a name no schedule has.
   */
  async describe(name: string): Promise<ScheduleDetail> {
    return this.onSchedule(name, async (h) => detailOf(this.context.client, await h.describe()));
  }

  /** Pauses schedule `name`: it fires only when triggered. `note` says why (default: who paused it). */
  async pause(name: string, note = `paused by ${defaultReviewer()}`): Promise<void> {
    await this.onSchedule(name, (h) => h.pause(note));
  }

  /** Unpauses schedule `name`: it fires at its times again (the ones it missed while paused are not made up). */
  async unpause(name: string, note = `unpaused by ${defaultReviewer()}`): Promise<void> {
    await this.onSchedule(name, (h) => h.unpause(note));
  }

  /**
   * Fires schedule `name` now, under its own overlap policy (`skip`: nothing starts while its item runs; `buffer`:
   * the firing waits for it), paused or not. Answers what the firing did, as the schedule says within 10 s: the
   * item it started, or that it was skipped or buffered behind the running items, or only that it fired. When the
   * schedule fired (or fires) within the current second, it waits for the next: the item id would be the same.
   */
  async trigger(name: string): Promise<TriggerOutcome> {
    return this.onSchedule(name, async (h) => {
      const before = await h.describe();
      const counts = (d: typeof before) => ({
        taken: d.info.numActionsTaken,
        skipped: d.info.numActionsSkippedOverlap,
        buffered: Number(d.raw.info?.bufferSize ?? 0),
        // `buffer` with one firing waiting already: this one is dropped, started never.
        dropped: Number(d.raw.info?.bufferDropped ?? 0),
      });
      const was = counts(before);
      await outsideFiringSeconds(before);
      await h.trigger(before.policies.overlap);
      const deadline = Date.now() + TRIGGER_OUTCOME_WAIT_MS;
      while (Date.now() < deadline) {
        await delay(TRIGGER_POLL_MS);
        const now = await h.describe();
        const is = counts(now);
        const running = now.info.runningActions.map((a) => a.workflow.workflowId);
        const started = now.info.recentActions[now.info.recentActions.length - 1];
        if (is.taken > was.taken && started) return { outcome: 'started', itemId: started.action.workflow.workflowId };
        if (is.skipped > was.skipped || is.dropped > was.dropped) return { outcome: 'skipped', running };
        if (is.buffered > was.buffered) return { outcome: 'buffered', running };
      }
      return { outcome: 'fired' };
    });
  }

  /** Deletes schedule `name`: it fires no more; the items it started go on. */
  async delete(name: string): Promise<void> {
    await this.onSchedule(name, (h) => h.delete());
  }

  /** Runs `fn` on schedule `name`'s handle, a name no schedule has becoming one clear `not_found` error. */
  private async onSchedule<T>(name: string, fn: (handle: ScheduleHandle) => Promise<T>): Promise<T> {
    try {
      return await fn(this.context.client.schedule.getHandle(name));
    } catch (error) {
      if (error instanceof ScheduleNotFoundError)
        throw new TreadleError(
          `no schedule named "${name}" in namespace ${this.context.client.options.namespace}`,
          'not_found',
          [],
          { cause: error },
        );
      throw this.context.explainFailure(error);
    }
  }
}

/** Resolves after `ms`. */
const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Waits until the clock is in a second none of the schedule's recent or next firings is in. Temporal names a
 * firing's item `<name>-<time to the second>`, so two firings in one second would share an id (the later one a
 * new run of the earlier's workflow).
 */
async function outsideFiringSeconds(described: ScheduleDescription): Promise<void> {
  const second = (ms: number): number => Math.floor(ms / 1000);
  const taken = new Set([
    ...described.info.recentActions.map((a) => second(a.scheduledAt.getTime())),
    ...described.info.nextActionTimes.map((t) => second(t.getTime())),
  ]);
  while (taken.has(second(Date.now()))) await delay(1000 - (Date.now() % 1000) + 10);
}
