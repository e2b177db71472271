/**
 * Validation in one pass (issue 24 §3), through the library and the built CLI (`node bin/treadle.js`).
 * Cases: a valid pipeline with a stage of every kind (llm, fan_out, approval, tdd, loop) and a contract on an
 * edge, into which one fault per layer (schema, graph, kind config, templates and variables, contracts) is
 * injected, every one reported in one run with its file, line, field and fix; the filer's reproductions
 * (two contract problems at once, a missing `items`, two approval stages at once, an unknown action type, a
 * missing escalation ttl, unknown `${VARIABLES}` in a loop's prompt file and output path); `run --file` and
 * `loop` refusing config errors as config errors, before connecting; and
 * `validate --custom-worker <module>` checking against the user's registry.
 *
 * The CLI commands need no server: each fails or succeeds before it would connect (TEMPORAL_ADDRESS points at
 * a closed port, so a command that tried to connect would fail differently and slowly). One case runs on the
 * real server: a loop stage sent through the client with an unknown variable is refused by the worker's check
 * before any loop starts.
 */
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { validatePipeline } from '../../src/kinds/pipeline';
import { checkLoopStageConfig } from '../../src/kinds/loop/spec';
import {
  BUILT_IN_IMPLEMENTATIONS,
  EXAMPLE_IMPLEMENTATIONS,
  GENERIC_IMPLEMENTATIONS,
} from '../../src/pipelines/catalog';
import { bundledActionRegistry } from '../../src/cli/bundled-examples';
import { defaultActionRegistry } from '../../src/worker/registries';
import { runCli, type CliRun } from '../support/cli';
import { startHarness } from '../support/harness';

const ROOT = path.join(__dirname, '..', '..');
const FIXTURES = path.join(__dirname, '..', 'fixtures', 'validate');
const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'validate-'));

