/**
 * A bad-input campaign against the CLI (built output) and the client, on one harness. Cases: pipeline specs
 * (YAML that does not parse, a list, unknown keys, bad durations, a cycle, unknown implementations),
 * work item inputs (not JSON, not plain JSON, a JSON string where the document pipeline wants an object,
 * 3 MB), command-line usage errors, reviews (unknown stage, stage not waiting, empty reason, edits without an
 * artefact, no such attempt, empty reviewer), signals with garbage payloads, and a stage implementation
 * returning an invalid result. Each gets a specific message; afterwards no workflow on the task queue has a
 * failed workflow task, and the item that waited for review through it all is approved and completes (so
 * nothing is left waiting in the shared namespace).
 * Oversized payloads: a 3 MB input is refused before starting, naming the size and the limit; a 3 MB
 * approve_with_edits artefact goes to the blob store through the client, and inline it is refused.
 */
import { Client, ServiceError } from '@temporalio/client';
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { eventually, startHarness, type Harness } from '../support/harness';
import { isBlobRef, type StageOutput } from '../../src/model/shapes';
import type { WorkItemState } from '../../src/model/state';
import { TreadleError } from '../../src/client';
import { pipeline } from '../../src/kinds/builder';
import { reviewSignal } from '../../src/workflow-kit/messages';
import { bundledRegistry } from '../../src/cli/bundled-examples';
import { runTreadle, type CliRun } from '../support/cli';
import { readPipelineFile } from '../../src/pipelines/catalog';

/** Above Temporal's 2 MB payload limit, below gRPC's 4 MB message limit. */
const THREE_MB = 3 * 1024 * 1024;

let h: Harness;
let dir: string;
/** An item whose stage `s` waits for review the whole campaign long. */
let waiting: string;
const waitingSpec = () =>
  pipeline(`bad-input-${h.taskQueue}`)
    .stage('s', 'scripted')
    .stage('t', 'scripted', { dependsOn: ['s'] })
    .reviewPolicy('s', 'always');

beforeAll(async () => {
  // A stage that breaks its contract: `outcome` must be completed, skipped, awaiting_review or fan_out.
  const registry = bundledRegistry().stage('bogus', async () => ({ outcome: 'bogus' }) as unknown as StageOutput);
  h = await startHarness({ registry });
  dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'bad-input-'));
  waiting = h.id('waiting');
  await h.client.start(waitingSpec(), null, { id: waiting });
  await until(h, waiting, (s) => s.status === 'waiting_review', 'to wait for review');
});

afterAll(async () => {
  // Whatever failed, leave nothing running in the shared namespace: listings in later tests see every item.
  if (h) {
    for await (const e of h.temporal.workflow.list({
      query: `TaskQueue = '${h.taskQueue}' AND ExecutionStatus = 'Running'`,
    })) {
      await h.temporal.workflow
        .getHandle(e.workflowId)
        .terminate('bad-input campaign over')
        .catch(() => undefined);
    }
  }
  await h?.shutdown();
});

const treadle = (args: string[], env: Record<string, string> = {}): Promise<CliRun> =>
  runTreadle(h, args, { TREADLE_REVIEWER: 'campaign', ...env });

const write = (name: string, content: string): string => {
  const file = path.join(dir, name);
  writeFileSync(file, content);
  return file;
};

const until = (on: Harness, id: string, done: (s: WorkItemState) => boolean, what: string) =>
  eventually(
    async () => {
      const state = await on.client.getState(id);
      return done(state) ? state : undefined;
    },
    30_000,
    `${id} ${what}`,
  );

const bigText = (): string => JSON.stringify({ text: 'x'.repeat(THREE_MB) });

