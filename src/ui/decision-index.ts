/**
 * The review inbox's in-memory decision index (issue 27, G3): a per-request visibility scan costs seconds at
 * 10,000 items, so the server lists everything once, then applies a delta listing every second and a full
 * reconcile every minute. Pages, filters and counts are served from memory; subscribers (the SSE stream) hear
 * of every change with a version number.
 */
import {
  byRequestTime,
  isOverdue,
  matchesFilter,
  type DecisionFilter,
  type DecisionKind,
  type PendingDecision,
} from '../model/decisions';
import { TreadleError } from '../config/errors';
import type { DecisionChange, InboxBackend } from './backend';
import { AGE_CHOICES, OVERDUE, ageMs } from './filter';

/** How the index refreshes; tests shorten or stop the timers. */
export interface DecisionIndexOptions {
  /** Delta listing period (default 1 s); 0 disables the timer (tests call {@link DecisionIndex.refresh}). */
  deltaMs?: number;
  /** Full reconcile period (default 60 s); 0 disables the timer. */
  reconcileMs?: number;
  /** How far back each delta looks before the last one, for late visibility writes (default 10 s). */
  overlapMs?: number;
  /** Told when a refresh fails; the index keeps serving what it has. */
  onError?: (error: unknown) => void;
  now?: () => number;
}

/** Counts of the filtered decisions, for the filter bar. */
export interface DecisionCounts {
  total: number;
  byKind: Partial<Record<DecisionKind, number>>;
  byPipeline: Record<string, number>;
  byReviewers: Record<string, number>;
  /**
   * How many have waited at least each of the page's {@link AGE_CHOICES} (`15m`, `1h`, `4h`, `1d`), and how many
   * are past their deadline (`overdue`).
   */
  byAge: Record<string, number>;
}

/** One page of the filtered decisions, oldest request first. */
export interface DecisionPage {
  decisions: PendingDecision[];
  counts: DecisionCounts;
  /** Pass back as `after` for the next page; absent on the last. */
  nextCursor?: string;
  version: number;
}

/** What subscribers hear: decisions that appeared, changed or went, and the version after the change. */
export interface IndexEvent {
  version: number;
  /** New decisions and listed ones whose content changed (a page replaces a row with the same key). */
  added: PendingDecision[];
  removed: string[];
}

const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 500;

/** The index. Call {@link start} once; {@link close} stops its timers and waits for a listing in flight. */
export class DecisionIndex {
  private readonly byKey = new Map<string, PendingDecision>();
  private readonly keysByWorkflow = new Map<string, Set<string>>();
  /** Oldest first; rebuilt lazily after a change, so a burst of changes sorts once. */
  private sorted: PendingDecision[] | undefined;
  private readonly listeners = new Set<(event: IndexEvent) => void>();
  private timers: NodeJS.Timeout[] = [];
  private lastDelta = 0;
  private refreshing: Promise<void> | undefined;
  /** Timer-started listings still running: close() waits for them (see there). */
  private readonly inFlight = new Set<Promise<void>>();
  private closed = false;
  private currentVersion = 0;
  private readonly now: () => number;

  constructor(
    private readonly backend: InboxBackend,
    private readonly options: DecisionIndexOptions = {},
  ) {
    this.now = options.now ?? Date.now;
  }

  /** The version, raised on every change the index sees. */
  get version(): number {
    return this.currentVersion;
  }

  get size(): number {
    return this.byKey.size;
  }

  /** Lists everything once, then starts the delta and reconcile timers. */
  async start(): Promise<void> {
    await this.reconcile();
    const deltaMs = this.options.deltaMs ?? 1_000;
    const reconcileMs = this.options.reconcileMs ?? 60_000;
    if (deltaMs > 0) this.timers.push(this.every(deltaMs, () => this.refresh()));
    if (reconcileMs > 0) this.timers.push(this.every(reconcileMs, () => this.reconcile()));
  }