/** `treadle <args>` in the test's folder (problems name files relative to it), with no server to reach. */
function treadle(args: string[]): Promise<CliRun> {
  return runCli(args, { cwd: dir, env: { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:1' }, timeoutMs: 60_000 });
}

const write = (name: string, content: string): string => {
  writeFileSync(path.join(dir, name), content);
  return name;
};

/** The valid pipeline of every kind, with `faults` applied (each replacement must find its text). */
function everyKind(faults: [string, string][] = []): string {
  let text = readFileSync(path.join(FIXTURES, 'every-kind.yaml'), 'utf8');
  for (const [from, to] of faults) {
    expect(text).toContain(from);
    text = text.replace(from, to);
  }
  return text;
}

describe('a pipeline with a stage of every kind and a contract', () => {
  it('is valid, for the library and the CLI', async () => {
    const result = validatePipeline(YAML.parse(everyKind()), BUILT_IN_IMPLEMENTATIONS);
    expect(result.ok && result.spec.stages.map((s) => (s.type === 'deterministic' ? s.run : s.type))).toEqual([
      'llm',
      'fan_out',
      'approval',
      'tdd',
      'loop',
    ]);
    expect(result.ok && result.spec.contracts?.length).toBe(1);
    expect(await treadle(['validate', write('every-kind.yaml', everyKind())])).toEqual({
      code: 0,
      stdout: 'every-kind.yaml: pipeline every-kind is valid (5 stages)\n',
      stderr: '',
    });
  });

  /** One fault per layer, spread over the kinds; each line is what validate prints for it: file:line: field: problem; fix. */
  const faults: [string, string][] = [
    // schema
    ['max_attempts: 2', 'max_atempts: 2'],
    // graph
    ['depends_on: [build]', 'depends_on: [biuld]'],
    // kind config: fan_out, approval (two problems in one stage, and a name from the action registry), tdd, loop
    ['max_concurrent: 4', 'max_concurrent: 0'],
    ['action: create_task', 'action: create_tsk'],
    ['on_reject: skip', 'on_reject: maybe'],
    ['{ to: leads, ttl: 4h, default: reject }', '{ to: leads, default: reject }'],
    ['repo: /srv', 'repo: srv'],
    ['type: fixed', 'type: fixd'],
    // templates and variables: the llm prompt, the loop's prompt and output path
    ['{{ input.topic }}', '{{ input.topic '],
    ['Read ${CTX}', 'Read ${CTXT}'],
    ['notes/${SESSION}', 'notes/${UNKNOWN}'],
    // contracts
    ['max_retries: 2', 'max_retries: -1'],
    ['    items: ideas\n    item_id', '    item_id'],
  ];
  const expected = [
    'faulty.yaml:9: stages[0] (draft).retry_budget.max_atempts: unknown field (did you mean "max_attempts"?); the fields here are: max_attempts, delay, attempt_timeout, on_exhausted',
    'faulty.yaml:47: contracts[0].items: required: where the list of items is in from\'s artefact, a dot path such as briefs; "." when the artefact itself is the list',
    'faulty.yaml:52: contracts[0].max_retries: must be 0 or more',
    'faulty.yaml:38: stage refine: depends on unknown stage "biuld" (did you mean "build"?)',
    'faulty.yaml:21: stage approve: with.action: unknown action type "create_tsk" (did you mean "create_task"?) (registered: add_busy_block, batch_create_tasks, create_task, modify_task, send_message)',
    'faulty.yaml:8: stage draft: with.prompt: the prompt template does not parse: output "{{ input.topic as JSON" not closed, line:1, col:18',
    'faulty.yaml:16: stage classify: with.max_concurrent: must be at least 1',
    'faulty.yaml:23: stage approve: with.on_reject: must be one of skip, stop (got "maybe")',
    'faulty.yaml:24: stage approve: with.escalation.ttl: required: how long the escalated request waits before its default applies, e.g. 4h',
    'faulty.yaml:29: stage build: with.repo: must be an absolute path on the workers',
    'faulty.yaml:43: stage refine: with.stage.termination.type: must be one of judgment, queue, fixed (got "fixd"; did you mean "fixed"?)',
    'faulty.yaml:42: stage refine: with.stage.prompt: unknown variable ${CTXT} (did you mean ${CTX}?); the agent would receive it as literal text',
    'faulty.yaml:45: stage refine: with.output: unknown variable ${UNKNOWN} (the variables here are ${SESSION}); it would become part of the file name',
  ];

  it('with one fault per layer injected, the library reports every one, each with where it is', () => {
    const result = validatePipeline(YAML.parse(everyKind(faults)), BUILT_IN_IMPLEMENTATIONS);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems).toEqual(expected.map((line) => line.replace(/^faulty\.yaml:\d+: /, '')));
    expect(result.found.map((p) => p.layer)).toEqual([
      'schema',
      'schema',
      'schema',
      'graph',
      'registry',
      ...Array<string>(8).fill('config'),
    ]);
    expect(result.found[0]!.at).toEqual(['stages', 0, 'retryBudget', 'maxAtempts']);
    expect(result.found[7]!.at).toEqual(['stages', 2, 'with', 'on_reject']);
  });

  it('with one fault per layer injected, `treadle validate` lists every one with its file and line, in one run', async () => {
    const run = await treadle(['validate', write('faulty.yaml', everyKind(faults))]);
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: `treadle: faulty.yaml is invalid (${expected.length} problems):\n${expected.map((l) => `  - ${l}`).join('\n')}\n`,
    });
  });
});

