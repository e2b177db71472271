/**
 * `treadle schedule …` (the built CLI, as users run it) against the run's dev server and a real worker:
 * create from a pipeline file with an input, list (table and JSON), describe, trigger (prints the item's id; the
 * item completes), a second trigger skipped while the item waits for a review, pause and unpause with notes, delete;
 * and one-line refusals with their exit codes: an unknown name (1), an invalid spec listing its problems, a bad
 * --overlap, a bad cron, no --cron, a bad name and a name in use (2, nothing created).
 * Every schedule the tests make is deleted after them.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle, type CliRun } from '../support/cli';
import type { ScheduleDetail, ScheduleListing } from '../../src/client';

let h: Harness;
let dir: string;
const made: string[] = [];
/** A schedule name unique to this run, deleted after the tests. */
const scheduleName = (what: string): string => {
  const name = `cli-${what}-${h.taskQueue}`;
  made.push(name);
  return name;
};

beforeAll(async () => {
  h = await startHarness();
  dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'schedule-cli-'));
});
afterAll(async () => {
  for (const name of made) await h.client.schedules.delete(name).catch(() => undefined);
  await h?.shutdown();
});

const treadle = (args: string[]): Promise<CliRun> => runTreadle(h, args, { TREADLE_REVIEWER: 'cli-user' });
const write = (name: string, content: string): string => {
  const file = path.join(dir, name);
  writeFileSync(file, content);
  return file;
};
/** A cron string that does not fire while the tests run. */
const NEVER = '0 0 1 1 * 2099';

it('creates, lists, describes, triggers, pauses, unpauses and deletes a schedule', async () => {
  const name = scheduleName('tour');
  const spec = write(
    'reviewed.yaml',
    'name: cli-sched\nstages:\n  - name: only\n    run: scripted\n    review_policy: always\n',
  );
  const input = write('input.json', JSON.stringify({ script: { only: [{ output: { hello: 'world' } }] } }));
  const created = await treadle(['schedule', 'create', name, '--file', spec, '--cron', NEVER, '--input', `@${input}`]);
  expect(created).toEqual({
    code: 0,
    stdout: `schedule ${name}: cli-sched at "${NEVER}", overlap skip; next firing 2099-01-01T00:00:00Z; its items are ${name}-<time>\n`,
    stderr: '',
  });

  const listed = await eventually(async () => {
    const run = await treadle(['schedule', 'list', '--json']);
    return (JSON.parse(run.stdout) as ScheduleListing[]).find((s) => s.name === name);
  });
  expect(listed).toEqual(
    expect.objectContaining({ pipeline: 'cli-sched', cron: [NEVER], overlap: 'skip', paused: false }),
  );
  expect((await treadle(['schedule', 'list'])).stdout).toMatch(
    new RegExp(
      `^${name}\\s+cli-sched\\s+"${NEVER.replace(/\*/g, '\\*')}"\\s+skip\\s+active\\s+2099-01-01T00:00:00Z`,
      'm',
    ),
  );

  const triggered = await treadle(['schedule', 'trigger', name]);
  expect(triggered.code).toBe(0);
  const itemId = triggered.stdout.trim();
  expect(itemId).toMatch(new RegExp(`^${name}-\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ$`));
  await eventually(async () => ((await h.client.getState(itemId)).status === 'waiting_review' ? true : undefined));
  expect(await treadle(['schedule', 'trigger', name])).toEqual({
    code: 0,
    stdout: `schedule ${name} fired and skipped: ${itemId} still runs (overlap skip)\n`,
    stderr: '',
  });
  const described = await treadle(['schedule', 'describe', name]);
  expect(described.stdout).toContain(`schedule ${name} · pipeline cli-sched · active`);
  expect(described.stdout).toContain('firings:  1 started, 1 skipped (overlap), 0 buffered, 0 missed (catchup window)');
  expect(described.stdout).toMatch(new RegExp(`^${itemId}\\s+\\S+Z\\s+waiting_review$`, 'm'));
  expect((await treadle(['review', itemId, 'only', '--approve'])).code).toBe(0);
  expect((await h.client.result(itemId)).status).toBe('completed');
  // The item read the schedule's input: its script gave the stage's output.
  expect((await h.client.getState(itemId)).stages.only!.artefact).toEqual({ hello: 'world' });

  expect(await treadle(['schedule', 'pause', name, '--note', 'maintenance'])).toEqual({
    code: 0,
    stdout: `schedule ${name} paused: maintenance\n`,
    stderr: '',
  });
  const paused = JSON.parse((await treadle(['schedule', 'describe', name, '--json'])).stdout) as ScheduleDetail;
  expect(paused).toEqual(expect.objectContaining({ paused: true, note: 'maintenance', firings: 1 }));
  expect(paused.recentFirings).toEqual([expect.objectContaining({ itemId, status: 'completed' })]);
  await eventually(async () => {
    const run = await treadle(['schedule', 'list']);
    return new RegExp(`^${name}\\s.*\\spaused\\s.*maintenance$`, 'm').test(run.stdout) ? true : undefined;
  });
  expect((await treadle(['schedule', 'unpause', name])).stdout).toBe(
    `schedule ${name} unpaused: unpaused by cli-user\n`,
  );

  expect(await treadle(['schedule', 'delete', name])).toEqual({
    code: 0,
    stdout: `schedule ${name} deleted (the items it started go on)\n`,
    stderr: '',
  });
  expect((await treadle(['schedule', 'describe', name])).code).toBe(1);
});

