/**
 * The offline store the example approval actions write to: one JSON file (`TREADLE_TASKS_FILE`, default
 * `<TREADLE_HOME>/tasks.json`) holding tasks, an outbox of messages and calendar busy blocks, plus every applied
 * idempotency key with the result it produced.
 *
 * Every change goes through {@link TaskList.applyOnce}: under a lock file, it reads the file, returns the
 * recorded result if the key was applied already (changing nothing), else applies the change and the key's
 * record together in one atomic write (temporary file + rename). The effect and its record land in the same
 * rename, so a retried activity or a re-run after a worker crash finds either both or neither: never a
 * second task.
 *
 * Why a lock file rather than an append-only journal: the file stays one readable JSON document that
 * people and tools can open, ids stay short and sequential (`task-3`, which `modify_task` payloads name),
 * and "is this key applied?" is one lookup instead of a replay. The lock is held for milliseconds.
 *
 * Lock protocol (`<file>.lock`): a process writes its owner record (pid, host, a random token, time) to a
 * file of its own and hard-links it to the lock path, which fails if a lock exists, so a lock is never seen
 * half-written. A lock whose owner is on this host is stale when that process is no longer running (a
 * crashed worker: taken over at once), or after `LIVE_OWNER_STALE_FACTOR` × `staleLockMs` in case its pid
 * was reused; an owner on another host (a shared folder) cannot be asked, so its lock is stale after
 * `staleLockMs`. Breaking a lock renames it aside and checks it is still the one judged stale, restoring it
 * if not. As a last guard a writer checks the file's `revision` just before its rename and starts over if
 * another writer got in (a holder paused past the stale age whose lock was broken). What remains: two writers
 * whose revision checks and renames interleave within that last instant, which needs a live holder stalled
 * for the whole stale age first (a minute on one host, 10 s across hosts, by default).
 */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Json } from '../../src/model/shapes';
import { IdempotencyConflict, TaskListBusy, TaskListUnreadable, UnknownTask } from './errors';

