/**
 * The `treadle` command (built output, as users run it) against the test server: run, run --wait,
 * status (table and JSON), watch, reviews (table and JSON), review (approve, reject, edit), artefact,
 * validate, and one-line errors for unknown items, stages not waiting, bad input and an unreachable server;
 * `run --file` with implementations Treadle does not ship: refused before starting without a task_queue (and
 * --custom-worker a deprecated no-op), run on the queue's worker with one; the CLI's copies of the
 * built-in names and the dev server defaults agree with the originals.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { eventually, startHarness, type Harness } from '../support/harness';
import type { WorkItemState } from '../../src/model/state';
import {
  BUILT_IN_IMPLEMENTATIONS,
  EXAMPLE_IMPLEMENTATIONS,
  GENERIC_IMPLEMENTATIONS,
} from '../../src/pipelines/catalog';
import { DEFAULT_PORT, DEFAULT_UI_PORT } from '../../src/server/dev-server';
import { INBOX_PORT } from '../../src/ui/address';
import { devDatabaseFile } from '../../src/config/home';
import { NativeConnection } from '@temporalio/worker';
import { createImplementationsWorker, defaultRegistry } from '../../src/worker';
import { bundledRegistry } from '../../src/cli/bundled-examples';
import { runTreadle, type CliRun } from '../support/cli';

let h: Harness;
let dir: string;
beforeAll(async () => {
  h = await startHarness();
  dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'cli-'));
});
afterAll(async () => {
  await h?.shutdown();
});

const treadle = (args: string[], env: Record<string, string> = {}): Promise<CliRun> =>
  runTreadle(h, args, { TREADLE_REVIEWER: 'cli-user', ...env });

const write = (name: string, content: string): string => {
  const file = path.join(dir, name);
  writeFileSync(file, content);
  return file;
};

it('runs the review demo end to end: run, watch, reviews, review, status', async () => {
  const id = h.id('cli');
  const started = await treadle(['run', 'review-demo', '--id', id]);
  expect(started).toEqual({ code: 0, stdout: `${id}\n`, stderr: '' });

  const watched = await treadle(['watch', id]);
  // Waiting for review is a person's turn: exit 3, with the command that gives the decision.
  expect(watched.code).toBe(3);
  expect(watched.stdout).toMatch(/QualityCheckFailed\s+draft attempt 1 rejected: the draft is too short/);
  expect(watched.stdout).toMatch(/RetryAttempt\s+draft attempt 2\/3 because: the draft is too short/);
  expect(watched.stdout).toMatch(/Escalated\s+draft escalated to review/);
  expect(watched.stdout).toContain(`\n${id} is waiting_review\n`);
  expect(watched.stdout.trim().split('\n').pop()).toMatch(new RegExp(`^ +treadle review ${id} draft --approve `));

  const listed = await eventually(async () => {
    const run = await treadle(['reviews', '--json']);
    const reviews = JSON.parse(run.stdout) as { itemId: string; stage: string; reason: string }[];
    return reviews.find((r) => r.itemId === id) ? reviews : undefined;
  });
  expect(listed.find((r) => r.itemId === id)).toEqual(
    expect.objectContaining({ stage: 'draft', reason: 'escalated', pipeline: 'review-demo' }),
  );
  const table = await treadle(['reviews']);
  expect(table.stdout).toMatch(new RegExp(`${id}\\s+review-demo\\s+draft\\s+escalated`));

  const status = await treadle(['status', id]);
  expect(status.stdout).toMatch(/draft\s+waiting_review\s+3\/3\s+rejected: the tone is too informal/);
  expect(status.stdout).toContain(`treadle review ${id} draft --approve | --reject REASON | --edit FILE`);

  const edited = write('edited.json', JSON.stringify({ text: 'a better draft' }));
  expect(await treadle(['review', id, 'draft', '--edit', edited, '--note', 'rewrote it'])).toEqual({
    code: 0,
    stdout: `draft of ${id}: approve with edits by cli-user\n`,
    stderr: '',
  });
  await eventually(async () =>
    (await h.client.getState(id)).pendingReviews[0]?.stage === 'publish' ? true : undefined,
  );
  expect((await treadle(['review', id, 'publish', '--approve', '--reviewer', 'boss'])).stdout).toBe(
    `publish of ${id}: approve by boss\n`,
  );
  await h.client.result(id);

  const json = JSON.parse((await treadle(['status', id, '--json'])).stdout) as WorkItemState;
  expect(json).toEqual(
    expect.objectContaining({ id, pipeline: 'review-demo', status: 'completed', pendingReviews: [] }),
  );
  expect(json.stages.draft!.artefact).toEqual({ text: 'a better draft' });
  expect(json.stages.draft!.attempts.map((a) => a.verdict?.kind)).toEqual(['rejected', 'rejected', 'rejected']);
  expect(json.stages.draft!.attempts[0]!.feedback?.failedCriteria[0]?.name).toBe('length');
  expect((json.stages.fact_check!.artefact as { upstream: { draft: unknown } }).upstream.draft).toEqual({
    text: 'a better draft',
  });
  expect(json.events.length).toBeGreaterThan(15);
  const artefact = await treadle(['artefact', id, 'draft']);
  expect(JSON.parse(artefact.stdout)).toEqual({ text: 'a better draft' });
}, 120_000);

it('runs a pipeline file with input from a file, waits, and rejects a review', async () => {
  const spec = write(
    'p.yaml',
    'name: cli-file\nstages:\n  - name: only\n    run: scripted\n    review_policy: always\n',
  );
  const input = write('input.json', JSON.stringify({ hello: 'world' }));
  const id = h.id('cli');
  const waited = await treadle(['run', '--file', spec, '--input', `@${input}`, '--id', id, '--wait']);
  // Waiting for a person is exit 3, with the command that gives the decision.
  expect(waited.code).toBe(3);
  expect(waited.stdout).toContain(`treadle review ${id} only --approve`);
  expect(waited.stdout).toContain(`started ${id}`);
  expect(waited.stdout).toContain('ReviewRequested');
  expect(waited.stdout).toMatch(/only\s+waiting_review/);
  expect(await treadle(['review', id, 'only', '--reject', 'not today'])).toEqual({
    code: 0,
    stdout: `only of ${id}: reject by cli-user\n`,
    stderr: '',
  });
  const result = JSON.parse((await treadle(['result', id])).stdout);
  expect(result).toEqual(
    expect.objectContaining({ status: 'failed', failedStages: ['only'], error: 'stage failed: only' }),
  );
  // Reviewing a finished item says so.
  expect(await treadle(['review', id, 'only', '--approve'])).toEqual({
    code: 1,
    stdout: '',
    // Rejected, the item failed: its workflow says so too (engine 6).
    stderr: `treadle: work item ${id} has finished (failed); no stage is waiting for review\n`,
  });
});

it('prints one clear line and exits 1 on every kind of error', async () => {
  const id = h.id('cli');
  await h.client.start(
    {
      name: 'cli-err',
      stages: [
        { name: 's', run: 'scripted', review_policy: 'always' },
        { name: 't', run: 'scripted', depends_on: ['s'] },
      ],
    },
    null,
    { id },
  );
  await eventually(async () => ((await h.client.getState(id)).status === 'waiting_review' ? true : undefined));

  // Exit 1 when the command failed; 2 when what it was given cannot work (docs/cli.md#exit-codes).
  const cases: [string[], string, number, Record<string, string>?][] = [
    [['status', 'no-such-item'], 'treadle: unknown work item "no-such-item" in namespace default', 1],
    [
      ['review', id, 't', '--approve'],
      `treadle: review rejected: stage "t" of work item ${id} is not waiting for review (it is pending); waiting: s`,
      1,
    ],
    [
      ['review', id, 'zz', '--approve'],
      `treadle: review rejected: unknown stage "zz" in work item ${id} (stages: s, t)`,
      1,
    ],
    [
      ['review', id, 's'],
      'treadle: give exactly one of --approve, --reject REASON, --edit FILE, --request-changes NOTE',
      2,
    ],
    [
      ['review', id, 's', '--approve', '--reject', 'x'],
      'treadle: give exactly one of --approve, --reject REASON, --edit FILE, --request-changes NOTE (got --approve, --reject)',
      2,
    ],
    [['review', id, 's', '--edit', '/nonexistent.json'], 'treadle: cannot read /nonexistent.json: ENOENT', 2],
    [
      ['run', 'nope'],
      'treadle: unknown pipeline "nope" (built-in: review-demo, documents, documents-llm, discovery, email-triage; or pass --file pipeline.yaml)',
      2,
    ],
    [['run', 'review-demo', '--input', '{bad'], 'treadle: --input is not valid JSON (Expected property name', 2],
    [
      ['status', 'x'],
      'treadle: cannot reach the Temporal server at 127.0.0.1:1: ',
      1,
      { TEMPORAL_ADDRESS: '127.0.0.1:1' },
    ],
  ];
  for (const [args, message, code, env] of cases) {
    const run = await treadle(args, env);
    expect({ args, code: run.code, stdout: run.stdout }).toEqual({ args, code, stdout: '' });
    expect(run.stderr.split('\n').filter(Boolean)).toHaveLength(1);
    expect({ args, stderr: run.stderr.slice(0, message.length) }).toEqual({ args, stderr: message });
  }
  await h.client.approve(id, 's');
});

it('validates pipeline files, listing every problem', async () => {
  const bad = write(
    'bad.yaml',
    'name: bad\nstages:\n  - name: a\n    run: scriptd\n    depends_on: [b]\n  - name: b\n    run: scripted\n    depends_on: [a]\n    retry_budget: { max_attempts: 0 }\n',
  );
  const run = await treadle(['validate', bad]);
  expect(run.code).toBe(1);
  expect(run.stderr).toBe(
    [
      `treadle: ${bad} is invalid (3 problems):`,
      `  - ${bad}:9: stages[1] (b).retry_budget.max_attempts: must be at least 1 (it includes the first attempt)`,
      `  - ${bad}:5: dependency cycle: a -> b -> a; remove one of these depends_on`,
      `  - ${bad}:4: stage a: unknown stage implementation "scriptd" (did you mean "scripted"?) (registered: approval, build_fts_index, cross_reference, extract_concepts, fan_out, final_review, generate_embeddings, human, llm, loop, pdf_to_markdown, scripted, tdd, triage_dedup, triage_route)`,
      '',
    ].join('\n'),
  );
  const good = await treadle(['validate', path.join(__dirname, '..', '..', 'examples', 'review-demo.yaml')]);
  expect(good.stdout).toMatch(/pipeline review-demo is valid \(4 stages\)/);
});

describe('run --file with implementations Treadle does not ship', () => {
  const customSpec = (queue?: string): string =>
    write(
      `custom-${queue ?? 'none'}.yaml`,
      `name: custom\n${queue ? `task_queue: ${queue}\n` : ''}stages:\n  - name: summarize\n    run: my_summarizer\n    gate: my_judge\n`,
    );
  const unknownProblems = [
    '  - stage summarize: unknown stage implementation "my_summarizer" (registered: approval, build_fts_index, cross_reference, extract_concepts, fan_out, final_review, generate_embeddings, human, llm, loop, pdf_to_markdown, scripted, tdd, triage_dedup, triage_route)',
    '  - stage summarize: unknown gate implementation "my_judge" (registered: concept_graph, llm-judge, markdown_quality, scripted)',
  ];
  const queueHint =
    'Implementations Treadle does not ship run on a queue of their own: name the task_queue their worker polls (on the stage or the contract, or on the pipeline for all of them; docs/stages/code.md#writing-implementations).';
  const deprecated =
    'treadle: --custom-worker is deprecated and does nothing: implementations of your own run on the task_queue the pipeline names for them\n';

  it('refuses before starting (and before connecting), listing every unknown name and how to name their queue', async () => {
    const spec = customSpec();
    const id = h.id('cli');
    const expected = {
      code: 2,
      stdout: '',
      stderr: ['treadle: pipeline custom is invalid:', ...unknownProblems, queueHint, ''].join('\n'),
    };
    expect(await treadle(['run', '--file', spec, '--id', id])).toEqual(expected);
    await expect(h.client.getState(id)).rejects.toThrow(`unknown work item "${id}"`);
    // No server is needed to find out.
    expect(await treadle(['run', '--file', spec, '--id', id], { TEMPORAL_ADDRESS: '127.0.0.1:1' })).toEqual(expected);
    // The old flag changes nothing but says so.
    expect(await treadle(['run', '--file', spec, '--id', id, '--custom-worker'])).toEqual({
      ...expected,
      stderr: deprecated + expected.stderr,
    });
  });

  it('lists structural problems and unknown names together', async () => {
    const spec = write(
      'broken.yaml',
      'name: broken\nstages:\n  - name: a\n    run: my_summarizer\n    depends_on: [nowhere]\n',
    );
    expect(await treadle(['run', '--file', spec])).toEqual({
      code: 2,
      stdout: '',
      stderr: [
        'treadle: pipeline broken is invalid:',
        '  - stage a: depends on unknown stage "nowhere" (the stages are: a)',
        '  - stage a: unknown stage implementation "my_summarizer" (registered: approval, build_fts_index, cross_reference, extract_concepts, fan_out, final_review, generate_embeddings, human, llm, loop, pdf_to_markdown, scripted, tdd, triage_dedup, triage_route)',
        queueHint,
        '',
      ].join('\n'),
    });
  });

  it('with task_queue, runs the stage and its gate on the worker polling that queue', async () => {
    const registry = defaultRegistry()
      .stage('my_summarizer', async (ctx) => ({
        outcome: 'completed',
        artefact: { summary: String(ctx.input).slice(0, 5) },
      }))
      .gate('my_judge', async () => ({ kind: 'accepted' }));
    const queue = `summaries-${h.taskQueue}`;
    const connection = await NativeConnection.connect({ address: h.address });
    const implementations = await createImplementationsWorker({
      connection,
      registry,
      blobs: h.blobs,
      implementationsQueue: queue,
    });
    const running = implementations.run();
    try {
      const id = h.id('cli');
      const run = await treadle(['run', '--file', customSpec(queue), '--id', id, '--input', '"hello world"']);
      expect(run).toEqual({ code: 0, stdout: `${id}\n`, stderr: '' });
      const result = await h.client.result(id);
      expect(result).toEqual(
        expect.objectContaining({ status: 'completed', artefacts: { summarize: { summary: 'hello' } } }),
      );
    } finally {
      implementations.shutdown();
      await running;
      await connection.close();
    }
  });
});

it("checks specs against the names the CLI's worker registers: the generic kinds' and the examples'", () => {
  const { stages, gates } = bundledRegistry().names();
  expect({ stages: BUILT_IN_IMPLEMENTATIONS.stages, gates: BUILT_IN_IMPLEMENTATIONS.gates }).toEqual({ stages, gates });
  const generic = defaultRegistry().names();
  expect({ stages: GENERIC_IMPLEMENTATIONS.stages, gates: GENERIC_IMPLEMENTATIONS.gates }).toEqual({
    stages: generic.stages,
    gates: generic.gates,
  });
  // The examples' names are exactly what they add: none of them is a generic kind's.
  expect({ stages: EXAMPLE_IMPLEMENTATIONS.stages, gates: EXAMPLE_IMPLEMENTATIONS.gates }).toEqual({
    stages: stages.filter((name) => !generic.stages.includes(name)),
    gates: gates.filter((name) => !generic.gates.includes(name)),
  });
});

it("offers the dev server's own defaults as the dev and demo flags", async () => {
  for (const command of ['dev', 'demo']) {
    const help = await treadle([command, '--help']);
    // Commander pads the flags to the longest and may wrap the home's long path: compare with spaces folded.
    const text = help.stdout.replace(/\s+/g, ' ');
    expect(text).toContain(`--port <port> gRPC port (default: ${DEFAULT_PORT})`);
    expect(text).toContain(`--ui-port <port> Web UI port (default: ${DEFAULT_UI_PORT})`);
    expect(text).toContain(`--inbox-port <port> review inbox port (default: ${INBOX_PORT})`);
    expect(text).toContain('--no-inbox do not start the review inbox');
    expect(text).toContain(`--db <file> SQLite file (default: ${JSON.stringify(devDatabaseFile())})`);
  }
});

it('prints a configuration error as one line, exit 2', async () => {
  const run = await treadle(['status', 'x'], { TREADLE_BLOB_THRESHOLD: 'lots' });
  expect(run).toEqual({
    code: 2,
    stdout: '',
    stderr: 'treadle: TREADLE_BLOB_THRESHOLD must be a whole number of bytes, got "lots"\n',
  });
});