/** The activity ran exactly once and failed for good, with this failure type and message. */
async function expectOneNonRetryableFailure(
  id: string,
  activityType: string,
  type: string,
  message: string,
): Promise<void> {
  const events = (await h.temporal.workflow.getHandle(id).fetchHistory()).events!;
  const scheduled = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === activityType);
  expect(scheduled).toHaveLength(1);
  const started = events.filter(
    (e) => e.activityTaskStartedEventAttributes?.scheduledEventId?.toString() === scheduled[0]!.eventId?.toString(),
  );
  expect(started.map((e) => e.activityTaskStartedEventAttributes!.attempt)).toEqual([1]);
  const failed = events.filter(
    (e) => e.activityTaskFailedEventAttributes?.scheduledEventId?.toString() === scheduled[0]!.eventId?.toString(),
  );
  expect(failed).toHaveLength(1);
  const failure = failed[0]!.activityTaskFailedEventAttributes!.failure!;
  expect(failure.message).toBe(message);
  expect(failure.applicationFailureInfo).toEqual(expect.objectContaining({ type, nonRetryable: true }));
}

describe('the CLI', () => {
  /**
   * One row per bad input: the arguments and what stderr must say. `lines` is the exact stderr; `line` is
   * the start of a one-line stderr (for messages that quote a parser). `code` when the rule below does not give it.
   */
  type Case = { name: string; args: string[]; code?: number } & ({ lines: string[] } | { line: string });

  it('refuses every malformed spec, input and review with a specific message, exit 2 for what it was given', async () => {
    const files = {
      unparsable: write('unparsable.yaml', 'name: broken\nstages: [\n  - name: a\n'),
      list: write('list.yaml', '- name: a\n  run: scripted\n'),
      unknownKeys: write(
        'unknown-keys.yaml',
        'name: unknown-keys\nowner: me\nstages:\n  - name: a\n    run: scripted\n    retries: 3\n',
      ),
      durations: write(
        'durations.yaml',
        'name: durations\nstages:\n  - name: a\n    run: scripted\n    retry_budget: { max_attempts: 2, delay: 5 minutes }\n    review_ttl: -1s\n    activity: { heartbeat_timeout: 0 }\n',
      ),
      cycle: write(
        'cycle.yaml',
        'name: cycle\nstages:\n  - { name: a, run: scripted, depends_on: [c] }\n  - { name: b, run: scripted, depends_on: [a] }\n  - { name: c, run: scripted, depends_on: [b] }\n',
      ),
      unknownImpl: write(
        'unknown-impl.yaml',
        'name: unknown-impl\nstages:\n  - name: a\n    run: scriptd\n    gate: nope\n',
      ),
      badJsonSpec: write('spec.json', '{"name": "x", "stages": [}'),
      notJson: write('input.txt', 'title: not json\n'),
      empty: write('empty.json', ''),
    };
    const cases: Case[] = [
      {
        name: 'YAML that does not parse',
        args: ['run', '--file', files.unparsable],
        line: `treadle: ${files.unparsable} is not valid YAML: `,
      },
      {
        name: 'JSON spec that does not parse',
        args: ['run', '--file', files.badJsonSpec],
        line: `treadle: ${files.badJsonSpec} is not valid JSON: `,
      },
      {
        name: 'a spec that is a list',
        args: ['run', '--file', files.list],
        lines: [
          'treadle: pipeline (unnamed) is invalid:',
          '  - pipeline: Invalid input: expected object, received array',
        ],
      },
      {
        name: 'unknown keys',
        args: ['run', '--file', files.unknownKeys],
        lines: [
          'treadle: pipeline unknown-keys is invalid:',
          '  - stages[0] (a).retries: unknown field (did you mean "max_retries"?); the fields here are: name, description, type, run, max_retries, backoff_seconds, backoff_coefficient, with, agent, gate, depends_on, retry_budget, review_policy, review_ttl, on_review_expired, reviewers, review_sla, on_breach, output_schema, activity, task_queue',
          '  - owner: unknown field; the fields here are: name, description, token_budget, max_parallel, stages, contracts, task_queue, priority, fairness_key, fairness_weight, review_sla, on_breach',
        ],
      },
      {
        name: 'bad durations',
        args: ['run', '--file', files.durations],
        lines: [
          'treadle: pipeline durations is invalid:',
          '  - stages[0] (a).retry_budget.delay: "5 minutes" is not a duration (use e.g. 500ms, 30s, 5m, 2h, 1d or 1m30s)',
          '  - stages[0] (a).review_ttl: "-1s" is not a duration (use e.g. 500ms, 30s, 5m, 2h, 1d or 1m30s)',
          '  - stages[0] (a).activity.heartbeat_timeout: must be longer than 0',
        ],
      },
      {
        name: 'a cycle',
        args: ['run', '--file', files.cycle],
        lines: [
          'treadle: pipeline cycle is invalid:',
          '  - dependency cycle: a -> b -> c -> a; remove one of these depends_on',
        ],
      },
      {
        name: 'unknown implementations (validate)',
        args: ['validate', files.unknownImpl],
        lines: [
          `treadle: ${files.unknownImpl} is invalid (2 problems):`,
          `  - ${files.unknownImpl}:4: stage a: unknown stage implementation "scriptd" (did you mean "scripted"?) (registered: approval, build_fts_index, cross_reference, extract_concepts, fan_out, final_review, generate_embeddings, human, llm, loop, pdf_to_markdown, scripted, tdd, triage_dedup, triage_route)`,
          `  - ${files.unknownImpl}:5: stage a: unknown gate implementation "nope" (registered: concept_graph, llm-judge, markdown_quality, scripted)`,
          'Implementations Treadle does not ship run on a queue of their own: name the task_queue their worker polls (on the stage or the contract, or on the pipeline for all of them; docs/stages/code.md#writing-implementations).',
        ],
      },
      {
        name: 'inline input that is not JSON',
        args: ['run', 'review-demo', '--input', 'title: x'],
        line: 'treadle: --input is not valid JSON (Unexpected token',
      },
      {
        // BUG (reported): the parser's message quotes the file's text, newline included, so the "one line" spans two.
        name: 'an input file that is not JSON',
        args: ['run', 'review-demo', '--input', `@${files.notJson}`],
        lines: [
          `treadle: ${files.notJson} is not valid JSON: Unexpected token 'i', "title: not json " is not valid JSON`,
        ],
      },
      {
        name: 'an input file that does not exist',
        args: ['run', 'review-demo', '--input', '@/nonexistent/input.json'],
        lines: ['treadle: cannot read /nonexistent/input.json: ENOENT'],
      },
      {
        name: 'a token budget below 1',
        args: ['run', 'review-demo', '--token-budget', '0'],
        lines: [
          "treadle: option '--token-budget <tokens>' argument '0' is invalid. must be a whole number of tokens above 0 (see treadle --help)",
        ],
      },
      {
        name: 'an unknown option',
        args: ['run', 'review-demo', '--bogus'],
        lines: ["treadle: unknown option '--bogus' (see treadle --help)"],
      },
      {
        name: 'review: unknown item',
        args: ['review', 'no-such-item', 's', '--approve'],
        lines: ['treadle: unknown work item "no-such-item" in namespace default'],
      },
      {
        name: 'review: unknown stage',
        args: ['review', waiting, 'zz', '--approve'],
        lines: [`treadle: review rejected: unknown stage "zz" in work item ${waiting} (stages: s, t)`],
      },
      {
        name: 'review: stage not waiting',
        args: ['review', waiting, 't', '--approve'],
        lines: [
          `treadle: review rejected: stage "t" of work item ${waiting} is not waiting for review (it is pending); waiting: s`,
        ],
      },
      {
        name: 'review: empty reject reason',
        args: ['review', waiting, 's', '--reject', ''],
        lines: ['treadle: review rejected: invalid review: outcome.reason: a rejection needs a reason'],
      },
      {
        name: 'review: edits from an empty file',
        args: ['review', waiting, 's', '--edit', files.empty],
        code: 2,
        lines: [`treadle: ${files.empty} is not valid JSON: Unexpected end of JSON input`],
      },
      {
        name: 'review: no such attempt',
        args: ['review', waiting, 's', '--approve', '--attempt', '2'],
        lines: ['treadle: review rejected: stage "s" has no attempt 2 (attempts: 1-1)'],
      },
      {
        name: 'review: attempt 0',
        args: ['review', waiting, 's', '--approve', '--attempt', '0'],
        lines: [
          "treadle: option '--attempt <n>' argument '0' is invalid. must be a whole number >= 1 (see treadle --help)",
        ],
      },
      {
        name: 'review: --attempt without --approve',
        args: ['review', waiting, 's', '--reject', 'no', '--attempt', '1'],
        code: 2,
        lines: ['treadle: --attempt goes with --approve'],
      },
    ];
    // Run concurrently: each is a separate node process; on two cores this halves the wall time.
    const runs = await Promise.all(cases.map(async (c) => ({ c, run: await treadle(c.args) })));
    const seen = runs.map(({ c, run }) => {
      const lines = run.stderr.replace(/\n$/, '').split('\n');
      let stderr = lines;
      if ('line' in c && lines.length === 1 && lines[0]!.startsWith(c.line)) stderr = [c.line];
      return { name: c.name, code: run.code, stdout: run.stdout, stderr };
    });
    // Exit 2 for what a command was given and cannot use (commander's usage errors, which point at --help, and
    // every spec and input `run` refuses); 1 when it failed: validate's report, a review the item refuses
    // (docs/cli.md "Exit codes").
    const codeOf = (c: Case, lines: string[]): number =>
      c.code ?? (c.args[0] === 'run' || lines.some((l) => l.endsWith('(see treadle --help)')) ? 2 : 1);
    expect(seen).toEqual(
      cases.map((c) => {
        const stderr = 'lines' in c ? c.lines : [c.line];
        return { name: c.name, code: codeOf(c, stderr), stdout: '', stderr };
      }),
    );
    // None of them started anything.
    const started: string[] = [];
    for await (const e of h.temporal.workflow.list({ query: `TaskQueue = '${h.taskQueue}'` }))
      started.push(e.workflowId);
    expect(started).toEqual([waiting]);
  });

  it('a pipeline naming implementations Treadle does not ship is refused before starting; started through the client, the worker lists what it lacks', async () => {
    const file = write(
      'unknown-run.yaml',
      'name: unknown-run\nstages:\n  - name: a\n    run: scriptd\n    gate: nope\n',
    );
    const id = h.id('unknown-impl');
    const refused = await treadle(['run', '--file', file, '--id', id]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /^treadle: pipeline unknown-run is invalid:\n {2}- stage a: unknown stage implementation "scriptd" \(did you mean "scripted"\?\)/,
    );
    expect(refused.stderr).toContain('name the task_queue their worker polls');
    // The client checks no names; the worker's prepare step does, against what it registers.
    await h.client.start(readPipelineFile(file), null, { id });
    const result = await h.client.result(id);
    expect(result.status).toBe('failed');
    expect(result.error).toMatch(
      /^pipeline unknown-run is invalid: stage a: unknown stage implementation "scriptd" \(did you mean "scripted"\?\) \(registered: .*bogus.*\); stage a: unknown gate implementation "nope"/,
    );
  });

  it('a JSON string where the document pipeline expects an object fails its first stage, non-retryably, with a clear message', async () => {
    const id = h.id('documents');
    expect(await treadle(['run', 'documents', '--input', '"just a string"', '--id', id])).toEqual({
      code: 0,
      stdout: `${id}\n`,
      stderr: '',
    });
    const result = await h.client.result(id);
    const message =
      'pdf_to_markdown: work item input must be { title: string, source: string, format?: "text" | "markdown" } ((root): Invalid input: expected object, received string)';
    expect(result).toEqual(
      expect.objectContaining({
        status: 'failed',
        failedStages: ['pdf_to_markdown'],
        error: 'stage failed: pdf_to_markdown',
      }),
    );
    const state = await h.client.getState(id);
    expect(state.stages.pdf_to_markdown).toEqual(expect.objectContaining({ status: 'failed', error: message }));
    expect(state.stages.pdf_to_markdown!.attempts).toEqual([expect.objectContaining({ attempt: 1, error: message })]);
    expect(state.stages.final_review!.status).toBe('skipped');
    await expectOneNonRetryableFailure(id, 'pdf_to_markdown', 'InvalidInput', message);
  });

  it("a 3 MB work item input (over Temporal's 2 MB payload limit) is stored once and travels by reference", async () => {
    const id = h.id('big-input');
    const run = await treadle(['run', 'review-demo', '--input', `@${write('big-input.json', bigText())}`, '--id', id]);
    expect(run).toEqual({ code: 0, stdout: `${id}\n`, stderr: '' });
    const started = (await h.temporal.workflow.getHandle(id).fetchHistory()).events![0]!
      .workflowExecutionStartedEventAttributes!;
    const args = JSON.parse(Buffer.from(started.input!.payloads![0]!.data!).toString()) as { input: unknown };
    expect(isBlobRef(args.input)).toBe(true);
    expect((args.input as { bytes: number }).bytes).toBeGreaterThan(THREE_MB);
    await eventually(
      async () => ((await h.client.getState(id)).status !== 'running' ? true : undefined),
      30_000,
      'the big item to settle',
    );
    expect((await h.temporal.workflow.getHandle(id).describe()).historySize).toBeLessThan(64 * 1024);
    await h.temporal.workflow.getHandle(id).terminate('test over');
  });
});