  /**
   * Stops the timers and waits for a listing they started. The caller closes the Temporal connection next, and
   * a listing cut off by that closing makes the SDK's retry timer throw "Channel has been shut down" outside any
   * promise, which ends the process (seen at 10,000 pending, where a full listing takes seconds).
   */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    this.listeners.clear();
    await Promise.allSettled([...this.inFlight]);
  }

  /** Replaces the whole index with one full listing (pre-engine-7 items have no decision time: only this sees them). */
  async reconcile(): Promise<void> {
    const startedAt = this.now();
    const all = await this.backend.list();
    const fresh = new Map(all.map((d) => [d.key, d]));
    const added = all.filter((d) => !sameDecision(this.byKey.get(d.key), d));
    const removed = [...this.byKey.keys()].filter((key) => !fresh.has(key));
    this.byKey.clear();
    this.keysByWorkflow.clear();
    // put() resets the order, but an empty listing puts nothing.
    this.sorted = undefined;
    for (const decision of all) this.put(decision);
    if (this.lastDelta === 0) this.lastDelta = startedAt;
    this.changed(added, removed);
  }

  /** Applies one delta listing: each changed workflow's decisions replace what the index had for it. */
  async refresh(): Promise<void> {
    if (this.refreshing) return this.refreshing;
    this.refreshing = this.delta().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /** Removes a decision at once (this server just decided it); the next delta confirms. */
  remove(key: string): void {
    if (this.drop(key)) this.changed([], [key]);
  }

  get(key: string): PendingDecision | undefined {
    return this.byKey.get(key);
  }

  /**
   * Runs a backend call about the listed decision `key`. The index can be a delta behind, so a decision another
   * reviewer just answered is still listed: when the backend says it is gone (`not_found`), it is dropped here
   * and the result is undefined, which the routes answer as they answer a key the index does not have.
   */
  async whilePending<T>(key: string, run: () => Promise<T>): Promise<T | undefined> {
    try {
      return await run();
    } catch (e) {
      if (!(e instanceof TreadleError && e.code === 'not_found')) throw e;
      this.remove(key);
      return undefined;
    }
  }

  /** Filters, counts and pages; `after` is a cursor from the previous page. */
  query(filter: DecisionFilter, page: { after?: string; limit?: number } = {}): DecisionPage {
    const now = this.now();
    const limit = Math.min(Math.max(1, page.limit ?? DEFAULT_PAGE_SIZE), MAX_PAGE_SIZE);
    const counts: DecisionCounts = { total: 0, byKind: {}, byPipeline: {}, byReviewers: {}, byAge: {} };
    const ages = AGE_CHOICES.map((age) => [age, ageMs(age)] as const);
    const decisions: PendingDecision[] = [];
    const after = page.after ? decodeCursor(page.after) : undefined;
    let more = false;
    for (const decision of this.ordered()) {
      if (!matchesFilter(decision, filter, now)) continue;
      count(counts, decision);
      const waited = now - Date.parse(decision.requestedAt);
      for (const [age, ms] of ages) if (waited >= ms) counts.byAge[age] = (counts.byAge[age] ?? 0) + 1;
      if (isOverdue(decision, now)) counts.byAge[OVERDUE] = (counts.byAge[OVERDUE] ?? 0) + 1;
      if (after && byRequestTime(decision, after) <= 0) continue;
      if (decisions.length < limit) decisions.push(decision);
      else more = true;
    }
    const last = decisions[decisions.length - 1];
    return {
      decisions,
      counts,
      version: this.currentVersion,
      ...(more && last ? { nextCursor: encodeCursor(last) } : {}),
    };
  }

  /** Hears every change; returns the unsubscribe function. */
  subscribe(listener: (event: IndexEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async delta(): Promise<void> {
    const startedAt = this.now();
    const since = new Date(this.lastDelta - (this.options.overlapMs ?? 10_000));
    const changes = await this.backend.changes(since);
    this.lastDelta = startedAt;
    this.apply(changes);
  }

  private apply(changes: DecisionChange[]): void {
    const added: PendingDecision[] = [];
    const removed: string[] = [];
    for (const { workflowId, decisions } of changes) {
      const fresh = new Set(decisions.map((d) => d.key));
      for (const key of [...(this.keysByWorkflow.get(workflowId) ?? [])]) {
        if (!fresh.has(key) && this.drop(key)) removed.push(key);
      }
      for (const decision of decisions) {
        if (sameDecision(this.byKey.get(decision.key), decision)) continue;
        added.push(decision);
        this.put(decision);
      }
    }
    this.changed(added, removed);
  }

  private put(decision: PendingDecision): void {
    this.byKey.set(decision.key, decision);
    let keys = this.keysByWorkflow.get(decision.workflowId);
    if (!keys) this.keysByWorkflow.set(decision.workflowId, (keys = new Set()));
    keys.add(decision.key);
    this.sorted = undefined;
  }

  private drop(key: string): boolean {
    const decision = this.byKey.get(key);
    if (!decision) return false;
    this.byKey.delete(key);
    const keys = this.keysByWorkflow.get(decision.workflowId);
    keys?.delete(key);
    if (keys?.size === 0) this.keysByWorkflow.delete(decision.workflowId);
    this.sorted = undefined;
    return true;
  }

  private changed(added: PendingDecision[], removed: string[]): void {
    // Only real changes raise the version: an SSE client reconnecting at the current version needs no reset.
    if (added.length === 0 && removed.length === 0) return;
    this.currentVersion += 1;
    const event = { version: this.currentVersion, added, removed };
    for (const listener of this.listeners) listener(event);
  }

  private ordered(): PendingDecision[] {
    this.sorted ??= [...this.byKey.values()].sort(byRequestTime);
    return this.sorted;
  }

  private every(ms: number, run: () => Promise<void>): NodeJS.Timeout {
    const timer = setInterval(() => {
      if (this.closed) return;
      const running = run().catch((e: unknown) => this.options.onError?.(e));
      this.inFlight.add(running);
      void running.finally(() => this.inFlight.delete(running));
    }, ms);
    timer.unref();
    return timer;
  }
}

/** Whether the index already holds `fresh` as it is; a changed one is announced again so open pages update it. */
function sameDecision(had: PendingDecision | undefined, fresh: PendingDecision): boolean {
  return had !== undefined && JSON.stringify(had) === JSON.stringify(fresh);
}

function count(counts: DecisionCounts, d: PendingDecision): void {
  counts.total += 1;
  counts.byKind[d.kind] = (counts.byKind[d.kind] ?? 0) + 1;
  counts.byPipeline[d.pipeline] = (counts.byPipeline[d.pipeline] ?? 0) + 1;
  if (d.reviewers !== undefined) counts.byReviewers[d.reviewers] = (counts.byReviewers[d.reviewers] ?? 0) + 1;
}

/** A cursor is the last row's sort position (request time and key), so it survives rows added before it. */
function encodeCursor(d: PendingDecision): string {
  return Buffer.from(JSON.stringify([d.requestedAt, d.key])).toString('base64url');
}

function decodeCursor(cursor: string): PendingDecision {
  try {
    const [requestedAt, key] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    if (typeof requestedAt === 'string' && typeof key === 'string') return { requestedAt, key } as PendingDecision;
  } catch {
    // falls through to the error below
  }
  throw new InvalidCursorError(cursor);
}

/** A page cursor the index did not issue (the server answers 400). */
export class InvalidCursorError extends Error {
  constructor(cursor: string) {
    super(`not a decision page cursor: ${JSON.stringify(cursor.slice(0, 80))}`);
    this.name = 'InvalidCursorError';
  }
}
