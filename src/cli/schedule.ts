/**
 * `treadle schedule create|list|describe|pause|unpause|trigger|delete` (issue 42, docs/cli.md "Schedules"): work
 * items started on a schedule, over Temporal Schedules, through the SDK's `client.schedules`. A spec is checked
 * before connecting, as `run` checks one, so a bad one needs no server and creates nothing.
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import path from 'node:path';
import type { ScheduleDetail, ScheduleListing, TriggerOutcome } from '../client';
import type { Json } from '../model/shapes';
import type { ItemPriority } from '../model/priority';
import { formatDuration } from '../model/duration';
import { findPipeline, readJsonFile } from '../pipelines/catalog';
import { SCHEDULE_OVERLAPS, scheduleNameProblem, type ScheduleOverlap } from '../client/schedule-shapes';
import { duration, readInput } from './arguments';
import { given } from './exit-codes';
import { table } from './render';
import {
  checkBeforeStart,
  checkPriorityFlags,
  priorityFlags,
  queueOf,
  specOfFile,
  warnWithoutWorker,
  withItemOptions,
} from './start';
import type { WithClient } from './with-client';

/** Registers `treadle schedule` and its subcommands. */
export function registerScheduleCommands(program: Command, withClient: WithClient): void {
  const schedule = program
    .command('schedule')
    .description(
      'work items started on a schedule (Temporal Schedules): create, list, describe, pause, unpause, trigger, delete',
    );
  registerCreate(schedule, withClient);
  registerReading(schedule, withClient);
  registerChanges(schedule, withClient);
}

/** `--overlap`: skip or buffer. */
function overlap(value: string): ScheduleOverlap {
  if (!(SCHEDULE_OVERLAPS as readonly string[]).includes(value))
    throw new InvalidArgumentError(`must be ${SCHEDULE_OVERLAPS.join(' or ')}`);
  return value as ScheduleOverlap;
}

/** A repeatable option's values, in order. */
const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** The flags of `schedule create`. */
type CreateFlags = {
  pipeline?: string;
  file?: string;
  cron: string[];
  input?: string;
  overlap: ScheduleOverlap;
  paused?: boolean;
  note?: string;
  timezone?: string;
  catchup?: number;
  tokenBudget?: number;
  taskQueue?: string;
  json?: boolean;
} & ItemPriority;

/** `schedule create`. */
function registerCreate(schedule: Command, withClient: WithClient): void {
  const create = schedule
    .command('create <name>')
    .description('create a schedule: at each cron time it starts a work item <name>-<time> on the pipeline')
    .option('-p, --pipeline <name>', 'a built-in pipeline (treadle pipelines)')
    .option('-f, --file <file>', 'a pipeline file (YAML or JSON)')
    .option(
      '--cron <expr>',
      'when it fires, in UTC unless --timezone: "0 2 * * *", "@daily", "@every 30m"; more than one: their union',
      collect,
    )
    .option('-i, --input <json>', "every item's input: JSON, or @file.json (default: the pipeline's sample input)")
    .addOption(
      new Option(
        '--overlap <policy>',
        'while its item still runs, a firing is skipped, or buffered (one) until it ends',
      )
        .argParser(overlap)
        .default('skip'),
    )
    .option('--paused', 'create it paused: it fires only when triggered until unpaused')
    .option('--note <text>', "the schedule's note (why it is paused), shown by list and describe")
    .option('--timezone <zone>', 'the IANA time zone the cron strings are read in (default UTC), e.g. Europe/Paris')
    .option(
      '--catchup <duration>',
      'how late a firing the server missed may still start (default 1h; at least 10s)',
      duration,
    );
  withItemOptions(create, 'tokens each item may spend on models')
    .option('--json', 'print the schedule as describe --json does')
    .action(async (name: string, opts: CreateFlags) => {
      // Checked before connecting: a bad name, spec or input is reported with no server, and nothing is created.
      const { spec, input } = given(() => readSchedule(name, opts));
      await withClient(async (client) => {
        const created = await client.schedules.create(name, spec, {
          cron: opts.cron,
          input,
          overlap: opts.overlap,
          ...(opts.paused ? { paused: true } : {}),
          ...(opts.note !== undefined ? { note: opts.note } : {}),
          ...(opts.timezone !== undefined ? { timezone: opts.timezone } : {}),
          ...(opts.catchup !== undefined ? { catchupWindowMs: opts.catchup } : {}),
          ...(opts.tokenBudget !== undefined ? { tokenBudget: opts.tokenBudget } : {}),
          ...priorityFlags(opts),
        });
        await warnWithoutWorker(client, 'item');
        if (opts.json) process.stdout.write(`${JSON.stringify(created, null, 2)}\n`);
        else process.stdout.write(`${createdLine(created)}\n`);
      }, queueOf(opts))();
    });
}

