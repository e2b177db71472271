/**
 * Action types (seed 003 "Action types registry (extensible)"): what an approved request may do. Each type
 * is a name, a zod schema for its payload, an `execute` that honours the request's idempotency key, and a
 * one-line `summarize` for listings. The registry validates payloads when a request is created and again
 * right before execution, and names the known types (and a close one) for an unknown type.
 *
 * The five seed types ship as offline examples on the local task list ({@link TaskList}): `create_task`,
 * `send_message` (queued in the outbox, never sent), `add_busy_block`, `modify_task`, `batch_create_tasks`.
 * No Temporal imports: the approval activities call this through their `ActionCatalog` interface.
 */
import { z } from 'zod';
import { closest } from '../model/suggest';
import { loadConfig } from '../config';
import type { Json } from '../model/shapes';
import { InvalidPayload, UnknownActionType } from './errors';
import { MESSAGE_CHANNELS, TASK_PRIORITIES, TASK_STATUSES, TaskList, type NewTask } from './task-list';

/** What an action's `execute` gets besides its payload. */
export interface ActionContext {
  /** Seed 003's `hash(runId + step + inputHash)`: the action's effect happens at most once per key. */
  idempotencyKey: string;
  /** The local task list the example actions write to. */
  store: TaskList;
  /** Aborted when the activity is cancelled; an action stops waiting, but never half-applies. */
  signal?: AbortSignal;
}

/** One action type. `S` is its payload schema; `execute` and `summarize` get the parsed payload. */
export interface ActionType<S extends z.ZodType = z.ZodType> {
  /** snake_case, as approval stages name it (`action: create_task`, or an element's `action_type`). */
  name: string;
  /** One sentence for listings and docs. */
  description: string;
  payload: S;
  /**
   * Performs the action and returns a small JSON result (recorded with the request). Must honour
   * `ctx.idempotencyKey`: called again with the same key, it changes nothing and returns the same result.
   */
  execute(payload: z.output<S>, ctx: ActionContext): Promise<Json>;
  /** One line saying what the action will do, for approval listings. */
  summarize(payload: z.output<S>): string;
}

/** Defines an action type with its payload's type inferred from the schema. */
export function defineActionType<S extends z.ZodType>(type: ActionType<S>): ActionType<S> {
  return type;
}

/** Longest summary kept; approval listings show one line each. */
export const MAX_SUMMARY_CHARS = 200;

const ACTION_NAME = /^[a-z][a-z0-9_]*$/;

/** The registered action types, and the checks around them. Structurally an approval `ActionCatalog`. */
export class ActionRegistry {
  private readonly types = new Map<string, ActionType>();
  /** The store every action's context carries. */
  readonly store: TaskList;

  constructor(options: { store: TaskList }) {
    this.store = options.store;
  }

  /** Adds a type; throws when the name is taken or not snake_case. */
  register<S extends z.ZodType>(type: ActionType<S>): this {
    if (!ACTION_NAME.test(type.name))
      throw new TypeError(`action type name "${type.name}" must be snake_case (a-z, 0-9, _), like create_task`);
    if (this.types.has(type.name)) throw new TypeError(`action type "${type.name}" is registered already`);
    this.types.set(type.name, type as unknown as ActionType);
    return this;
  }

  /** True when `name` is registered. */
  has(name: string): boolean {
    return this.types.has(name);
  }

  /** The type called `name`; throws {@link UnknownActionType} naming the known types and a close one. */
  get(name: string): ActionType {
    const type = this.types.get(name);
    if (!type) throw new UnknownActionType(this.unknownTypeMessage(name));
    return type;
  }

  /** Registered names, sorted. */
  names(): string[] {
    return [...this.types.keys()].sort();
  }

  /**
   * Every problem with `payload` for the type, each `path: message` with paths from `payload`
   * (`payload.title: required`, `payload.tasks[2].due: …`); none when valid. An unknown type is one
   * problem, `action_type: unknown action type "…" (did you mean "…"?) (known: …)`.
   */
  validatePayload(type: string, payload: unknown): string[] {
    const actionType = this.types.get(type);
    if (!actionType) return [`action_type: ${this.unknownTypeMessage(type)}`];
    const parsed = actionType.payload.safeParse(payload, { error: friendlyMessage });
    return parsed.success ? [] : problemsOf(parsed.error.issues, actionType.payload);
  }