it('refuses in one line: an unknown name exits 1, what cannot work exits 2 and creates nothing', async () => {
  const unknown = `nosuch-${h.taskQueue}`;
  for (const verb of ['describe', 'pause', 'unpause', 'trigger', 'delete'])
    expect(await treadle(['schedule', verb, unknown])).toEqual({
      code: 1,
      stdout: '',
      stderr: `treadle: no schedule named "${unknown}" in namespace default\n`,
    });

  const name = scheduleName('refused');
  const broken = write(
    'broken.yaml',
    'name: broken\nstages:\n  - name: a\n    run: nosuch\n  - name: a\n    run: scripted\n',
  );
  const invalid = await treadle(['schedule', 'create', name, '--file', broken, '--cron', NEVER]);
  expect(invalid.code).toBe(2);
  expect(invalid.stderr).toMatch(/^treadle: pipeline broken is invalid:\n {2}- .+\n {2}- /);
  const quick = write('quick.yaml', 'name: quick\nstages:\n  - name: only\n    run: scripted\n');
  const create = ['schedule', 'create', name, '--cron', NEVER];
  const usage: [string[], RegExp][] = [
    [
      ['--file', quick, '--overlap', 'never'],
      /^treadle: option '--overlap <policy>' argument 'never' is invalid\. must be skip or buffer/,
    ],
    [
      ['--file', quick, '--cron', '0 0 32 * *'],
      new RegExp(`^treadle: schedule ${name} is invalid: DayOfMonth is not in range \\[1-31\\]\n$`),
    ],
    [
      ['--file', quick, '--timezone', 'Mars/Base'],
      new RegExp(`^treadle: schedule ${name} is invalid: unknown time zone Mars/Base\n$`),
    ],
    [['--pipeline', 'nosuch'], /^treadle: unknown pipeline "nosuch" \(built-in: /],
    [['--pipeline', 'review-demo', '--file', quick], /^treadle: give --pipeline or --file, not both\n$/],
  ];
  for (const [flags, message] of usage) {
    const run = await treadle([...create, ...flags]);
    expect({ flags, code: run.code, stderr: run.stderr }).toEqual({
      flags,
      code: 2,
      stderr: expect.stringMatching(message),
    });
  }
  const noCron = await treadle(['schedule', 'create', name, '--pipeline', 'review-demo']);
  expect(noCron).toEqual({
    code: 2,
    stdout: '',
    stderr: 'treadle: say when it fires: --cron "0 2 * * *" (or "@every 1h")\n',
  });
  const badName = await treadle(['schedule', 'create', 'no good', '--pipeline', 'review-demo', '--cron', NEVER]);
  expect(badName.code).toBe(2);
  expect(badName.stderr).toContain('"no good" cannot name a schedule');
  expect((await treadle(['schedule', 'describe', name])).code).toBe(1);

  const ok = ['schedule', 'create', name, '--pipeline', 'review-demo', '--cron', NEVER];
  expect((await treadle(ok)).code).toBe(0);
  expect(await treadle(ok)).toEqual({
    code: 2,
    stdout: '',
    stderr: `treadle: a schedule named "${name}" exists already (delete it first, or choose another name)\n`,
  });
}, 120_000);