describe("the filer's reproductions", () => {
  it('contracts: max_retries -1 in one and a `to:` naming no stage in another are reported together; a missing items is required', () => {
    const spec = {
      name: 'c',
      stages: [
        { name: 'scout', run: 'scripted' },
        { name: 'bb', run: 'scripted', depends_on: ['scout'] },
      ],
      contracts: [
        {
          from: 'scout',
          to: 'bb',
          items: 'list',
          item_id: 'id',
          validate: 'scripted_judge',
          revise: { run: 'llm', with: { criteria: 'x' } },
          max_retries: -1,
        },
        {
          from: 'scout',
          to: 'cc',
          item_id: 'id',
          validate: { run: 'llm', with: { criteria: 'x' } },
          revise: { run: 'llm', with: { criteria: 'x' } },
        },
      ],
    };
    const result = validatePipeline(spec, BUILT_IN_IMPLEMENTATIONS);
    expect(!result.ok && result.problems).toEqual([
      'contracts[0].max_retries: must be 0 or more',
      'contracts[1].items: required: where the list of items is in from\'s artefact, a dot path such as briefs; "." when the artefact itself is the list',
      'contracts[0] (scout → bb): validate: unknown validator "scripted_judge" (registered: llm)',
      'contracts[1] (scout → cc): to: no stage named "cc"; did you mean "bb"?',
    ]);
    // "." says so explicitly: the producer's artefact itself is the list.
    const whole = { ...spec, contracts: [{ ...spec.contracts[1]!, to: 'bb', items: '.' }] };
    expect(validatePipeline(whole, BUILT_IN_IMPLEMENTATIONS)).toEqual(expect.objectContaining({ ok: true }));
  });

  it('approvals: a stage whose type and run disagree, and another with a bad on_reject, an unknown action and an escalation without ttl', () => {
    const spec = {
      name: 'a',
      stages: [
        { name: 'a', type: 'approval', run: 'scripted' },
        {
          name: 'b',
          type: 'approval',
          with: { on_reject: 'maybe', action: 'create_tsk', ttl: '1h', escalation: { to: 'leads', default: 'reject' } },
        },
      ],
    };
    expect((validatePipeline(spec, BUILT_IN_IMPLEMENTATIONS) as { problems: string[] }).problems).toEqual([
      'stages[0] (a).type: type approval runs "approval", not "scripted"; drop run: or the type',
      'stage b: with.action: unknown action type "create_tsk" (did you mean "create_task"?) (registered: add_busy_block, batch_create_tasks, create_task, modify_task, send_message)',
      'stage b: with.on_reject: must be one of skip, stop (got "maybe")',
      'stage b: with.escalation.ttl: required: how long the escalated request waits before its default applies, e.g. 4h',
    ]);
  });

  it("the CLI knows the action types its worker registers: none generic, the examples' five", () => {
    const bundled = bundledActionRegistry({ tasksFile: path.join(dir, 'tasks.json') }).names();
    expect(BUILT_IN_IMPLEMENTATIONS.actions).toEqual(bundled);
    expect(GENERIC_IMPLEMENTATIONS.actions).toEqual(defaultActionRegistry().names());
    expect(EXAMPLE_IMPLEMENTATIONS.actions).toEqual(bundled.filter((name) => !defaultActionRegistry().has(name)));
  });

  it('loops: unknown variables in a prompt file and an output path are listed by file and line; `treadle loop` refuses to start', async () => {
    const loops = path.join(dir, 'ideation');
    cpSync(path.join(ROOT, 'examples', 'loops', 'full-ideation'), loops, { recursive: true });
    const stageFile = path.join(loops, 'stages', 'refiner', 'stage.yaml');
    writeFileSync(
      stageFile,
      readFileSync(stageFile, 'utf8').replace('output: docs/plan-${SESSION}.md', 'output: notes/${UNKNOWN}.md'),
    );
    const promptFile = path.join(loops, 'stages', 'refiner', 'prompt.md');
    const prompt = readFileSync(promptFile, 'utf8').split('\n');
    prompt[2] = `${prompt[2]} Then read \${UNKNOWN}.`;
    writeFileSync(promptFile, prompt.join('\n'));
    const problems = [
      'treadle: the loop pipeline has 2 problems:',
      '  - ideation/stages/refiner/stage.yaml:9: output: unknown variable ${UNKNOWN} (the variables here are ${SESSION}); it would become part of the file name',
      '  - ideation/stages/refiner/prompt.md:3: unknown variable ${UNKNOWN} (the variables here are ${CTX}, ${PROGRESS}, ${OUTPUT}, ${STATUS}, ${SESSION}, ${ITERATION}); the agent would receive it as literal text',
      '',
    ].join('\n');
    expect(await treadle(['validate', 'ideation/pipeline.yaml'])).toEqual({ code: 1, stdout: '', stderr: problems });
    // Refused before connecting: no item starts (the address is a closed port).
    expect(await treadle(['loop', 'ideation/pipeline.yaml', '--session', 'x'])).toEqual({
      code: 2,
      stdout: '',
      stderr: problems,
    });
  });

  it('loops: the worker refuses a loop stage sent through the client with an unknown variable, before any loop starts', async () => {
    const h = await startHarness();
    try {
      const id = h.id('unknown-variable');
      const stage = { name: 'r', prompt: 'Read ${CTX}, then ${UNKNOWN}', termination: { type: 'fixed' } };
      await h.client.start(
        { name: 'loop-variable', stages: [{ name: 'r', run: 'loop', with: { stage, max_iterations: 1 } }] },
        null,
        { id },
      );
      const result = await h.client.result(id);
      expect(result.status).toBe('failed');
      expect(result.error).toContain(
        'stage r: with.stage.prompt: unknown variable ${UNKNOWN} (the variables here are ${CTX},',
      );
      expect(await h.client.loops(id)).toEqual([]);
    } finally {
      await h.shutdown();
    }
  });

  it('loops: a stage sent inline (the worker checks it before the loop starts) has its unknown variables refused too', () => {
    const stage = {
      name: 'r',
      prompt: 'Read ${CTX}\nthen ${UNKNOWN}',
      termination: { type: 'fixed' },
      verify: ['lint ${OUTPUT} ${ITERATION}'],
    };
    expect(checkLoopStageConfig({ stage, output: 'notes/${SESION}.md' })).toEqual([
      'stage.prompt: line 2: unknown variable ${UNKNOWN} (the variables here are ${CTX}, ${PROGRESS}, ${OUTPUT}, ${STATUS}, ${SESSION}, ${ITERATION}); the agent would receive it as literal text',
      'output: unknown variable ${SESION} (did you mean ${SESSION}?); it would become part of the file name',
      'stage.verify.0: unknown variable ${ITERATION} (the variables here are ${SESSION}, ${OUTPUT}, ${PROGRESS}, ${STATUS}, ${CTX}); the command would receive it as literal text',
    ]);
  });
});