  /** The parsed payload (defaults applied); throws {@link UnknownActionType} or {@link InvalidPayload} with every problem. */
  parsePayload(type: string, payload: unknown): unknown {
    const actionType = this.get(type);
    const parsed = actionType.payload.safeParse(payload, { error: friendlyMessage });
    if (parsed.success) return parsed.data;
    const problems = problemsOf(parsed.error.issues, actionType.payload);
    throw new InvalidPayload(`invalid ${type} payload: ${problems.join('; ')}`, problems);
  }

  /** The type's one-line summary of the payload, at most {@link MAX_SUMMARY_CHARS}; a short JSON excerpt when the payload is invalid. */
  summarize(type: string, payload: Json): string {
    const actionType = this.types.get(type);
    const parsed = actionType?.payload.safeParse(payload);
    const text =
      actionType && parsed?.success ? actionType.summarize(parsed.data) : `${type} ${JSON.stringify(payload)}`;
    return oneLine(text, MAX_SUMMARY_CHARS);
  }

  /**
   * Validates the payload again (the registry may have changed since the request was made) and executes
   * it with the key: at most one effect per key, the same result on every call.
   */
  async execute(
    type: string,
    payload: unknown,
    context: { idempotencyKey: string; signal?: AbortSignal },
  ): Promise<Json> {
    if (typeof context.idempotencyKey !== 'string' || context.idempotencyKey === '')
      throw new TypeError(`${type}: an idempotency key is required`);
    const parsed = this.parsePayload(type, payload);
    return this.get(type).execute(parsed, {
      idempotencyKey: context.idempotencyKey,
      store: this.store,
      ...(context.signal ? { signal: context.signal } : {}),
    });
  }

  private unknownTypeMessage(name: string): string {
    const known = this.names();
    const close = closest(name, known);
    return `unknown action type "${name}"${close ? ` (did you mean "${close}"?)` : ''} (known: ${known.length > 0 ? known.join(', ') : 'none'})`;
  }
}

/**
 * The seed's five action types on a local task list: the given store, else a {@link TaskList} on
 * `tasksFile`, else on `TREADLE_TASKS_FILE` (default `.treadle/tasks.json`).
 */
export function defaultActionRegistry(options: { store?: TaskList; tasksFile?: string } = {}): ActionRegistry {
  const store = options.store ?? new TaskList({ file: options.tasksFile ?? loadConfig().tasksFile });
  return new ActionRegistry({ store })
    .register(createTaskAction)
    .register(sendMessageAction)
    .register(addBusyBlockAction)
    .register(modifyTaskAction)
    .register(batchCreateTasksAction);
}

// ---- payload schemas -------------------------------------------------------------------------------

const text = (max: number) => z.string().trim().min(1).max(max);
const dateTime = z.iso.datetime({
  offset: true,
  error: 'must be a date-time with an offset, e.g. 2026-03-02T09:00:00+01:00',
});
const date = z.iso.date();
/** A due date: a day, or a moment with an offset (never a local time: workers may sit in other time zones). */
const due = z
  .string()
  .refine(
    (v) => date.safeParse(v).success || dateTime.safeParse(v).success,
    'must be a date (2026-03-02) or a date-time with an offset (2026-03-02T17:00:00+01:00)',
  );
const tags = z
  .array(text(50))
  .max(20)
  .refine((list) => new Set(list).size === list.length, 'must not repeat a tag');

/** `create_task` payload: a task draft. */
export const CreateTaskPayload = z
  .object({
    title: text(300),
    notes: z.string().max(10_000).optional(),
    due: due.optional(),
    priority: z.enum(TASK_PRIORITIES).optional(),
    project: text(100).optional(),
    tags: tags.optional(),
  })
  .strict();
export type CreateTaskPayload = z.output<typeof CreateTaskPayload>;

const EMAIL = z.email();
const TELEGRAM_CHAT = /^(@[A-Za-z][A-Za-z0-9_]{4,31}|-?\d{1,20})$/;
/** Telegram's own limit on one message. */
const TELEGRAM_MAX_BODY = 4_096;