/** A task's state. New tasks are `open`; `modify_task` moves them. */
export const TASK_STATUSES = ['open', 'waiting', 'done', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** A task's priority; `normal` when a draft gives none. */
export const TASK_PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;
export type TaskPriority = (typeof TASK_PRIORITIES)[number];

/** Message channels (seed 003: "send email/telegram"). Offline, messages are queued in the outbox, never sent. */
export const MESSAGE_CHANNELS = ['email', 'telegram'] as const;
export type MessageChannel = (typeof MESSAGE_CHANNELS)[number];

/** A task in the list. */
export type Task = {
  /** `task-<n>`, sequential in this file. */
  id: string;
  title: string;
  notes?: string;
  /** A date (`2026-03-02`) or a date-time with offset. */
  due?: string;
  priority: TaskPriority;
  project?: string;
  tags: string[];
  status: TaskStatus;
  createdAt: string;
  updatedAt: string;
  /** The key of the action that created it. */
  idempotencyKey: string;
};

/** A message waiting in the outbox. */
export type OutboxMessage = {
  /** `msg-<n>`. */
  id: string;
  channel: MessageChannel;
  to: string;
  subject?: string;
  body: string;
  status: 'queued';
  queuedAt: string;
  idempotencyKey: string;
};

/** A block of time marked busy in the calendar. */
export type BusyBlock = {
  /** `busy-<n>`. */
  id: string;
  start: string;
  end: string;
  title: string;
  createdAt: string;
  idempotencyKey: string;
};

/** The record of one applied idempotency key. */
export type AppliedAction = { action: string; result: Json; appliedAt: string };

/** The whole file. */
export type TaskListContents = {
  version: 1;
  /** Incremented by every write; a writer checks it before its rename. */
  revision: number;
  tasks: Task[];
  outbox: OutboxMessage[];
  busyBlocks: BusyBlock[];
  /** Idempotency key → what applying it produced. Never removed, so a key once applied stays applied. */
  applied: Record<string, AppliedAction>;
};

/** Fields of a new task. */
export type NewTask = {
  title: string;
  notes?: string;
  due?: string;
  priority?: TaskPriority;
  project?: string;
  tags?: string[];
};

/** Changes to a task: a field given is set; `null` clears an optional field. */
export type TaskChanges = {
  title?: string;
  notes?: string | null;
  due?: string | null;
  priority?: TaskPriority;
  project?: string | null;
  tags?: string[];
  status?: TaskStatus;
};

/** What one {@link TaskList.applyOnce} change may do; everything it does is written at once or not at all. */
export interface TaskListTransaction {
  /** The list as this change sees it (including what it has done so far). */
  readonly contents: Readonly<TaskListContents>;
  createTask(fields: NewTask): Task;
  /** Throws {@link UnknownTask} (non-retryable) when no task has the id. */
  modifyTask(id: string, changes: TaskChanges): { task: Task; changed: string[] };
  queueMessage(message: { channel: MessageChannel; to: string; subject?: string; body: string }): OutboxMessage;
  addBusyBlock(block: { start: string; end: string; title: string }): BusyBlock;
}

/** What {@link TaskList.applyOnce} returns. `replayed`: the key was applied before and nothing changed now. */
export interface AppliedResult {
  result: Json;
  replayed: boolean;
  appliedAt: string;
}

/** A lock older than this whose owner cannot be checked (another host) is taken over. Writes take milliseconds. */
export const DEFAULT_STALE_LOCK_MS = 10_000;
/** A lock whose owner on this host is still running is stale only after this many times `staleLockMs` (in case its pid was reused). */
export const LIVE_OWNER_STALE_FACTOR = 6;
/** How long a change waits for a live owner's lock before failing with {@link TaskListBusy} (retryable). Longer than the stale age of another host's lock, so such a lock left by a dead owner is broken first. */
export const DEFAULT_LOCK_TIMEOUT_MS = 15_000;

export interface TaskListOptions {
  /** The file; resolved against the working directory once, when the list is made. */
  file: string;
  staleLockMs?: number;
  lockTimeoutMs?: number;
  /** The clock for timestamps (tests pin it). */
  now?: () => Date;
}

interface LockOwner {
  pid: number;
  host: string;
  token: string;
  acquiredAt: string;
}

/** The task list file and its lock. Safe to use from many processes on one machine at once. */
export class TaskList {
  /** The file's absolute path. */
  readonly file: string;
  /** The lock file's absolute path (`<file>.lock`). */
  readonly lockFile: string;
  private readonly staleLockMs: number;
  private readonly lockTimeoutMs: number;
  private readonly now: () => Date;

  constructor(options: TaskListOptions) {
    this.file = path.resolve(options.file);
    this.lockFile = `${this.file}.lock`;
    this.staleLockMs = options.staleLockMs ?? DEFAULT_STALE_LOCK_MS;
    this.lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
    this.now = options.now ?? (() => new Date());
  }

  /** The current contents (empty when the file does not exist yet). Never half-written: writes are renames. */
  async read(): Promise<TaskListContents> {
    let text: string;
    try {
      text = await fs.readFile(this.file, 'utf8');
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return emptyContents();
      throw error;
    }
    return parseContents(text, this.file);
  }

  /**
   * Applies `change` at most once for `key`. If the key was applied already, returns the recorded result and
   * changes nothing (`replayed: true`); else runs `change` on the current contents under the lock and writes
   * its effects together with the key's record in one atomic rename. If `change` throws, nothing is written.
   * The result is stored as JSON and returned as read back, so a first run and a replay return equal values.
   * `signal` aborts waiting for the lock, never a write under way.
   */
  async applyOnce(
    key: string,
    action: string,
    change: (tx: TaskListTransaction) => Json,
    options: { signal?: AbortSignal } = {},
  ): Promise<AppliedResult> {
    if (typeof key !== 'string' || key === '') throw new TypeError('applyOnce: an idempotency key is required');
    // Records are never removed, so a key seen applied without the lock is applied (a retry's fast path).
    const seen = (await this.read()).applied[key];
    if (seen) return replay(seen, key, action);
    const deadline = Date.now() + this.lockTimeoutMs;
    for (;;) {
      const owner = await this.lock(deadline, options.signal);
      try {
        const current = await this.read();
        const recorded = current.applied[key];
        if (recorded) return replay(recorded, key, action);
        const at = this.now().toISOString();
        const draft = structuredClone(current);
        const result = toJson(change(new Transaction(draft, key, at, this.file)), action);
        draft.applied[key] = { action, result, appliedAt: at };
        draft.revision = current.revision + 1;
        if (await this.commit(draft, current.revision, owner)) return { result, replayed: false, appliedAt: at };
        // Another writer got in while we held what we took for the lock: start over (the key may be applied now).
      } finally {
        await this.unlock(owner);
      }
    }
  }

  private async commit(draft: TaskListContents, expectedRevision: number, owner: LockOwner): Promise<boolean> {
    const temporary = `${this.file}.${owner.token}.tmp`;
    const handle = await fs.open(temporary, 'w');
    try {
      await handle.writeFile(`${JSON.stringify(draft, null, 2)}\n`, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    if ((await this.read()).revision !== expectedRevision) {
      await fs.rm(temporary, { force: true });
      return false;
    }
    await fs.rename(temporary, this.file);
    return true;
  }

  private async lock(deadline: number, signal: AbortSignal | undefined): Promise<LockOwner> {
    await fs.mkdir(path.dirname(this.file), { recursive: true });
    const owner: LockOwner = {
      pid: process.pid,
      host: os.hostname(),
      token: randomUUID(),
      acquiredAt: this.now().toISOString(),
    };
    // Written whole first and then linked, so the lock path never holds a half-written owner.
    const staged = `${this.lockFile}.${owner.token}.new`;
    const stage = () => fs.writeFile(staged, JSON.stringify(owner), 'utf8');
    await stage();
    try {
      for (let round = 0; ; round++) {
        signal?.throwIfAborted();
        try {
          await fs.link(staged, this.lockFile);
          await this.sweep();
          return owner;
        } catch (error) {
          const code = errorCode(error);
          if (code === 'ENOENT') {
            await stage(); // swept by a process that took it for debris
            continue;
          }
          if (code !== 'EEXIST') throw error;
        }
        const holder = await this.inspectLock();
        if (holder === undefined) continue;
        if (holder.stale) {
          await this.removeLock(holder.raw);
          continue;
        }
        if (Date.now() >= deadline) {
          throw new TaskListBusy(
            `task list ${this.file} is locked by ${holder.owner ? `pid ${holder.owner.pid} on ${holder.owner.host} since ${holder.owner.acquiredAt}` : 'an unknown owner'}; gave up after ${this.lockTimeoutMs} ms`,
          );
        }
        await pause(Math.min(100, 5 * 2 ** Math.min(round, 5)) * (0.5 + Math.random()), signal);
      }
    } finally {
      await fs.rm(staged, { force: true });
    }
  }

  private async unlock(owner: LockOwner): Promise<void> {
    let raw: string;
    try {
      raw = await fs.readFile(this.lockFile, 'utf8');
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return;
      throw error;
    }
    // Only our own: if ours was broken as stale, the lock there now is someone else's.
    if (ownerOf(raw)?.token === owner.token) await this.removeLock(raw);
  }

  /** The lock's owner and whether it is stale; undefined when there is no lock. */
  private async inspectLock(): Promise<{ raw: string; owner: LockOwner | undefined; stale: boolean } | undefined> {
    let raw: string;
    let modifiedMs: number;
    try {
      [raw, modifiedMs] = await Promise.all([
        fs.readFile(this.lockFile, 'utf8'),
        fs.stat(this.lockFile).then((s) => s.mtimeMs),
      ]);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return undefined;
      throw error;
    }
    const owner = ownerOf(raw);
    const age = Date.now() - modifiedMs;
    if (owner === undefined || owner.host !== os.hostname()) return { raw, owner, stale: age > this.staleLockMs };
    // On this host the owner can be asked: dead is stale at once; alive only after far longer (its pid reused).
    return { raw, owner, stale: !processIsAlive(owner.pid) || age > this.staleLockMs * LIVE_OWNER_STALE_FACTOR };
  }

  /** Removes the lock if it still holds `raw`: moved aside first, checked, and put back if it changed meanwhile. */
  private async removeLock(raw: string): Promise<void> {
    const aside = `${this.lockFile}.${randomUUID()}.broken`;
    try {
      await fs.rename(this.lockFile, aside);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return;
      throw error;
    }
    try {
      if ((await fs.readFile(aside, 'utf8')) === raw) return;
      // A new owner locked after we looked: give its lock back, unless yet another one exists already.
      await fs.link(aside, this.lockFile).catch((error: unknown) => {
        if (errorCode(error) !== 'EEXIST') throw error;
      });
    } finally {
      await fs.rm(aside, { force: true });
    }
  }

  /** Debris of crashed processes (temporary files, staged or broken locks) older than any live use of it. */
  private async sweep(): Promise<void> {
    const directory = path.dirname(this.file);
    const base = path.basename(this.file);
    const oldest = Date.now() - (this.staleLockMs + this.lockTimeoutMs);
    let names: string[];
    try {
      names = await fs.readdir(directory);
    } catch {
      return;
    }
    for (const name of names) {
      if (!name.startsWith(`${base}.`) || !/\.(tmp|new|broken)$/.test(name)) continue;
      const file = path.join(directory, name);
      try {
        if ((await fs.stat(file)).mtimeMs < oldest) await fs.rm(file, { force: true });
      } catch {
        // Gone already.
      }
    }
  }
}

class Transaction implements TaskListTransaction {
  constructor(
    readonly contents: TaskListContents,
    private readonly key: string,
    private readonly at: string,
    private readonly file: string,
  ) {}

  createTask(fields: NewTask): Task {
    const task: Task = {
      id: nextId('task', this.contents.tasks),
      title: fields.title,
      ...(fields.notes !== undefined ? { notes: fields.notes } : {}),
      ...(fields.due !== undefined ? { due: fields.due } : {}),
      priority: fields.priority ?? 'normal',
      ...(fields.project !== undefined ? { project: fields.project } : {}),
      tags: [...(fields.tags ?? [])],
      status: 'open',
      createdAt: this.at,
      updatedAt: this.at,
      idempotencyKey: this.key,
    };
    this.contents.tasks.push(task);
    return task;
  }

  modifyTask(id: string, changes: TaskChanges): { task: Task; changed: string[] } {
    const task = this.contents.tasks.find((t) => t.id === id);
    if (!task) {
      const ids = this.contents.tasks.map((t) => t.id);
      const known =
        ids.length === 0
          ? 'it has no tasks'
          : `it has ${ids.length > 10 ? `${ids.slice(0, 5).join(', ')}, …, ${ids.slice(-5).join(', ')}` : ids.join(', ')}`;
      throw new UnknownTask(`modify_task: no task "${id}" in ${this.file} (${known})`);
    }
    const changed: string[] = [];
    for (const [field, value] of Object.entries(changes) as [keyof TaskChanges, unknown][]) {
      if (value === undefined) continue;
      changed.push(field);
      if (value === null) delete (task as Partial<Task>)[field];
      else (task as Record<string, unknown>)[field] = Array.isArray(value) ? [...(value as string[])] : value;
    }
    task.updatedAt = this.at;
    return { task, changed };
  }

  queueMessage(message: { channel: MessageChannel; to: string; subject?: string; body: string }): OutboxMessage {
    const queued: OutboxMessage = {
      id: nextId('msg', this.contents.outbox),
      channel: message.channel,
      to: message.to,
      ...(message.subject !== undefined ? { subject: message.subject } : {}),
      body: message.body,
      status: 'queued',
      queuedAt: this.at,
      idempotencyKey: this.key,
    };
    this.contents.outbox.push(queued);
    return queued;
  }

  addBusyBlock(block: { start: string; end: string; title: string }): BusyBlock {
    const busy: BusyBlock = {
      id: nextId('busy', this.contents.busyBlocks),
      start: block.start,
      end: block.end,
      title: block.title,
      createdAt: this.at,
      idempotencyKey: this.key,
    };
    this.contents.busyBlocks.push(busy);
    return busy;
  }
}

/** `<prefix>-<n>`, one more than the highest in use (ids are never reused, even after a hand edit removes some). */
function nextId(prefix: string, records: readonly { id: string }[]): string {
  let highest = 0;
  for (const { id } of records) {
    const match = /^[a-z]+-(\d+)$/.exec(id);
    if (match) highest = Math.max(highest, Number(match[1]));
  }
  return `${prefix}-${highest + 1}`;
}

function replay(recorded: AppliedAction, key: string, action: string): AppliedResult {
  if (recorded.action !== action)
    throw new IdempotencyConflict(
      `idempotency key ${key} was applied by ${recorded.action} at ${recorded.appliedAt}; ${action} cannot reuse it`,
    );
  return { result: recorded.result, replayed: true, appliedAt: recorded.appliedAt };
}

function toJson(value: Json, action: string): Json {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError(`${action}: the action's result is not JSON`);
  return JSON.parse(text) as Json;
}

function emptyContents(): TaskListContents {
  return { version: 1, revision: 0, tasks: [], outbox: [], busyBlocks: [], applied: {} };
}

function parseContents(text: string, file: string): TaskListContents {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new TaskListUnreadable(
      `task list ${file} is not valid JSON (${(error as Error).message}); fix it or move it aside`,
    );
  }
  const problems: string[] = [];
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    problems.push('must be an object {tasks, outbox, busyBlocks, applied}');
  } else {
    const record = parsed as Record<string, unknown>;
    if (record.version !== undefined && record.version !== 1)
      problems.push(`version: ${JSON.stringify(record.version)} is not a version this Treadle reads (1)`);
    if (record.revision !== undefined && !Number.isInteger(record.revision))
      problems.push('revision: must be a whole number');
    for (const list of ['tasks', 'outbox', 'busyBlocks'] as const) {
      const value = record[list];
      if (
        value !== undefined &&
        !(
          Array.isArray(value) &&
          value.every((r) => typeof r === 'object' && r !== null && typeof (r as { id?: unknown }).id === 'string')
        )
      ) {
        problems.push(`${list}: must be a list of records with string ids`);
      }
    }
    const applied = record.applied;
    if (applied !== undefined && (typeof applied !== 'object' || applied === null || Array.isArray(applied)))
      problems.push('applied: must be an object');
  }
  if (problems.length > 0)
    throw new TaskListUnreadable(
      `task list ${file} is not a task list: ${problems.join('; ')}; fix it or move it aside`,
    );
  // Hand-written files may leave lists out; the rest is Treadle's own writing.
  return { ...emptyContents(), ...(parsed as Partial<TaskListContents>), version: 1 };
}

function ownerOf(raw: string): LockOwner | undefined {
  try {
    const owner = JSON.parse(raw) as Partial<LockOwner>;
    if (typeof owner.pid === 'number' && typeof owner.host === 'string' && typeof owner.token === 'string')
      return owner as LockOwner;
  } catch {
    // Not ours to read: judged by its age alone.
  }
  return undefined;
}

function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return errorCode(error) === 'EPERM'; // exists, owned by another user
  }
}

function errorCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null ? (error as { code?: string }).code : undefined;
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
