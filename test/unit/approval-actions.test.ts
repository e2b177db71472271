/**
 * Approval action types (seed 003) and the local task list they write to. Cases: every seed type's schema
 * accepts a full and a minimal payload, and an invalid one lists every problem as `path: message`; an
 * unknown type names the known ones and a close one (validate, get, execute); each type executes against
 * the task list file; the same key returns the same result and changes nothing, for every type; a batch is
 * one write under one key (all or nothing, retried whole); a key reused by another type is refused;
 * modify_task of an unknown id is a non-retryable UnknownTask; a forced retry (the activity fails after or
 * during the write) makes one task; a worker killed while holding the lock, or after writing, leaves one
 * task after the retry, and its lock is taken over at once; two processes with the same key make one task;
 * four processes with distinct keys lose no write while a reader never sees half a file; a live owner's
 * lock on this host (kept for a minute), another host's (kept for staleLockMs), a dead owner's (taken at
 * once); cancellation while waiting; a hand-broken file; custom types; TREADLE_TASKS_FILE; the generic
 * registry has none of the examples' types.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import type { ActionCatalog } from '../../src/kinds/approval/worker/activities';
import { type ActionRegistry, defineActionType, InvalidPayload, UnknownActionType } from '../../src/kinds/approval';
import { bundledActionRegistry } from '../../src/cli/bundled-examples';
import { defaultActionRegistry } from '../../src/worker/registries';
import {
  exampleActionRegistry,
  IdempotencyConflict,
  TaskList,
  TaskListBusy,
  TaskListUnreadable,
  UnknownTask,
  type TaskListContents,
} from '../../examples/task-list';
import { loadConfig } from '../../src/config';
import { homeLocation } from '../../src/config/home';

const EXAMPLES = path.join(__dirname, '..', '..', 'examples');
const NOW = new Date('2026-03-01T08:00:00.000Z');
const KNOWN = 'known: add_busy_block, batch_create_tasks, create_task, modify_task, send_message';

// Made at load: describe blocks build their registries before any hook runs.
const dir = mkdtempSync(path.join(tmpdir(), 'treadle-approval-actions-'));
let count = 0;
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A fresh task list file (and its registry) per test. */
function fresh(options: { staleLockMs?: number; lockTimeoutMs?: number } = {}): {
  file: string;
  store: TaskList;
  registry: ActionRegistry<TaskList>;
} {
  const file = path.join(dir, `list-${++count}`, 'tasks.json');
  const store = new TaskList({ file, now: () => NOW, ...options });
  return { file, store, registry: exampleActionRegistry({ store }) };
}

function contents(file: string): TaskListContents {
  return JSON.parse(readFileSync(file, 'utf8')) as TaskListContents;
}