describe('run --file', () => {
  const badApproval =
    'name: bad-approval\nstages:\n  - { name: a, run: scripted }\n  - { name: b, type: approval, depends_on: [a], with: { on_reject: maybe } }\n';
  const expected =
    'treadle: pipeline bad-approval is invalid:\n  - stage b: with.on_reject: must be one of skip, stop (got "maybe")\n';

  it('reports a config error as a config error and starts nothing (exit 2: the pipeline given cannot run)', async () => {
    const file = write('bad-approval.yaml', badApproval);
    expect(await treadle(['run', '--file', file])).toEqual({ code: 2, stdout: '', stderr: expected });
  });

  it('with a config error and a name Treadle does not ship, lists both as invalid and names the missing task_queue', async () => {
    const file = write('bad-both.yaml', badApproval.replace('run: scripted', 'run: enrich'));
    const both =
      'treadle: pipeline bad-approval is invalid:\n  - stage a: unknown stage implementation "enrich" (registered: approval, build_fts_index, cross_reference, extract_concepts, fan_out, final_review, generate_embeddings, human, llm, loop, pdf_to_markdown, scripted, tdd, triage_dedup, triage_route)\n  - stage b: with.on_reject: must be one of skip, stop (got "maybe")\n' +
      'Implementations Treadle does not ship run on a queue of their own: name the task_queue their worker polls (on the stage or the contract, or on the pipeline for all of them; docs/stages/code.md#writing-implementations).\n';
    expect(await treadle(['run', '--file', file])).toEqual({ code: 2, stdout: '', stderr: both });
  });
});

describe('validate --custom-worker <module>', () => {
  const spec = (stage: string, validator: string) =>
    write(
      `custom-${stage}-${validator}.yaml`,
      `name: custom\nstages:\n  - { name: a, run: ${stage} }\n  - { name: b, run: scripted, depends_on: [a] }\ncontracts:\n  - { from: a, to: b, items: ideas, item_id: id, validate: ${validator}, revise: { run: llm, with: { criteria: x } } }\n`,
    );
  const module = path.join(FIXTURES, 'custom-worker.js');

  it("validates a pipeline naming the worker's own implementations and validators against its registry", async () => {
    const file = spec('enrich', 'schema_check');
    expect(await treadle(['validate', file, '--custom-worker', module])).toEqual({
      code: 0,
      stdout: `${file}: pipeline custom is valid (2 stages)\n`,
      stderr: '',
    });
    const builtIn = await treadle(['validate', file]);
    expect(builtIn.code).toBe(1);
    expect(builtIn.stderr).toContain(
      `${file}:3: stage a: unknown stage implementation "enrich" (registered: approval,`,
    );
    expect(builtIn.stderr).toContain(
      `${file}:6: contracts[0] (a → b): validate: unknown validator "schema_check" (registered: llm)`,
    );
  });

  it('still lists names the registry lacks, with a did-you-mean from it', async () => {
    const run = await treadle(['validate', spec('enrch', 'schema_chek'), '--custom-worker', module]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      'stage a: unknown stage implementation "enrch" (did you mean "enrich"?) (registered: approval, build_fts_index, cross_reference, enrich,',
    );
    expect(run.stderr).toContain(
      'validate: unknown validator "schema_chek" (did you mean "schema_check"?) (registered: llm, schema_check)',
    );
  });

  it('says what is wrong with a module that exports no registry', async () => {
    const empty = write('empty-module.js', 'exports.nothing = 1;\n');
    expect(await treadle(['validate', spec('enrich', 'llm'), '--custom-worker', empty])).toEqual({
      code: 2,
      stdout: '',
      stderr:
        "treadle: --custom-worker: empty-module.js exports no Registry: export your worker's registry as `registry` (module.exports = { registry })\n",
    });
  });
});