/** The spec and input of `schedule create`, read and checked as `run` reads them; throws what is wrong. */
function readSchedule(name: string, opts: CreateFlags): { spec: unknown; input: Json } {
  const nameProblem = scheduleNameProblem(name);
  if (nameProblem) throw new Error(nameProblem);
  if (!opts.cron?.length) throw new Error('say when it fires: --cron "0 2 * * *" (or "@every 1h")');
  if (!opts.pipeline && !opts.file) throw new Error('name a built-in pipeline (--pipeline) or a file (--file)');
  if (opts.pipeline && opts.file) throw new Error('give --pipeline or --file, not both');
  const entry = opts.pipeline ? findPipeline(opts.pipeline) : undefined;
  const spec = specOfFile(entry ? entry.specFile : path.resolve(opts.file!));
  checkPriorityFlags(opts, checkBeforeStart(spec));
  return { spec, input: readInput(opts.input, entry ? readJsonFile(entry.sampleInputFile) : null) };
}

/** `schedule list` and `schedule describe`. */
function registerReading(schedule: Command, withClient: WithClient): void {
  schedule
    .command('list')
    .description(
      "Treadle's schedules in the namespace: pipeline, when, overlap, paused and why, next firing, last item",
    )
    .option('--json', 'as JSON: [{ name, pipeline, cron, overlap, paused, note?, nextFiring?, lastFiring? }]')
    .action(
      withClient(async (client, opts: { json?: boolean }) => {
        const listings = await client.schedules.list();
        if (opts.json) process.stdout.write(`${JSON.stringify(listings, null, 2)}\n`);
        else if (listings.length === 0)
          process.stdout.write('no schedule: create one with `treadle schedule create <name> --pipeline P --cron …`\n');
        else process.stdout.write(`${renderSchedules(listings)}\n`);
      }),
    );
  schedule
    .command('describe <name>')
    .description('a schedule: when it fires, overlap, paused and why, next firings, recent items and their status')
    .option('--json', "as JSON (the SDK's ScheduleDetail)")
    .action(
      withClient(async (client, name: string, opts: { json?: boolean }) => {
        const detail = await client.schedules.describe(name);
        process.stdout.write(opts.json ? `${JSON.stringify(detail, null, 2)}\n` : `${renderSchedule(detail)}\n`);
      }),
    );
}

/** `schedule pause`, `unpause`, `trigger` and `delete`. */
function registerChanges(schedule: Command, withClient: WithClient): void {
  for (const [verb, what] of [
    ['pause', 'pause a schedule: it fires only when triggered'],
    ['unpause', 'unpause a schedule: it fires at its times again (those it missed are not made up)'],
  ] as const)
    schedule
      .command(`${verb} <name>`)
      .description(what)
      .option('--note <text>', `why (default: ${verb}d by $TREADLE_REVIEWER or $USER), shown by list and describe`)
      .action(
        withClient(async (client, name: string, opts: { note?: string }) => {
          await client.schedules[verb](name, opts.note);
          const { note } = await client.schedules.describe(name);
          process.stdout.write(`schedule ${name} ${verb}d${note ? `: ${note}` : ''}\n`);
        }),
      );
  schedule
    .command('trigger <name>')
    .description('fire a schedule now, under its overlap policy; prints the id of the item it started')
    .action(
      withClient(async (client, name: string) => {
        process.stdout.write(`${triggeredLine(name, await client.schedules.trigger(name))}\n`);
      }),
    );
  schedule
    .command('delete <name>')
    .description('delete a schedule: it fires no more; the items it started go on')
    .action(
      withClient(async (client, name: string) => {
        await client.schedules.delete(name);
        process.stdout.write(`schedule ${name} deleted (the items it started go on)\n`);
      }),
    );
}