/** `send_message` payload: `to` is an email address for `email`, an `@username` or numeric chat id for `telegram`. */
export const SendMessagePayload = z
  .object({
    channel: z.enum(MESSAGE_CHANNELS),
    to: text(320),
    subject: text(300).optional(),
    body: z.string().min(1).max(100_000),
  })
  .strict()
  .superRefine(
    (message, ctx) => {
      if (message.channel === 'email' && !EMAIL.safeParse(message.to).success)
        ctx.addIssue({ code: 'custom', path: ['to'], message: 'must be an email address for channel email' });
      if (message.channel === 'telegram') {
        if (typeof message.to === 'string' && !TELEGRAM_CHAT.test(message.to))
          ctx.addIssue({
            code: 'custom',
            path: ['to'],
            message: 'must be an @username or a numeric chat id for channel telegram',
          });
        if (message.subject !== undefined)
          ctx.addIssue({ code: 'custom', path: ['subject'], message: 'telegram messages have no subject' });
        if (typeof message.body === 'string' && message.body.length > TELEGRAM_MAX_BODY)
          ctx.addIssue({
            code: 'custom',
            path: ['body'],
            message: `must be at most ${TELEGRAM_MAX_BODY} characters for channel telegram`,
          });
      }
    },
    // Checked whenever the channel is known, so these come with any other problems.
    { when: (p) => z.enum(MESSAGE_CHANNELS).safeParse((p.value as { channel?: unknown } | null)?.channel).success },
  );
export type SendMessagePayload = z.output<typeof SendMessagePayload>;

/** `add_busy_block` payload: a calendar block from `start` to `end` (date-times with offsets). */
export const AddBusyBlockPayload = z
  .object({
    start: dateTime,
    end: dateTime,
    title: text(300).default('Busy'),
  })
  .strict()
  .superRefine(
    (block, ctx) => {
      if (Date.parse(block.end) <= Date.parse(block.start))
        ctx.addIssue({ code: 'custom', path: ['end'], message: 'must be after start' });
    },
    {
      when: (p) =>
        dateTime.safeParse((p.value as { start?: unknown } | null)?.start).success &&
        dateTime.safeParse((p.value as { end?: unknown } | null)?.end).success,
    },
  );
export type AddBusyBlockPayload = z.output<typeof AddBusyBlockPayload>;

/** `modify_task` payload: the task's id and at least one change; `null` clears notes, due or project. */
export const ModifyTaskPayload = z
  .object({
    id: z.string().regex(/^task-\d+$/, 'must be a task id such as task-3'),
    changes: z
      .object({
        title: text(300).optional(),
        notes: z.string().max(10_000).nullable().optional(),
        due: due.nullable().optional(),
        priority: z.enum(TASK_PRIORITIES).optional(),
        project: text(100).nullable().optional(),
        tags: tags.optional(),
        status: z.enum(TASK_STATUSES).optional(),
      })
      .strict()
      .refine(
        (changes) => Object.values(changes).some((v) => v !== undefined),
        'must change at least one of title, notes, due, priority, project, tags, status',
      ),
  })
  .strict();
export type ModifyTaskPayload = z.output<typeof ModifyTaskPayload>;

/** Most drafts one `batch_create_tasks` takes: the batch is one request, one decision, one write. */
export const MAX_BATCH_TASKS = 100;

/** `batch_create_tasks` payload: several `create_task` drafts accepted at once. */
export const BatchCreateTasksPayload = z
  .object({
    tasks: z.array(CreateTaskPayload).min(1).max(MAX_BATCH_TASKS),
  })
  .strict();
export type BatchCreateTasksPayload = z.output<typeof BatchCreateTasksPayload>;

// ---- the five example types ------------------------------------------------------------------------

/** Creates one task. Result: `{taskId, title}`. */
export const createTaskAction = defineActionType({
  name: 'create_task',
  description: 'Create a task from a draft (title, notes, due, priority, project, tags).',
  payload: CreateTaskPayload,
  async execute(payload, ctx) {
    const { result } = await ctx.store.applyOnce(
      ctx.idempotencyKey,
      'create_task',
      (tx) => {
        const task = tx.createTask(newTask(payload));
        return { taskId: task.id, title: task.title };
      },
      { signal: ctx.signal },
    );
    return result;
  },
  summarize: (p) => `create task ${quote(p.title)}${taskDetails(p)}`,
});