describe('the client', () => {
  it('refuses specs and inputs that are not plain JSON before starting anything', async () => {
    const id = h.id('client');
    const refused = async (spec: unknown, input: unknown, options: { tokenBudget?: number } = {}) => {
      const error = await h.client.start(spec, input, { id, ...options }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TreadleError);
      return {
        code: (error as TreadleError).code,
        message: (error as TreadleError).message,
        problems: (error as TreadleError).problems,
      };
    };
    expect(await refused([{ name: 'a', run: 'scripted' }], null)).toEqual({
      code: 'invalid_pipeline',
      message: 'pipeline (unnamed) is invalid:\n  - pipeline: Invalid input: expected object, received array',
      problems: ['pipeline: Invalid input: expected object, received array'],
    });
    expect(await refused('name: yaml-text', null)).toEqual(
      expect.objectContaining({ problems: ['pipeline: Invalid input: expected object, received string'] }),
    );
    const good = waitingSpec();
    expect(await refused(good, { f: () => 1 })).toEqual({
      code: 'invalid_input',
      message: 'the work item input must be plain JSON: input.f is function',
      problems: [],
    });
    expect(await refused(good, { n: [1, Number.NaN] })).toEqual(
      expect.objectContaining({ message: 'the work item input must be plain JSON: input.n[1] is NaN' }),
    );
    expect(await refused(good, { b: BigInt(1) })).toEqual(
      expect.objectContaining({ message: 'the work item input must be plain JSON: input.b is bigint' }),
    );
    expect(await refused(good, { m: new Map() })).toEqual(
      expect.objectContaining({
        message: 'the work item input must be plain JSON: input.m is a Map, not a plain object',
      }),
    );
    expect(await refused(good, null, { tokenBudget: 1.5 })).toEqual(
      expect.objectContaining({ message: 'tokenBudget must be a whole number of tokens above 0, got 1.5' }),
    );
    await expect(h.client.getState(id)).rejects.toThrow('unknown work item');
  });

  it('rejects malformed reviews with a specific message and leaves the item waiting', async () => {
    const rejected = (stage: string, outcome: unknown, reviewer?: string) =>
      h.client.review(waiting, stage, outcome as never, reviewer).then(
        () => 'accepted',
        (e: unknown) => `${(e as TreadleError).code}: ${(e as Error).message}`,
      );
    expect(await rejected('zz', { kind: 'approve' })).toBe(
      `invalid_review: review rejected: unknown stage "zz" in work item ${waiting} (stages: s, t)`,
    );
    expect(await rejected('t', { kind: 'approve' })).toBe(
      `invalid_review: review rejected: stage "t" of work item ${waiting} is not waiting for review (it is pending); waiting: s`,
    );
    expect(await rejected('s', { kind: 'reject', reason: '' })).toBe(
      'invalid_review: review rejected: invalid review: outcome.reason: a rejection needs a reason',
    );
    expect(await rejected('s', { kind: 'approve_with_edits' })).toBe(
      'invalid_review: review rejected: invalid review: outcome.artefact: approve_with_edits needs an artefact (the edited output)',
    );
    expect(await rejected('s', { kind: 'approve', attempt: 0 })).toBe(
      'invalid_review: review rejected: invalid review: outcome.attempt: expected a whole number >= 1, got number 0',
    );
    expect(await rejected('s', { kind: 'maybe' })).toMatch(
      /^invalid_review: review rejected: invalid review: outcome\.kind: /,
    );
    expect(await rejected('s', { kind: 'approve', extra: true })).toBe(
      'invalid_review: review rejected: invalid review: outcome: unknown key "extra" for approve',
    );
    expect(await rejected('s', { kind: 'approve' }, '')).toBe(
      'invalid_review: review rejected: invalid review: reviewer: expected a non-empty name, got ""',
    );
    const state = await h.client.getState(waiting);
    expect(state.pendingReviews.map((r) => r.stage)).toEqual(['s']);
    // Rejected updates never enter the history.
    const history = await h.temporal.workflow.getHandle(waiting).fetchHistory();
    expect(history.events!.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toHaveLength(0);
  });

  it('records review signals with garbage payloads as ReviewInputRejected and changes nothing; Temporal refuses a 3 MB signal', async () => {
    const handle = h.temporal.workflow.getHandle(waiting);
    const garbage: unknown[] = [
      'approve',
      null,
      42,
      { stage: 's' },
      { stage: 's', outcome: 'approve' },
      { stage: ['s'], outcome: { kind: 'approve' } },
    ];
    for (const payload of garbage) await handle.signal(reviewSignal, payload as never);
    const state = await until(
      h,
      waiting,
      (s) => s.events.filter((e) => e.type === 'ReviewInputRejected').length === garbage.length,
      'to record every garbage signal',
    );
    const rejected = state.events.filter((e) => e.type === 'ReviewInputRejected');
    expect(rejected.map((e) => e.message)).toEqual([
      'invalid review: review: expected an object, got "approve"',
      'invalid review: review: expected an object, got null',
      'invalid review: review: expected an object, got number 42',
      'invalid review: outcome: expected an object such as {"kind":"approve"}, got nothing',
      'invalid review: outcome: expected an object such as {"kind":"approve"}, got "approve"',
      'invalid review: stage: expected a stage name, got an array',
    ]);
    // Recorded by what was wrong, the outcome kind and the size, never the payload itself.
    expect(rejected.map((e) => e.details)).toEqual(
      garbage.map((g, i) => ({ outcomeKind: i === 5 ? 'approve' : null, payloadBytes: JSON.stringify(g).length })),
    );
    expect(state.status).toBe('waiting_review');
    expect(state.pendingReviews.map((r) => r.stage)).toEqual(['s']);

    // Without Treadle's claim-check, the server's payload limit guards signals: refused before the workflow sees it.
    const plain = new Client({ connection: h.temporal.connection }).workflow.getHandle(waiting);
    const big = await plain
      .signal(reviewSignal, {
        stage: 's',
        outcome: { kind: 'approve_with_edits', artefact: { text: 'x'.repeat(THREE_MB) } },
      })
      .catch((e: unknown) => e);
    expect(big).toBeInstanceOf(ServiceError);
    expect((big as Error).message).toBe('Failed to signal Workflow');
    expect(((big as Error).cause as Error | undefined)?.message).toBe(
      '3 INVALID_ARGUMENT: Blob data size exceeds limit.',
    );
    expect((await h.client.getState(waiting)).pendingReviews.map((r) => r.stage)).toEqual(['s']);
    // Through the claim-check it reaches the workflow, which refuses an inline edit that large, by its size.
    await handle.signal(reviewSignal, {
      stage: 's',
      outcome: { kind: 'approve_with_edits', artefact: { text: 'x'.repeat(THREE_MB) } },
    });
    const after = await until(
      h,
      waiting,
      (s) => s.events.filter((e) => e.type === 'ReviewInputRejected').length === garbage.length + 1,
      'to record the 3 MB signal',
    );
    const last = after.events.filter((e) => e.type === 'ReviewInputRejected').pop()!;
    expect(last.message).toMatch(
      /^the edited artefact is 3072 KB of JSON; edits over 512 KB must be stored in the blob store/,
    );
    expect(last.details!.payloadBytes as number).toBeGreaterThan(THREE_MB);
    expect(JSON.stringify(after).length).toBeLessThan(64 * 1024);
    expect(after.pendingReviews.map((r) => r.stage)).toEqual(['s']);
  });

  it('a stage implementation returning an invalid result fails its stage non-retryably', async () => {
    const id = h.id('bogus');
    await h.client.start(
      pipeline('bogus')
        .stage('b', 'bogus')
        .stage('after', 'scripted', { dependsOn: ['b'] }),
      null,
      { id },
    );
    const result = await h.client.result(id);
    expect(result).toEqual(expect.objectContaining({ status: 'failed', failedStages: ['b'] }));
    const message =
      'stage implementation "bogus" returned an invalid result: outcome: Invalid option: expected one of "completed"|"skipped"|"awaiting_review"|"fan_out"';
    const state = await h.client.getState(id);
    expect(state.stages.b).toEqual(expect.objectContaining({ status: 'failed', error: message }));
    expect(state.stages.after).toEqual(
      expect.objectContaining({ status: 'skipped', error: 'dependency b did not complete' }),
    );
    await expectOneNonRetryableFailure(id, 'bogus', 'InvalidImplementationResult', message);
  });
});

describe('a 3 MB approve_with_edits artefact', () => {
  it('goes to the blob store through the client; downstream stages read it; inline it is refused with the size', async () => {
    const id = h.id('big-edit');
    await h.client.start(
      pipeline('big-edit')
        .stage('s', 'scripted')
        .stage('t', 'scripted', { dependsOn: ['s'] })
        .reviewPolicy('s', 'always'),
      null,
      { id },
    );
    await until(h, id, (s) => s.status === 'waiting_review', 'to wait for review');
    const edited = { text: 'x'.repeat(THREE_MB) };
    // Inline (as a raw update would send it), the validator refuses it and the item keeps waiting.
    await expect(
      h.client.review(id, 's', { kind: 'approve_with_edits', artefact: { text: 'x'.repeat(600 * 1024) } }),
    ).rejects.toThrow(
      'review rejected: the edited artefact is 600 KB of JSON; edits over 512 KB must be stored in the blob store and passed by reference',
    );
    expect((await h.client.getState(id)).pendingReviews.map((r) => r.stage)).toEqual(['s']);
    // Through approveWithEdits it is offloaded and only the reference enters the history.
    await h.client.approveWithEdits(id, 's', edited, { reviewer: 'big' });
    expect((await h.client.result(id)).status).toBe('completed');
    const state = await h.client.getState(id);
    expect(isBlobRef(state.stages.s!.artefact)).toBe(true);
    expect(await h.client.readArtefact(state.stages.s!.artefact)).toEqual(edited);
    const downstream = (await h.client.readArtefact(state.stages.t!.artefact)) as { upstream: { s: { text: string } } };
    expect(downstream.upstream.s.text).toHaveLength(THREE_MB);
    const history = await h.temporal.workflow.getHandle(id).fetchHistory();
    expect(history.events!.some((e) => e.workflowTaskFailedEventAttributes)).toBe(false);
    expect(Buffer.byteLength(JSON.stringify(history))).toBeLessThan(100 * 1024);
  });
});

describe('afterwards', () => {
  it('no workflow on the task queue has a failed workflow task, and the item that waited all along is answered and completes', async () => {
    const ids: string[] = [];
    for await (const e of h.temporal.workflow.list({ query: `TaskQueue = '${h.taskQueue}'` })) ids.push(e.workflowId);
    expect(ids).toContain(waiting);
    const failedTasks = await Promise.all(
      ids.map(async (id) => ({
        id,
        failedTasks: (await h.temporal.workflow.getHandle(id).fetchHistory()).events!.filter(
          (e) => e.workflowTaskFailedEventAttributes,
        ).length,
      })),
    );
    expect(failedTasks).toEqual(ids.map((id) => ({ id, failedTasks: 0 })));

    expect((await h.client.getState(waiting)).pendingReviews.map((r) => r.stage)).toEqual(['s']);
    await h.client.approve(waiting, 's', { reviewer: 'campaign' });
    expect(await h.client.result(waiting)).toEqual(
      expect.objectContaining({ id: waiting, status: 'completed', failedStages: [] }),
    );
    const state = await h.client.getState(waiting);
    expect(state.stages.s!.review).toEqual(expect.objectContaining({ kind: 'approve', reviewer: 'campaign' }));
    expect(state.stages.t!.status).toBe('completed');
  });
});