describe('payload schemas', () => {
  const { registry } = fresh();

  it.each([
    [
      'create_task',
      {
        title: 'Call Bob',
        notes: 'about the offsite',
        due: '2026-03-02',
        priority: 'high',
        project: 'Acme',
        tags: ['phone'],
      },
    ],
    ['create_task', { title: 'Call Bob', due: '2026-03-02T17:00:00+01:00' }],
    ['send_message', { channel: 'email', to: 'bob@example.com', subject: 'Offsite', body: 'See you there.' }],
    ['send_message', { channel: 'telegram', to: '@bob_smith', body: 'See you there.' }],
    ['send_message', { channel: 'telegram', to: '-100123456', body: 'Group hello' }],
    ['add_busy_block', { start: '2026-03-02T09:00:00+01:00', end: '2026-03-02T10:30:00+01:00', title: 'Focus' }],
    ['add_busy_block', { start: '2026-03-02T08:00:00Z', end: '2026-03-02T09:00:00Z' }],
    ['modify_task', { id: 'task-3', changes: { status: 'done' } }],
    [
      'modify_task',
      {
        id: 'task-3',
        changes: { title: 'Call Bob today', due: null, notes: null, project: null, tags: [], priority: 'low' },
      },
    ],
    ['batch_create_tasks', { tasks: [{ title: 'One' }, { title: 'Two', priority: 'urgent' }] }],
  ])('%s accepts %j', (type, payload) => {
    expect(registry.validatePayload(type, payload)).toEqual([]);
  });

  it('create_task lists every problem', () => {
    expect(
      registry.validatePayload('create_task', {
        titel: 'x',
        due: 'tomorrow',
        priority: 'p1',
        tags: ['a', 'a', ''],
        notes: 5,
      }),
    ).toEqual([
      'payload.title: required',
      'payload.notes: must be a string, got number 5',
      'payload.due: must be a date (2026-03-02) or a date-time with an offset (2026-03-02T17:00:00+01:00)',
      'payload.priority: must be one of "low", "normal", "high", "urgent", got "p1"',
      'payload.tags[2]: must not be empty',
      'payload.tags: must not repeat a tag',
      'payload.titel: unknown field (did you mean "title"?) (allowed: title, notes, due, priority, project, tags)',
    ]);
    expect(registry.validatePayload('create_task', { title: '   ' })).toEqual(['payload.title: must not be empty']);
    expect(registry.validatePayload('create_task', { title: 'x'.repeat(301) })).toEqual([
      'payload.title: must be at most 300 characters',
    ]);
    expect(registry.validatePayload('create_task', null)).toEqual(['payload: must be an object, got null']);
    expect(registry.validatePayload('create_task', ['Call Bob'])).toEqual(['payload: must be an object, got a list']);
    // A local time would mean different moments on workers in different time zones.
    expect(registry.validatePayload('create_task', { title: 'x', due: '2026-03-02T17:00:00' })).toHaveLength(1);
    expect(registry.validatePayload('create_task', { title: 'x', due: '2026-02-30' })).toHaveLength(1);
  });

  it('send_message lists every problem, channel-specific ones included', () => {
    expect(
      registry.validatePayload('send_message', { channel: 'telegram', to: 'bob@example.com', subject: 'hi', body: '' }),
    ).toEqual([
      'payload.body: must not be empty',
      'payload.to: must be an @username or a numeric chat id for channel telegram',
      'payload.subject: telegram messages have no subject',
    ]);
    expect(registry.validatePayload('send_message', { channel: 'email', to: 'bob', body: 'x' })).toEqual([
      'payload.to: must be an email address for channel email',
    ]);
    expect(
      registry.validatePayload('send_message', { channel: 'telegram', to: '@bob_smith', body: 'x'.repeat(4_097) }),
    ).toEqual(['payload.body: must be at most 4096 characters for channel telegram']);
    expect(registry.validatePayload('send_message', { channel: 'sms', to: '', body: 'x', extra: 1 })).toEqual([
      'payload.channel: must be one of "email", "telegram", got "sms"',
      'payload.to: must not be empty',
      'payload.extra: unknown field (allowed: channel, to, subject, body)',
    ]);
    expect(registry.validatePayload('send_message', {})).toEqual([
      'payload.channel: required',
      'payload.to: required',
      'payload.body: required',
    ]);
  });

  it('add_busy_block lists every problem, end before start included', () => {
    expect(
      registry.validatePayload('add_busy_block', {
        start: '2026-03-02T10:00:00+01:00',
        end: '2026-03-02T09:00:00+01:00',
        title: ' ',
      }),
    ).toEqual(['payload.title: must not be empty', 'payload.end: must be after start']);
    // The same instant in two offsets is not a block.
    expect(
      registry.validatePayload('add_busy_block', { start: '2026-03-02T10:00:00+01:00', end: '2026-03-02T09:00:00Z' }),
    ).toEqual(['payload.end: must be after start']);
    expect(registry.validatePayload('add_busy_block', { start: '2026-03-02T10:00:00', end: 'noon' })).toEqual([
      'payload.start: must be a date-time with an offset, e.g. 2026-03-02T09:00:00+01:00',
      'payload.end: must be a date-time with an offset, e.g. 2026-03-02T09:00:00+01:00',
    ]);
  });

  it('modify_task lists every problem', () => {
    expect(registry.validatePayload('modify_task', { id: '3', changes: {} })).toEqual([
      'payload.id: must be a task id such as task-3',
      'payload.changes: must change at least one of title, notes, due, priority, project, tags, status',
    ]);
    expect(
      registry.validatePayload('modify_task', {
        id: 'task-3',
        changes: { stauts: 'done', status: 'finished', title: null },
      }),
    ).toEqual([
      'payload.changes.title: must be a string, got null',
      'payload.changes.status: must be one of "open", "waiting", "done", "cancelled", got "finished"',
      'payload.changes.stauts: unknown field (did you mean "status"?) (allowed: title, notes, due, priority, project, tags, status)',
    ]);
    expect(registry.validatePayload('modify_task', { id: 'task-3' })).toEqual(['payload.changes: required']);
  });

  it('batch_create_tasks checks every draft, naming its place', () => {
    expect(
      registry.validatePayload('batch_create_tasks', {
        tasks: [{ title: 'a' }, { title: '', projct: 'x' }, { priority: 'high' }],
      }),
    ).toEqual([
      'payload.tasks[1].title: must not be empty',
      'payload.tasks[1].projct: unknown field (did you mean "project"?) (allowed: title, notes, due, priority, project, tags)',
      'payload.tasks[2].title: required',
    ]);
    expect(registry.validatePayload('batch_create_tasks', { tasks: [] })).toEqual([
      'payload.tasks: must have at least 1 item',
    ]);
    expect(
      registry.validatePayload('batch_create_tasks', {
        tasks: Array.from({ length: 101 }, (_, i) => ({ title: `t${i}` })),
      }),
    ).toEqual(['payload.tasks: must have at most 100 items']);
  });

  it('summaries are one line', () => {
    expect(
      registry.summarize('create_task', { title: 'Call Bob', due: '2026-03-02', priority: 'high', project: 'Acme' }),
    ).toBe('create task "Call Bob" (due 2026-03-02, high, project Acme)');
    expect(
      registry.summarize('send_message', { channel: 'email', to: 'bob@example.com', subject: 'Offsite', body: 'x' }),
    ).toBe('send email to bob@example.com: "Offsite"');
    expect(
      registry.summarize('send_message', { channel: 'telegram', to: '@bob_smith', body: 'See\nyou   there' }),
    ).toBe('send telegram to @bob_smith: "See you there"');
    expect(
      registry.summarize('add_busy_block', { start: '2026-03-02T09:00:00+01:00', end: '2026-03-02T10:00:00+01:00' }),
    ).toBe('add busy block "Busy" 2026-03-02T09:00:00+01:00 → 2026-03-02T10:00:00+01:00');
    expect(registry.summarize('modify_task', { id: 'task-3', changes: { status: 'done', due: null, tags: [] } })).toBe(
      'modify task-3: due → (cleared), tags → (none), status → done',
    );
    expect(registry.summarize('batch_create_tasks', { tasks: [{ title: 'One\ntwo' }, { title: 'Three' }] })).toBe(
      'create 2 tasks: "One two", "Three"',
    );
    expect(registry.summarize('create_task', { title: 'x'.repeat(300), notes: 'y' })).toBe(
      `create task "${'x'.repeat(79)}…"`,
    );
    // Listings never fail on a bad payload.
    expect(registry.summarize('create_task', { titel: 'x' })).toBe('create_task {"titel":"x"}');
    expect(
      registry.summarize('batch_create_tasks', {
        tasks: Array.from({ length: 20 }, () => ({ title: 'a long enough title '.repeat(3) })),
      }).length,
    ).toBeLessThanOrEqual(200);
  });
});