/** An ISO time to the second, as the item ids have it: `2026-12-07T02:00:00Z`. */
const toSecond = (iso: string | undefined): string => (iso ?? '').replace(/\.\d+Z$/, 'Z');

/** The cron strings, quoted, with the time zone when it is not UTC. */
const when = (s: { cron: string[]; timezone?: string }): string =>
  `${s.cron.map((c) => `"${c}"`).join(' + ')}${s.timezone && s.timezone !== 'UTC' ? ` (${s.timezone})` : ''}`;

/** What `create` prints: the schedule, its next firing and the form of its item ids. */
function createdLine(s: ScheduleDetail): string {
  const state = s.paused ? `paused${s.note ? `: ${s.note}` : ''}` : `next firing ${toSecond(s.nextFiring) || 'none'}`;
  return `schedule ${s.name}: ${s.pipeline} at ${when(s)}, overlap ${s.overlap}; ${state}; its items are ${s.name}-<time>`;
}

/** What `trigger` prints: the item's id alone when it started one (for scripts), else what the firing did. */
function triggeredLine(name: string, t: TriggerOutcome): string {
  if (t.outcome === 'started') return t.itemId;
  const running = 'running' in t && t.running.length ? t.running.join(', ') : 'its item';
  if (t.outcome === 'skipped') return `schedule ${name} fired and skipped: ${running} still runs (overlap skip)`;
  if (t.outcome === 'buffered') return `schedule ${name} fired: its item starts when ${running} ends (overlap buffer)`;
  return `schedule ${name} fired; its item has not started yet (treadle schedule describe ${name} will show it)`;
}

/** The table `schedule list` prints. */
export function renderSchedules(listings: ScheduleListing[]): string {
  const rows = listings.map((s) => [
    s.name,
    s.pipeline,
    when(s),
    s.overlap,
    s.paused ? 'paused' : 'active',
    s.paused ? '' : toSecond(s.nextFiring),
    s.lastFiring?.itemId ?? '',
    s.note ?? '',
  ]);
  return table(['NAME', 'PIPELINE', 'WHEN', 'OVERLAP', 'STATE', 'NEXT', 'LAST ITEM', 'NOTE'], rows);
}

/** What `schedule describe` prints. */
export function renderSchedule(s: ScheduleDetail): string {
  const state = s.paused ? `paused${s.note ? `: ${s.note}` : ''}` : `active${s.note ? ` (note: ${s.note})` : ''}`;
  const lines = [
    `schedule ${s.name} · pipeline ${s.pipeline} · ${state}`,
    `when:     ${s.cron.map((c) => `"${c}"`).join(' + ')} in ${s.timezone}`,
    `overlap:  ${s.overlap} · catchup window ${formatDuration(s.catchupWindowMs)} · task queue ${s.taskQueue}`,
    `next:     ${s.paused ? '(paused)' : s.nextFirings.slice(0, 3).map(toSecond).join(', ') || 'none'}`,
    `firings:  ${s.firings} started, ${s.skippedOverlap} skipped (overlap), ${s.buffered} buffered, ${s.missedCatchup} missed (catchup window)`,
  ];
  if (s.runningItems.length) lines.push(`running:  ${s.runningItems.join(', ')}`);
  if (s.recentFirings.length)
    lines.push(
      '',
      table(
        ['ITEM', 'SCHEDULED', 'STATUS'],
        s.recentFirings.map((f) => [f.itemId, toSecond(f.scheduledAt), f.status]),
      ),
    );
  return lines.join('\n');
}