/** Queues a message in the outbox (offline: nothing is sent). Result: `{messageId, channel, to, status}`. */
export const sendMessageAction = defineActionType({
  name: 'send_message',
  description: 'Send an email or a Telegram message (offline: queued in the task list outbox).',
  payload: SendMessagePayload,
  async execute(payload, ctx) {
    const { result } = await ctx.store.applyOnce(
      ctx.idempotencyKey,
      'send_message',
      (tx) => {
        const message = tx.queueMessage({
          channel: payload.channel,
          to: payload.to,
          ...(payload.subject !== undefined ? { subject: payload.subject } : {}),
          body: payload.body,
        });
        return { messageId: message.id, channel: message.channel, to: message.to, status: message.status };
      },
      { signal: ctx.signal },
    );
    return result;
  },
  summarize: (p) => `send ${p.channel} to ${p.to}: ${p.subject !== undefined ? quote(p.subject) : quote(p.body, 60)}`,
});

/** Marks a block of time busy. Result: `{busyBlockId, start, end}`. */
export const addBusyBlockAction = defineActionType({
  name: 'add_busy_block',
  description: 'Add a busy block to the calendar (start and end with offsets, a title).',
  payload: AddBusyBlockPayload,
  async execute(payload, ctx) {
    const { result } = await ctx.store.applyOnce(
      ctx.idempotencyKey,
      'add_busy_block',
      (tx) => {
        const block = tx.addBusyBlock(payload);
        return { busyBlockId: block.id, start: block.start, end: block.end };
      },
      { signal: ctx.signal },
    );
    return result;
  },
  summarize: (p) => `add busy block ${quote(p.title)} ${p.start} → ${p.end}`,
});

/** Changes a task's status or fields; an unknown id is an `UnknownTask` error (non-retryable). Result: `{taskId, changed}`. */
export const modifyTaskAction = defineActionType({
  name: 'modify_task',
  description: "Change a task's status or fields (null clears notes, due or project).",
  payload: ModifyTaskPayload,
  async execute(payload, ctx) {
    const { result } = await ctx.store.applyOnce(
      ctx.idempotencyKey,
      'modify_task',
      (tx) => {
        const { task, changed } = tx.modifyTask(payload.id, payload.changes);
        return { taskId: task.id, changed };
      },
      { signal: ctx.signal },
    );
    return result;
  },
  summarize: (p) =>
    `modify ${p.id}: ${Object.entries(p.changes)
      .filter(([, v]) => v !== undefined)
      .map(
        ([field, v]) =>
          `${field} → ${v === null ? '(cleared)' : Array.isArray(v) ? v.join(', ') || '(none)' : field === 'title' || field === 'notes' ? quote(String(v), 40) : String(v)}`,
      )
      .join(', ')}`,
});

/**
 * Creates every task of the batch in one write under the request's one key: all or nothing, and a retry
 * returns the same ids. Result: `{taskIds, count}`.
 */
export const batchCreateTasksAction = defineActionType({
  name: 'batch_create_tasks',
  description: 'Accept several task drafts at once (each a create_task payload); all are created together or none.',
  payload: BatchCreateTasksPayload,
  async execute(payload, ctx) {
    const { result } = await ctx.store.applyOnce(
      ctx.idempotencyKey,
      'batch_create_tasks',
      (tx) => {
        const taskIds = payload.tasks.map((draft) => tx.createTask(newTask(draft)).id);
        return { taskIds, count: taskIds.length };
      },
      { signal: ctx.signal },
    );
    return result;
  },
  summarize: (p) =>
    `create ${p.tasks.length} task${p.tasks.length === 1 ? '' : 's'}: ${p.tasks.map((t) => quote(t.title, 40)).join(', ')}`,
});

function newTask(p: CreateTaskPayload): NewTask {
  return {
    title: p.title,
    ...(p.notes !== undefined ? { notes: p.notes } : {}),
    ...(p.due !== undefined ? { due: p.due } : {}),
    ...(p.priority !== undefined ? { priority: p.priority } : {}),
    ...(p.project !== undefined ? { project: p.project } : {}),
    ...(p.tags !== undefined ? { tags: p.tags } : {}),
  };
}