describe('unknown action types', () => {
  const { registry } = fresh();

  it('validatePayload returns one problem naming the known types and a close one', () => {
    expect(registry.validatePayload('create_tsk', { title: 'x' })).toEqual([
      `action_type: unknown action type "create_tsk" (did you mean "create_task"?) (${KNOWN})`,
    ]);
    expect(registry.validatePayload('fax', {})).toEqual([`action_type: unknown action type "fax" (${KNOWN})`]);
  });

  it('get and execute throw UnknownActionType, non-retryable', async () => {
    expect(() => registry.get('send_mesage')).toThrow(
      `unknown action type "send_mesage" (did you mean "send_message"?) (${KNOWN})`,
    );
    const error = await registry.execute('fax', {}, { idempotencyKey: 'k' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnknownActionType);
    expect(error).toMatchObject({ type: 'UnknownActionType', nonRetryable: true });
    // The failure type Temporal records for a plain error is its constructor's name.
    expect((error as Error).constructor.name).toBe('UnknownActionType');
  });
});

describe('executing the seed types', () => {
  it('create_task writes the task', async () => {
    const { file, registry } = fresh();
    const payload = {
      title: ' Call Bob ',
      notes: 'offsite',
      due: '2026-03-02',
      priority: 'high',
      project: 'Acme',
      tags: ['phone'],
    };
    expect(await registry.execute('create_task', payload, { idempotencyKey: 'key-1' })).toEqual({
      taskId: 'task-1',
      title: 'Call Bob',
    });
    expect(await registry.execute('create_task', { title: 'Second' }, { idempotencyKey: 'key-2' })).toEqual({
      taskId: 'task-2',
      title: 'Second',
    });
    const list = contents(file);
    expect(list.tasks).toEqual([
      {
        id: 'task-1',
        title: 'Call Bob',
        notes: 'offsite',
        due: '2026-03-02',
        priority: 'high',
        project: 'Acme',
        tags: ['phone'],
        status: 'open',
        createdAt: NOW.toISOString(),
        updatedAt: NOW.toISOString(),
        idempotencyKey: 'key-1',
      },
      {
        id: 'task-2',
        title: 'Second',
        priority: 'normal',
        tags: [],
        status: 'open',
        createdAt: NOW.toISOString(),
        updatedAt: NOW.toISOString(),
        idempotencyKey: 'key-2',
      },
    ]);
    expect(list.applied['key-1']).toEqual({
      action: 'create_task',
      result: { taskId: 'task-1', title: 'Call Bob' },
      appliedAt: NOW.toISOString(),
    });
    expect(list.revision).toBe(2);
    // Nothing left beside the file: temporary files renamed, lock released.
    expect(readdirSync(path.dirname(file))).toEqual(['tasks.json']);
  });

  it('send_message queues the message in the outbox', async () => {
    const { file, registry } = fresh();
    expect(
      await registry.execute(
        'send_message',
        { channel: 'email', to: 'bob@example.com', subject: 'Offsite', body: 'See you.' },
        { idempotencyKey: 'k' },
      ),
    ).toEqual({ messageId: 'msg-1', channel: 'email', to: 'bob@example.com', status: 'queued' });
    expect(contents(file).outbox).toEqual([
      {
        id: 'msg-1',
        channel: 'email',
        to: 'bob@example.com',
        subject: 'Offsite',
        body: 'See you.',
        status: 'queued',
        queuedAt: NOW.toISOString(),
        idempotencyKey: 'k',
      },
    ]);
  });

  it('add_busy_block adds the block, titled Busy by default', async () => {
    const { file, registry } = fresh();
    const block = { start: '2026-03-02T09:00:00+01:00', end: '2026-03-02T10:00:00+01:00' };
    expect(await registry.execute('add_busy_block', block, { idempotencyKey: 'k' })).toEqual({
      busyBlockId: 'busy-1',
      ...block,
    });
    expect(contents(file).busyBlocks).toEqual([
      { id: 'busy-1', ...block, title: 'Busy', createdAt: NOW.toISOString(), idempotencyKey: 'k' },
    ]);
  });

  it('modify_task changes and clears fields', async () => {
    const { file, registry, store } = fresh();
    await registry.execute(
      'create_task',
      { title: 'Call Bob', due: '2026-03-02', project: 'Acme' },
      { idempotencyKey: 'create' },
    );
    const later = new Date('2026-03-01T09:00:00.000Z');
    const laterRegistry = exampleActionRegistry({ store: new TaskList({ file: store.file, now: () => later }) });
    expect(
      await laterRegistry.execute(
        'modify_task',
        { id: 'task-1', changes: { status: 'done', due: null, tags: ['phone'] } },
        { idempotencyKey: 'modify' },
      ),
    ).toEqual({ taskId: 'task-1', changed: ['due', 'tags', 'status'] });
    expect(contents(file).tasks).toEqual([
      {
        id: 'task-1',
        title: 'Call Bob',
        priority: 'normal',
        project: 'Acme',
        tags: ['phone'],
        status: 'done',
        createdAt: NOW.toISOString(),
        updatedAt: later.toISOString(),
        idempotencyKey: 'create',
      },
    ]);
  });

  it('modify_task of an unknown id is a non-retryable UnknownTask and writes nothing', async () => {
    const { file, registry } = fresh();
    await registry.execute('create_task', { title: 'Call Bob' }, { idempotencyKey: 'create' });
    const before = readFileSync(file, 'utf8');
    const error = await registry
      .execute('modify_task', { id: 'task-9', changes: { status: 'done' } }, { idempotencyKey: 'modify' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnknownTask);
    expect(error).toMatchObject({
      type: 'UnknownTask',
      nonRetryable: true,
      message: `modify_task: no task "task-9" in ${file} (it has task-1)`,
    });
    expect(readFileSync(file, 'utf8')).toBe(before);
  });

  it('batch_create_tasks creates every draft', async () => {
    const { file, registry } = fresh();
    expect(
      await registry.execute(
        'batch_create_tasks',
        { tasks: [{ title: 'One' }, { title: 'Two', priority: 'urgent' }, { title: 'Three' }] },
        { idempotencyKey: 'batch' },
      ),
    ).toEqual({ taskIds: ['task-1', 'task-2', 'task-3'], count: 3 });
    expect(contents(file).tasks.map((t) => [t.id, t.title, t.priority, t.idempotencyKey])).toEqual([
      ['task-1', 'One', 'normal', 'batch'],
      ['task-2', 'Two', 'urgent', 'batch'],
      ['task-3', 'Three', 'normal', 'batch'],
    ]);
  });

  it('validates the payload again before executing', async () => {
    const { file, registry } = fresh();
    const error = await registry
      .execute('create_task', { title: '', due: 'soon' }, { idempotencyKey: 'k' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidPayload);
    expect(error).toMatchObject({
      type: 'InvalidPayload',
      nonRetryable: true,
      problems: ['payload.title: must not be empty', expect.stringMatching(/^payload\.due: /)],
    });
    expect(existsSync(file)).toBe(false);
    await expect(registry.execute('create_task', { title: 'x' }, { idempotencyKey: '' })).rejects.toThrow(
      'an idempotency key is required',
    );
  });
});

describe('idempotency', () => {
  it.each([
    ['create_task', { title: 'Call Bob' }],
    ['send_message', { channel: 'telegram', to: '@bob_smith', body: 'hi' }],
    ['add_busy_block', { start: '2026-03-02T09:00:00+01:00', end: '2026-03-02T10:00:00+01:00' }],
    ['batch_create_tasks', { tasks: [{ title: 'One' }, { title: 'Two' }] }],
  ])('%s run again with the same key returns the same result and changes nothing', async (type, payload) => {
    const { file, registry } = fresh();
    const first = await registry.execute(type, payload, { idempotencyKey: 'same' });
    const written = readFileSync(file, 'utf8');
    expect(await registry.execute(type, payload, { idempotencyKey: 'same' })).toEqual(first);
    expect(await registry.execute(type, payload, { idempotencyKey: 'same' })).toEqual(first);
    expect(readFileSync(file, 'utf8')).toBe(written);
    // The key, not the content, decides: a new key is a new effect.
    expect(await registry.execute(type, payload, { idempotencyKey: 'other' })).not.toEqual(first);
  });

  it('modify_task with the same key returns the recorded result even after later changes', async () => {
    const { file, registry } = fresh();
    await registry.execute('create_task', { title: 'Call Bob' }, { idempotencyKey: 'create' });
    const first = await registry.execute(
      'modify_task',
      { id: 'task-1', changes: { status: 'done' } },
      { idempotencyKey: 'done' },
    );
    await registry.execute('modify_task', { id: 'task-1', changes: { status: 'open' } }, { idempotencyKey: 'reopen' });
    expect(
      await registry.execute('modify_task', { id: 'task-1', changes: { status: 'done' } }, { idempotencyKey: 'done' }),
    ).toEqual(first);
    expect(contents(file).tasks[0]!.status).toBe('open');
  });

  it('a key applied by one action type is refused to another', async () => {
    const { registry } = fresh();
    await registry.execute('create_task', { title: 'Call Bob' }, { idempotencyKey: 'k' });
    const error = await registry
      .execute('send_message', { channel: 'email', to: 'bob@example.com', body: 'x' }, { idempotencyKey: 'k' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdempotencyConflict);
    expect((error as Error).message).toMatch(
      /^idempotency key k was applied by create_task at .*; send_message cannot reuse it$/,
    );
  });

  it('a batch is all or nothing: a failure part-way writes none of it, and the retry writes all of it once', async () => {
    const { file, registry, store } = fresh();
    await registry.execute('create_task', { title: 'Before' }, { idempotencyKey: 'before' });
    let failNext = true;
    // The same write a batch makes, failing after two of its three tasks on the first attempt.
    registry.register(
      defineActionType({
        name: 'flaky_batch',
        description: 'test',
        payload: z.object({ titles: z.array(z.string()) }),
        async execute(payload, ctx) {
          const { result } = await ctx.store.applyOnce(ctx.idempotencyKey, 'flaky_batch', (tx) => {
            const ids = payload.titles.map((title, i) => {
              if (i === 2 && failNext) {
                failNext = false;
                throw new Error('transient failure part-way through the batch');
              }
              return tx.createTask({ title }).id;
            });
            return { taskIds: ids };
          });
          return result;
        },
        summarize: () => 'flaky',
      }),
    );
    const payload = { titles: ['One', 'Two', 'Three'] };
    await expect(registry.execute('flaky_batch', payload, { idempotencyKey: 'batch' })).rejects.toThrow('part-way');
    expect((await store.read()).tasks.map((t) => t.title)).toEqual(['Before']);
    const retried = await registry.execute('flaky_batch', payload, { idempotencyKey: 'batch' });
    expect(retried).toEqual({ taskIds: ['task-2', 'task-3', 'task-4'] });
    expect(await registry.execute('flaky_batch', payload, { idempotencyKey: 'batch' })).toEqual(retried);
    expect(contents(file).tasks.map((t) => t.title)).toEqual(['Before', 'One', 'Two', 'Three']);
  });

  it('a forced activity retry (the attempt fails after the write) makes one task with one result', async () => {
    const { file, registry } = fresh();
    let attempts = 0;
    // What Temporal does when an attempt's completion is lost (timeout, worker gone): runs it again with the same input.
    const activity = async (input: { actionType: string; payload: unknown; idempotencyKey: string }) => {
      attempts++;
      const result = await registry.execute(input.actionType, input.payload, { idempotencyKey: input.idempotencyKey });
      if (attempts === 1) throw new Error('StartToClose timeout: the completion never reached the server');
      return result;
    };
    const input = { actionType: 'create_task', payload: { title: 'Call Bob' }, idempotencyKey: 'retried' };
    await expect(activity(input)).rejects.toThrow('timeout');
    expect(await activity(input)).toEqual({ taskId: 'task-1', title: 'Call Bob' });
    expect(contents(file).tasks).toHaveLength(1);
  });
});

describe('task list file', () => {
  it('reads as empty before the first write, and is never created by reading', async () => {
    const { file, store } = fresh();
    expect(await store.read()).toEqual({ version: 1, revision: 0, tasks: [], outbox: [], busyBlocks: [], applied: {} });
    expect(existsSync(file)).toBe(false);
  });

  it('a hand-broken file is a clear error, and is left as it was', async () => {
    const { file, registry, store } = fresh();
    await registry.execute('create_task', { title: 'Call Bob' }, { idempotencyKey: 'k' });
    writeFileSync(file, '{"tasks": [');
    await expect(store.read()).rejects.toThrow(
      new RegExp(`^task list ${file} is not valid JSON \\(.*\\); fix it or move it aside$`),
    );
    await expect(registry.execute('create_task', { title: 'x' }, { idempotencyKey: 'k2' })).rejects.toBeInstanceOf(
      TaskListUnreadable,
    );
    writeFileSync(file, '{"tasks": {}, "version": 2}');
    await expect(store.read()).rejects.toThrow(
      `task list ${file} is not a task list: version: 2 is not a version this Treadle reads (1); tasks: must be a list of records with string ids; fix it or move it aside`,
    );
    expect(readFileSync(file, 'utf8')).toBe('{"tasks": {}, "version": 2}');
  });

  it('a hand-written file without every list is read, and ids continue after the highest', async () => {
    const { file, registry } = fresh();
    const { mkdirSync } = await import('node:fs');
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(
      file,
      JSON.stringify({
        tasks: [
          {
            id: 'task-7',
            title: 'Old',
            priority: 'normal',
            tags: [],
            status: 'open',
            createdAt: '',
            updatedAt: '',
            idempotencyKey: 'old',
          },
        ],
      }),
    );
    expect(await registry.execute('create_task', { title: 'New' }, { idempotencyKey: 'k' })).toEqual({
      taskId: 'task-8',
      title: 'New',
    });
  });

  it('a live lock held elsewhere makes a change wait, then fail retryably with its owner named; cancelling stops the wait; a minute-old one is taken over', async () => {
    const { file, registry, store } = fresh({ lockTimeoutMs: 300 });
    await registry.execute('create_task', { title: 'Before' }, { idempotencyKey: 'before' });
    // Another live process on this host (this one, under another token) holds the lock.
    writeFileSync(
      store.lockFile,
      JSON.stringify({ pid: process.pid, host: hostname(), token: 'other', acquiredAt: '2026-03-01T07:59:59.000Z' }),
    );
    const started = Date.now();
    const error = await registry
      .execute('create_task', { title: 'x' }, { idempotencyKey: 'k' })
      .catch((e: unknown) => e);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(error).toBeInstanceOf(TaskListBusy);
    expect(error).toMatchObject({
      nonRetryable: false,
      message: `task list ${file} is locked by pid ${process.pid} on ${hostname()} since 2026-03-01T07:59:59.000Z; gave up after 300 ms`,
    });

    const controller = new AbortController();
    const waiting = registry.execute('create_task', { title: 'x' }, { idempotencyKey: 'k', signal: controller.signal });
    setTimeout(() => controller.abort(new Error('activity cancelled')), 50);
    await expect(waiting).rejects.toThrow('activity cancelled');
    expect(contents(file).tasks).toHaveLength(1);
    // The lock was not ours: it is still there.
    expect(JSON.parse(readFileSync(store.lockFile, 'utf8'))).toMatchObject({ token: 'other' });

    // A live owner on this host keeps its lock past staleLockMs (10 s); only after 6 × that is its pid taken for reused.
    const aged = (seconds: number) =>
      utimesSync(store.lockFile, new Date(Date.now() - seconds * 1000), new Date(Date.now() - seconds * 1000));
    aged(20);
    await expect(registry.execute('create_task', { title: 'x' }, { idempotencyKey: 'k' })).rejects.toBeInstanceOf(
      TaskListBusy,
    );
    aged(61);
    expect(await registry.execute('create_task', { title: 'x' }, { idempotencyKey: 'k' })).toEqual({
      taskId: 'task-2',
      title: 'x',
    });
  });

  it('a lock from another host is waited for while fresh and taken over once older than staleLockMs', async () => {
    const { file, registry, store } = fresh({ lockTimeoutMs: 200, staleLockMs: 5_000 });
    await registry.execute('create_task', { title: 'Before' }, { idempotencyKey: 'before' });
    writeFileSync(
      store.lockFile,
      JSON.stringify({ pid: 1, host: 'another-host', token: 'remote', acquiredAt: NOW.toISOString() }),
    );
    await expect(registry.execute('create_task', { title: 'x' }, { idempotencyKey: 'k' })).rejects.toBeInstanceOf(
      TaskListBusy,
    );
    const old = new Date(Date.now() - 6_000);
    utimesSync(store.lockFile, old, old);
    expect(await registry.execute('create_task', { title: 'x' }, { idempotencyKey: 'k' })).toEqual({
      taskId: 'task-2',
      title: 'x',
    });
    expect(readdirSync(path.dirname(file))).toEqual(['tasks.json']);
  });

  it('a lock whose owner on this host has exited is taken over at once', async () => {
    const { registry, store } = fresh({ lockTimeoutMs: 60_000, staleLockMs: 60_000 });
    const { mkdirSync } = await import('node:fs');
    mkdirSync(path.dirname(store.file), { recursive: true });
    writeFileSync(
      store.lockFile,
      JSON.stringify({ pid: await exitedPid(), host: hostname(), token: 'dead', acquiredAt: NOW.toISOString() }),
    );
    const started = Date.now();
    expect(await registry.execute('create_task', { title: 'x' }, { idempotencyKey: 'k' })).toEqual({
      taskId: 'task-1',
      title: 'x',
    });
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe('across processes', () => {
  it('two processes executing create_task with the same key at once make one task and return the same result', async () => {
    const { file } = fresh();
    const results = await inProcesses<unknown>(
      2,
      `const registry = exampleActionRegistry({ tasksFile: ${JSON.stringify(file)} });
       return registry.execute('create_task', { title: 'Call Bob' }, { idempotencyKey: 'same-key' });`,
    );
    expect(results).toEqual([
      { taskId: 'task-1', title: 'Call Bob' },
      { taskId: 'task-1', title: 'Call Bob' },
    ]);
    expect(contents(file).tasks).toHaveLength(1);
  });

  it('four processes writing 10 distinct keys each lose no write, and a reader never sees half a file', async () => {
    const { file, store } = fresh();
    let reading = true;
    let reads = 0;
    const reader = (async () => {
      while (reading) {
        await store.read(); // throws on a half-written file
        reads++;
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    })();
    try {
      await inProcesses<unknown>(
        4,
        `const registry = exampleActionRegistry({ tasksFile: ${JSON.stringify(file)} });
         for (let i = 0; i < 10; i++) await registry.execute('create_task', { title: 'p' + index + '-' + i }, { idempotencyKey: 'p' + index + '-' + i });
         return null;`,
      );
    } finally {
      reading = false;
      await reader;
    }
    const list = contents(file);
    expect(list.tasks).toHaveLength(40);
    expect(new Set(list.tasks.map((t) => t.id)).size).toBe(40);
    expect(new Set(list.tasks.map((t) => t.title)).size).toBe(40);
    expect(list.revision).toBe(40);
    expect(reads).toBeGreaterThan(0);
  });

  it('a worker killed while holding the lock, mid-change, leaves nothing; the retry takes its lock over at once and makes one task', async () => {
    const { file, store } = fresh({ staleLockMs: 60_000, lockTimeoutMs: 60_000 });
    // The child's change creates the task and then the process dies before the write.
    await expect(
      inProcesses<unknown>(
        1,
        `const store = new TaskList({ file: ${JSON.stringify(file)} });
         await store.applyOnce('crash-key', 'create_task', (tx) => { tx.createTask({ title: 'Call Bob' }); process.kill(process.pid, 'SIGKILL'); return null; });`,
      ),
    ).rejects.toThrow(/exited null/);
    expect(existsSync(store.lockFile)).toBe(true);
    expect(existsSync(file)).toBe(false);
    const started = Date.now();
    const registry = exampleActionRegistry({ store });
    expect(await registry.execute('create_task', { title: 'Call Bob' }, { idempotencyKey: 'crash-key' })).toEqual({
      taskId: 'task-1',
      title: 'Call Bob',
    });
    expect(Date.now() - started).toBeLessThan(2_000); // the dead owner's pid, not the 60 s stale age
    expect(contents(file).tasks).toHaveLength(1);
    expect(existsSync(store.lockFile)).toBe(false);
  });

  it('a worker killed after its write, before reporting, leaves one task; the retry returns the recorded result', async () => {
    const { file } = fresh();
    await expect(
      inProcesses<unknown>(
        1,
        `const registry = exampleActionRegistry({ tasksFile: ${JSON.stringify(file)} });
         await registry.execute('batch_create_tasks', { tasks: [{ title: 'One' }, { title: 'Two' }] }, { idempotencyKey: 'crash-after' });
         process.kill(process.pid, 'SIGKILL');`,
      ),
    ).rejects.toThrow(/exited null/);
    const registry = exampleActionRegistry({ tasksFile: file });
    expect(
      await registry.execute(
        'batch_create_tasks',
        { tasks: [{ title: 'One' }, { title: 'Two' }] },
        { idempotencyKey: 'crash-after' },
      ),
    ).toEqual({ taskIds: ['task-1', 'task-2'], count: 2 });
    expect(contents(file).tasks).toHaveLength(2);
  });
});

describe('the registry', () => {
  it('registers custom types, refuses duplicates and bad names, lists names sorted', async () => {
    const { registry } = fresh();
    const seen: string[] = [];
    registry.register(
      defineActionType({
        name: 'archive_note',
        description: 'Archive a note.',
        payload: z.object({ noteId: z.string().min(1) }).strict(),
        async execute(payload, ctx) {
          seen.push(`${payload.noteId}@${ctx.idempotencyKey}`);
          return { archived: payload.noteId };
        },
        summarize: (p) => `archive note ${p.noteId}`,
      }),
    );
    expect(registry.names()).toEqual([
      'add_busy_block',
      'archive_note',
      'batch_create_tasks',
      'create_task',
      'modify_task',
      'send_message',
    ]);
    expect(registry.validatePayload('archive_note', { noteId: '' })).toEqual(['payload.noteId: must not be empty']);
    expect(registry.summarize('archive_note', { noteId: 'n1' })).toBe('archive note n1');
    expect(await registry.execute('archive_note', { noteId: 'n1' }, { idempotencyKey: 'k' })).toEqual({
      archived: 'n1',
    });
    expect(seen).toEqual(['n1@k']);
    expect(() => registry.register({ ...registry.get('create_task') })).toThrow(
      'action type "create_task" is registered already',
    );
    expect(() => registry.register({ ...registry.get('create_task'), name: 'Create-Task' })).toThrow(
      'must be snake_case',
    );
  });

  it('is what the approval activities take (ActionCatalog)', () => {
    const catalog: ActionCatalog = fresh().registry;
    expect(catalog.validatePayload('create_task', { title: 'x' })).toEqual([]);
  });

  it("the CLI worker's action registry uses TREADLE_TASKS_FILE (relative to the home), default <TREADLE_HOME>/tasks.json", () => {
    expect(loadConfig({ TREADLE_HOME: '/srv/home' }).tasksFile).toBe('/srv/home/tasks.json');
    expect(loadConfig({ TREADLE_HOME: '/srv/home', TREADLE_TASKS_FILE: ' lists/t.json ' }).tasksFile).toBe(
      '/srv/home/lists/t.json',
    );
    expect(loadConfig({ TREADLE_TASKS_FILE: ' /srv/tasks.json ' }).tasksFile).toBe('/srv/tasks.json');
    expect((bundledActionRegistry().store as TaskList).file).toBe(homeLocation('TREADLE_TASKS_FILE', process.env));
    expect((bundledActionRegistry({ tasksFile: 'x/t.json' }).store as TaskList).file).toBe(path.resolve('x/t.json'));
    expect(bundledActionRegistry().names()).toEqual(exampleActionRegistry({ tasksFile: 'x/t.json' }).names());
  });

  it("defaultActionRegistry is the generic registry: none of the examples' types, no store", () => {
    const generic = defaultActionRegistry();
    expect(generic.names()).toEqual([]);
    expect(generic.store).toBeUndefined();
    expect(() => generic.get('create_task')).toThrow(
      new UnknownActionType('unknown action type "create_task" (known: none)'),
    );
  });
});

/** The pid of a process that has exited. */
async function exitedPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0']);
  await new Promise((resolve) => child.on('close', resolve));
  return child.pid!;
}

/**
 * Runs `body` (CommonJS, with examples/task-list's exports in scope, compiled on the fly with swc as jest
 * does) in `count` separate node processes, `index` set to each one's number. They start `body` together: each
 * reports ready, then waits until every one has. Returns what each printed last (JSON); rejects with the exit
 * code (null when killed by a signal) when one fails.
 */
async function inProcesses<T>(count: number, body: string): Promise<T[]> {
  const work = mkdtempSync(path.join(dir, 'procs-'));
  const go = path.join(work, 'go');
  const script = path.join(work, 'child.js');
  writeFileSync(
    script,
    `
const fs = require('node:fs');
const swc = require(${JSON.stringify(require.resolve('@swc/core'))});
require.extensions['.ts'] = (module, filename) => {
  const { code } = swc.transformSync(fs.readFileSync(filename, 'utf8'), { filename, jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } });
  module._compile(code, filename);
};
const { exampleActionRegistry, TaskList } = require(${JSON.stringify(path.join(EXAMPLES, 'task-list', 'index.ts'))});
const index = Number(process.argv[2]);
(async () => {
  process.stdout.write('ready\\n');
  while (!fs.existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 5));
  const result = await (async () => { ${body} })();
  process.stdout.write(JSON.stringify(result ?? null) + '\\n');
})().catch((error) => { process.stderr.write(String(error && error.stack || error)); process.exit(1); });
`,
  );
  let ready = 0;
  const children = Array.from({ length: count }, (_, index) => {
    const child = spawn(process.execPath, [script, String(index)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      if (!stdout.includes('ready\n') && (stdout + chunk).includes('ready\n') && ++ready === count)
        writeFileSync(go, '');
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    return new Promise<T>((resolve, reject) =>
      child.on('close', (code) => {
        if (code !== 0) reject(new Error(`child ${index} exited ${code}: ${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').pop()!) as T);
      }),
    );
  });
  return Promise.all(children);
}
