/**
 * Seed 003's five example action types, offline on the local task list ({@link TaskList}): `create_task`,
 * `send_message` (queued in the outbox, never sent), `add_busy_block`, `modify_task`, `batch_create_tasks`.
 * They are ordinary users of the core's action registry (src/kinds/approval/actions.ts): a payload schema, an
 * `execute` that honours the idempotency key through {@link TaskList.applyOnce}, and a one-line summary.
 */
import { z } from 'zod';
import { ActionRegistry, type ActionType } from '../../src/kinds/approval/actions';
import { loadConfig } from '../../src/config';
import { MESSAGE_CHANNELS, TASK_PRIORITIES, TASK_STATUSES, TaskList, type NewTask } from './task-list';

/** Defines an action on the task list: its context's `store` is the {@link TaskList}. */
function defineTaskListAction<S extends z.ZodType>(type: ActionType<S, TaskList>): ActionType<S, TaskList> {
  return type;
}

/**
 * The seed's five action types on a local task list: the given store, else a {@link TaskList} on
 * `tasksFile`, else on `TREADLE_TASKS_FILE` (default `<TREADLE_HOME>/tasks.json`).
 */
export function exampleActionRegistry(
  options: { store?: TaskList; tasksFile?: string } = {},
): ActionRegistry<TaskList> {
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
export const createTaskAction = defineTaskListAction({
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
export const sendMessageAction = defineTaskListAction({
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
export const addBusyBlockAction = defineTaskListAction({
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
export const modifyTaskAction = defineTaskListAction({
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
export const batchCreateTasksAction = defineTaskListAction({
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

// ---- summaries -------------------------------------------------------------------------------------

/** A value for a one-line summary: quoted, whitespace folded, cut to `max` characters. */
function quote(value: string, max = 80): string {
  const line = value.replace(/\s+/g, ' ').trim();
  return JSON.stringify(line.length > max ? `${line.slice(0, max - 1)}…` : line);
}