function taskDetails(p: CreateTaskPayload): string {
  const details = [
    p.due !== undefined ? `due ${p.due}` : undefined,
    p.priority,
    p.project !== undefined ? `project ${p.project}` : undefined,
  ].filter((d): d is string => d !== undefined);
  return details.length > 0 ? ` (${details.join(', ')})` : '';
}

// ---- problems and summaries ------------------------------------------------------------------------

function quote(value: string, max = 80): string {
  return JSON.stringify(oneLine(value, max));
}

function oneLine(value: string, max: number): string {
  const line = value.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

type Issue = z.core.$ZodIssue;
type RawIssue = z.core.$ZodRawIssue;

/** Default wording for zod's issues (a schema's own message wins over it). */
function friendlyMessage(issue: RawIssue): string | undefined {
  const raw = issue as RawIssue & {
    expected?: string;
    origin?: string;
    minimum?: number | bigint;
    maximum?: number | bigint;
    values?: unknown[];
    format?: string;
  };
  if ((raw.code === 'invalid_type' || raw.code === 'invalid_value') && raw.input === undefined) return 'required';
  switch (raw.code) {
    case 'invalid_type':
      return `must be ${article(raw.expected ?? 'value')}, got ${describe(raw.input)}`;
    case 'too_small':
      if (raw.origin === 'string')
        return Number(raw.minimum) === 1 ? 'must not be empty' : `must be at least ${raw.minimum} characters`;
      if (raw.origin === 'array')
        return `must have at least ${raw.minimum} item${Number(raw.minimum) === 1 ? '' : 's'}`;
      return `must be at least ${raw.minimum}`;
    case 'too_big':
      if (raw.origin === 'string') return `must be at most ${raw.maximum} characters`;
      if (raw.origin === 'array') return `must have at most ${raw.maximum} items`;
      return `must be at most ${raw.maximum}`;
    case 'invalid_value':
      return `must be one of ${(raw.values ?? []).map((v) => JSON.stringify(v)).join(', ')}, got ${JSON.stringify(raw.input)}`;
    case 'invalid_format':
      if (raw.format === 'date') return 'must be a date such as 2026-03-02';
      if (raw.format === 'email') return 'must be an email address';
      return undefined;
    default:
      return undefined;
  }
}

function article(noun: string): string {
  return `${/^[aeiou]/.test(noun) ? 'an' : 'a'} ${noun}`;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)}`;
}

/** `path: message` for every issue; unknown fields one problem each, with the fields the object takes. */
function problemsOf(issues: readonly Issue[], schema: z.ZodType): string[] {
  const problems: string[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      const allowed = fieldsAt(schema, issue.path);
      for (const key of issue.keys) {
        const close = closest(key, allowed);
        problems.push(
          `${pathText([...issue.path, key])}: unknown field${close ? ` (did you mean "${close}"?)` : ''}${allowed.length > 0 ? ` (allowed: ${allowed.join(', ')})` : ''}`,
        );
      }
    } else {
      problems.push(`${pathText(issue.path)}: ${issue.message}`);
    }
  }
  return [...new Set(problems)];
}

function pathText(path: readonly PropertyKey[]): string {
  let out = 'payload';
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : `.${String(key)}`;
  return out;
}

/** The field names of the object schema at `path` (through arrays, optionals and refinements). */
function fieldsAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let current: unknown = schema;
  for (const key of [...path, undefined]) {
    // Unwrap wrappers until an object or array.
    for (let guard = 0; guard < 10; guard++) {
      const def = (current as { def?: { type?: string; innerType?: unknown; element?: unknown } }).def;
      if (def?.type === 'optional' || def?.type === 'nullable' || def?.type === 'default' || def?.type === 'pipe')
        current = def.innerType ?? (def as { in?: unknown }).in;
      else break;
    }
    if (key === undefined) break;
    const def = (current as { def?: { type?: string; element?: unknown; shape?: Record<string, unknown> } }).def;
    if (typeof key === 'number' && def?.type === 'array') current = def.element;
    else if (typeof key === 'string' && def?.type === 'object') current = def.shape?.[key];
    else return [];
  }
  const shape = (current as { def?: { type?: string; shape?: Record<string, unknown> } }).def;
  return shape?.type === 'object' && shape.shape ? Object.keys(shape.shape) : [];
}
