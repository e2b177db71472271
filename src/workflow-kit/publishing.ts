/**
 * What a Treadle workflow shows the world besides its result, shared by the work item, the TDD node and the
 * loop stage: its event stream (numbered, in workflow time, routine ones kept out of the
 * worker's log), what it last published as search attributes and memo (each upsert is a command and a
 * history event, so only changes are upserted), and its pending decisions as listings read them.
 */
import { log, upsertMemo } from '@temporalio/workflow';
import { truncateText } from '../model/limits';
import type { EventType, Json, TreadleEvent } from '../model/shapes';
import type { PendingReview, ReviewsMemo } from '../model/state';
import { now } from './common';

/** Where a workflow keeps its events: the list the `state` query pages through, and its length. */
export interface EventHolder {
  events: TreadleEvent[];
  eventCount: number;
}

/**
 * A workflow's event stream. With `logging`, events not in its `routine` set also go to the worker's log
 * (every workflow log line is a sink call, BENCHMARKS.md); with `truncate`, messages are cut to the usual
 * length (for messages built from agents' text).
 */
export class EventStream {
  constructor(
    private readonly holder: EventHolder,
    private readonly itemId: string,
    private readonly logging?: { routine: ReadonlySet<EventType>; correlationId: string },
    private readonly truncate = false,
  ) {}

  /** Appends an event; logs it unless it is routine. */
  emit(type: EventType, message: string, fields: Partial<TreadleEvent> = {}): void {
    const { holder } = this;
    const event: TreadleEvent = {
      seq: holder.events.length + 1,
      type,
      itemId: this.itemId,
      at: now(),
      message: this.truncate ? truncateText(message) : message,
      ...fields,
    };
    holder.events.push(event);
    holder.eventCount = event.seq;
    const logging = this.logging;
    if (logging !== undefined && !logging.routine.has(type))
      log.info(message, {
        event: type,
        stage: fields.stage,
        attempt: fields.attempt,
        correlationId: logging.correlationId,
      });
  }
}

/** What a workflow last published under each name (a search attribute set, a memo key), as text. */
export class Publications {
  private readonly last = new Map<string, string>();

  /** Whether anything was published (or assumed published) under `name`. */
  has(name: string): boolean {
    return this.last.has(name);
  }

  /** Records `text` as published under `name` without upserting (the workflow's starter set it). */
  assume(name: string, text: string): void {
    this.last.set(name, text);
  }

  /**
   * Whether the pending set `text` differs from the one last published under `name` (an empty set before
   * the first); if so it is recorded as published.
   */
  decisionsChanged(name: string, text: string): boolean {
    if (!this.last.has(name)) this.last.set(name, NO_PENDING_DECISIONS);
    return this.changed(name, text);
  }

  /** Whether `text` differs from what was published under `name`; if so it is recorded as published. */
  changed(name: string, text: string): boolean {
    if (this.last.get(name) === text) return false;
    this.last.set(name, text);
    return true;
  }

  /**
   * Upserts memo `key` when `value` changed. With `skipInitialNull` a null before anything was published is
   * not upserted (an item that never had any leaves the key out).
   */
  memo(key: string, value: Json | object | null, skipInitialNull: boolean): void {
    const text = JSON.stringify(value);
    if (skipInitialNull && value === null && !this.last.has(key)) return;
    if (this.changed(key, text)) upsertMemo({ [key]: value });
  }
}

/** Reviews kept in the memo; the `state` query lists them all. */
const MEMO_REVIEWS = 20;
/** Visibility limits each search attribute value (2 KB by default); the stage list stays under this. */
const PENDING_REVIEWS_ATTRIBUTE_BYTES = 1_500;

/** The pending reviews for listings: the first few, messages short, and how many were left out. */
export function reviewsMemo(pipeline: string, pendingReviews: PendingReview[]): ReviewsMemo | null {
  if (pendingReviews.length === 0) return null;
  const reviews = pendingReviews.slice(0, MEMO_REVIEWS).map((r) => ({ ...r, message: truncateText(r.message, 200) }));
  return { pipeline, reviews, omitted: pendingReviews.length - reviews.length };
}

/**
 * The decisions a workflow waits on, as text: its pending reviews (a stage asked again is a new one; one handed to
 * another group on its deadline, engine 8, changes too) and pending approval ids. `TreadleDecisionAt` moves
 * whenever this text changes (engine 7), which is what the inbox's delta listing follows.
 */
export function pendingDecisionSet(
  pendingReviews: readonly PendingReview[],
  approvalIds: readonly string[] = [],
): string {
  const reviews = pendingReviews.map((r) =>
    r.escalated ? [r.stage, r.requestedAt, r.escalated.to] : [r.stage, r.requestedAt],
  );
  return JSON.stringify([reviews, approvalIds]);
}

/** The text of an empty pending set: a workflow that never waited on anyone has no `TreadleDecisionAt`. */
export const NO_PENDING_DECISIONS = pendingDecisionSet([]);

/** As many waiting stage names as fit in one search attribute value. */
export function attributeStages(stages: string[]): string[] {
  const out: string[] = [];
  let bytes = 2;
  for (const stage of stages) {
    bytes += stage.length + 3;
    if (bytes > PENDING_REVIEWS_ATTRIBUTE_BYTES) break;
    out.push(stage);
  }
  return out;
}

/** The stage a rejected decision payload named, if it named one. */
export function stageOf(payload: unknown): { stage?: string } {
  const stage = typeof payload === 'object' && payload !== null ? (payload as { stage?: unknown }).stage : undefined;
  return typeof stage === 'string' ? { stage: truncateText(stage, 100) } : {};
}

/** A rejected decision payload described by its shape: outcome kind and size, never its content. */
export function describePayload(payload: unknown): Record<string, Json> {
  const outcome =
    typeof payload === 'object' && payload !== null ? (payload as { outcome?: { kind?: unknown } }).outcome : undefined;
  const kind = typeof outcome?.kind === 'string' ? truncateText(outcome.kind, 40) : null;
  let bytes = 0;
  try {
    bytes = JSON.stringify(payload ?? null).length;
  } catch {
    bytes = -1;
  }
  return { outcomeKind: kind, payloadBytes: bytes };
}
