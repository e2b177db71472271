/**
 * kinds/loop/spec.ts against seed 004's files ("Complete Schema (v3)"), without Temporal. Cases:
 * - stage.yaml: the seed's example (its YAML text, comments and all) parses; each kind of mistake is an issue
 *   at the field that is wrong;
 * - pipeline.yaml: the seed's full-ideation example parses, `inputs.select` defaulting to `latest`;
 * - status.json: the seed's example parses, wrong or missing fields are rejected, extra fields are kept;
 * - a `run: loop` stage's `with:` (checkLoopStageConfig): outputs stay in the workspace;
 * - the folder names (iterations/NNN, stage-NN-id) and the CLI's messages (describeFileIssue).
 */
import { parse } from 'yaml';
import type { z } from 'zod';
import {
  checkLoopStageConfig,
  describeFileIssue,
  isInternalOutput,
  iterationDir,
  LoopPipelineFileSchema,
  LoopStageConfigSchema,
  MAX_LOOP_ITERATIONS,
  outputProblems,
  stageDirName,
  StageFileSchema,
  StatusFileSchema,
  TerminationSchema,
} from '../../src/kinds/loop/spec';

// ---------------------------------------------------------------------------------------------------------
// The seed's examples, verbatim

/** Seed 004, "stage.yaml". */
const SEED_STAGE_YAML = `
# Identity
name: improve-plan
description: Iteratively improve a plan document
tags: [refinement, planning]    # Metadata only, doesn't affect execution

# Prompt
prompt: prompt.md               # Template file

# Termination
termination:
  type: judgment                # judgment | queue | fixed
  min_iterations: 2             # Start checking after this many
  consensus: 2                  # Consecutive "stop" decisions needed

# Output
output: docs/plan-\${SESSION}.md # Where primary artifact goes
                                # Or: .claude (internal, default)

# Guardrails (safety limits for runaway sessions)
guardrails:
  max_iterations: 50            # Hard stop, default 100
  max_runtime_seconds: 7200     # 2 hour timeout, default 7200
  # No failure counters - fail fast, resume smart

# Optional
verify: []                      # Commands to run after each iteration
delay: 3                        # Seconds between iterations
model: opus                     # Override model for this stage
`;

/** Seed 004, "pipeline.yaml". */
const SEED_PIPELINE_YAML = `
name: full-ideation
description: Generate ideas, synthesize, refine

# Pipeline-level guardrails
guardrails:
  max_runtime_seconds: 14400    # 4 hours total

stages:
  # Stage 1: Generate ideas (fixed iterations)
  - id: ideas
    template: idea-generator
    max_iterations: 5
    # inputs: not needed for first stage

  # Stage 2: Synthesize all ideas into one document
  - id: synthesize
    template: synthesizer
    max_iterations: 1
    inputs:
      from: ideas
      select: all               # Get all idea files
    output: docs/plan-\${SESSION}.md

  # Stage 3: Refine until consensus
  - id: refine
    template: refiner
    max_iterations: 10
    inputs:
      from: synthesize
      select: latest            # Only need the latest version
    output: docs/plan-\${SESSION}.md
    verify:
      - markdownlint \${OUTPUT}
`;

/** Seed 004, "status.json (Agent-Written)". */
const SEED_STATUS = {
  decision: 'continue',
  reason: 'Improved clarity in section 3, but section 5 still needs work',
  summary:
    'Rewrote the authentication flow section. Added sequence diagram. Fixed terminology inconsistencies. Section 5 (error handling) is still vague.',
  work: {
    items_completed: [],
    files_touched: ['docs/plan-auth.md'],
  },
  verify: {
    ran: true,
    passed: true,
  },
  errors: [],
};

/** The seed's stage.yaml as an object (what the YAML above must parse to). */
function seedStage(): Record<string, unknown> {
  return {
    name: 'improve-plan',
    description: 'Iteratively improve a plan document',
    tags: ['refinement', 'planning'],
    prompt: 'prompt.md',
    termination: { type: 'judgment', min_iterations: 2, consensus: 2 },
    output: 'docs/plan-${SESSION}.md',
    guardrails: { max_iterations: 50, max_runtime_seconds: 7200 },
    verify: [],
    delay: 3,
    model: 'opus',
  };
}

/** The smallest valid stage. */
function minimalStage(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { name: 'refiner', prompt: 'prompt.md', termination: { type: 'judgment' }, ...overrides };
}

/** The issues of a failed parse, as path + code, in order. */
function issuesOf(result: { success: boolean; error?: z.ZodError }): { path: string; code: string }[] {
  if (result.success) throw new Error('expected the parse to fail');
  return result.error!.issues.map((i) => ({ path: i.path.join('.'), code: i.code }));
}

/** The first issue of a parse that must fail. */
function firstIssue(result: { success: boolean; error?: z.ZodError }): z.core.$ZodIssue {
  if (result.success) throw new Error('expected the parse to fail');
  return result.error!.issues[0]!;
}

// ---------------------------------------------------------------------------------------------------------
// stage.yaml

describe('stage.yaml (StageFileSchema)', () => {
  test("the seed's stage.yaml parses as written", () => {
    const raw: unknown = parse(SEED_STAGE_YAML);
    expect(raw).toEqual(seedStage());
    const parsed = StageFileSchema.safeParse(raw);
    expect(parsed.success).toBe(true);
    expect(parsed.data).toEqual(seedStage());
  });

  test('name, prompt and termination make a stage; everything else is optional', () => {
    expect(StageFileSchema.parse(minimalStage())).toEqual(minimalStage());
    expect(issuesOf(StageFileSchema.safeParse({ name: 'refiner' }))).toEqual([
      { path: 'prompt', code: 'invalid_type' },
      { path: 'termination', code: 'invalid_type' },
    ]);
  });

  test('each termination type of the seed parses, and a queue names its provider', () => {
    expect(StageFileSchema.safeParse(minimalStage({ termination: { type: 'fixed' } })).success).toBe(true);
    expect(StageFileSchema.safeParse(minimalStage({ termination: { type: 'queue' } })).success).toBe(true);
    expect(
      StageFileSchema.safeParse(
        minimalStage({ termination: { type: 'queue', queue: { provider: 'command', command: 'bd ready --count' } } }),
      ).success,
    ).toBe(true);
    expect(
      StageFileSchema.safeParse(minimalStage({ termination: { type: 'queue', queue: { provider: 'signal' } } }))
        .success,
    ).toBe(true);
    expect(issuesOf(TerminationSchema.safeParse({ type: 'queue', queue: { provider: 'beads' } }))).toEqual([
      { path: 'queue.provider', code: 'invalid_union' },
    ]);
  });

  test('a misspelled termination.type is an issue at termination.type listing the types', () => {
    const result = StageFileSchema.safeParse(minimalStage({ termination: { type: 'judgement' } }));
    expect(issuesOf(result)).toEqual([{ path: 'termination.type', code: 'invalid_value' }]);
    expect(firstIssue(result)).toMatchObject({ values: ['judgment', 'queue', 'fixed'] });
  });

  test('consensus with type fixed is an issue at termination.consensus', () => {
    const result = StageFileSchema.safeParse(minimalStage({ termination: { type: 'fixed', consensus: 2 } }));
    expect(issuesOf(result)).toEqual([{ path: 'termination.consensus', code: 'custom' }]);
    expect(firstIssue(result).message).toBe(
      'only judgment termination counts decisions; remove it or use type: judgment',
    );
  });

  test('min_iterations with type queue is an issue at termination.min_iterations', () => {
    expect(
      issuesOf(StageFileSchema.safeParse(minimalStage({ termination: { type: 'queue', min_iterations: 2 } }))),
    ).toEqual([{ path: 'termination.min_iterations', code: 'custom' }]);
  });

  test('a queue with type judgment is an issue at termination.queue', () => {
    const result = StageFileSchema.safeParse(
      minimalStage({ termination: { type: 'judgment', queue: { provider: 'signal' } } }),
    );
    expect(issuesOf(result)).toEqual([{ path: 'termination.queue', code: 'custom' }]);
    expect(firstIssue(result).message).toBe('only queue termination has a queue; remove it or use type: queue');
  });

  test('an unknown field is an issue naming the field, at the top or inside termination', () => {
    const top = StageFileSchema.safeParse(minimalStage({ consensus_field: 'plateau' }));
    expect(issuesOf(top)).toEqual([{ path: '', code: 'unrecognized_keys' }]);
    expect(firstIssue(top)).toMatchObject({ keys: ['consensus_field'] });
    const nested = StageFileSchema.safeParse(minimalStage({ termination: { type: 'judgment', consenus: 2 } }));
    expect(issuesOf(nested)).toEqual([{ path: 'termination', code: 'unrecognized_keys' }]);
    expect(firstIssue(nested)).toMatchObject({ keys: ['consenus'] });
    // v2's output mode is gone in v3 (seed: "Change 3").
    expect(issuesOf(StageFileSchema.safeParse(minimalStage({ output: { mode: 'single' } })))).toEqual([
      { path: 'output', code: 'invalid_type' },
    ]);
  });

  test('max_iterations 0 is an issue at guardrails.max_iterations, and so is one beyond the limit', () => {
    expect(issuesOf(StageFileSchema.safeParse(minimalStage({ guardrails: { max_iterations: 0 } })))).toEqual([
      { path: 'guardrails.max_iterations', code: 'too_small' },
    ]);
    expect(
      issuesOf(StageFileSchema.safeParse(minimalStage({ guardrails: { max_iterations: MAX_LOOP_ITERATIONS + 1 } }))),
    ).toEqual([{ path: 'guardrails.max_iterations', code: 'too_big' }]);
    expect(issuesOf(StageFileSchema.safeParse(minimalStage({ guardrails: { max_iterations: 2.5 } })))).toEqual([
      { path: 'guardrails.max_iterations', code: 'invalid_type' },
    ]);
    expect(
      StageFileSchema.safeParse(minimalStage({ guardrails: { max_iterations: MAX_LOOP_ITERATIONS } })).success,
    ).toBe(true);
  });

  test('min_iterations and consensus must be whole numbers from 1', () => {
    expect(
      issuesOf(StageFileSchema.safeParse(minimalStage({ termination: { type: 'judgment', consensus: 0 } }))),
    ).toEqual([{ path: 'termination.consensus', code: 'too_small' }]);
    expect(
      issuesOf(StageFileSchema.safeParse(minimalStage({ termination: { type: 'judgment', min_iterations: -1 } }))),
    ).toEqual([{ path: 'termination.min_iterations', code: 'too_small' }]);
  });
});

// ---------------------------------------------------------------------------------------------------------
// pipeline.yaml

describe('pipeline.yaml (LoopPipelineFileSchema)', () => {
  test("the seed's full-ideation pipeline parses as written, three stages in order", () => {
    const parsed = LoopPipelineFileSchema.parse(parse(SEED_PIPELINE_YAML));
    expect(parsed).toEqual({
      name: 'full-ideation',
      description: 'Generate ideas, synthesize, refine',
      guardrails: { max_runtime_seconds: 14400 },
      stages: [
        { id: 'ideas', template: 'idea-generator', max_iterations: 5 },
        {
          id: 'synthesize',
          template: 'synthesizer',
          max_iterations: 1,
          inputs: { from: 'ideas', select: 'all' },
          output: 'docs/plan-${SESSION}.md',
        },
        {
          id: 'refine',
          template: 'refiner',
          max_iterations: 10,
          inputs: { from: 'synthesize', select: 'latest' },
          output: 'docs/plan-${SESSION}.md',
          verify: ['markdownlint ${OUTPUT}'],
        },
      ],
    });
  });

  test("inputs.select defaults to 'latest'", () => {
    const parsed = LoopPipelineFileSchema.parse({
      name: 'full-ideation',
      stages: [
        { id: 'ideas', template: 'idea-generator', max_iterations: 5 },
        { id: 'refine', template: 'refiner', inputs: { from: 'ideas' } },
      ],
    });
    expect(parsed.stages[1]!.inputs).toEqual({ from: 'ideas', select: 'latest' });
    expect(parsed.stages[0]!.inputs).toBeUndefined();
  });

  test('inputs.select is latest or all, nothing else', () => {
    const result = LoopPipelineFileSchema.safeParse({
      name: 'p',
      stages: [{ id: 'refine', template: 'refiner', inputs: { from: 'ideas', select: 'first' } }],
    });
    expect(issuesOf(result)).toEqual([{ path: 'stages.0.inputs.select', code: 'invalid_value' }]);
  });

  test('a pipeline needs at least one stage', () => {
    const result = LoopPipelineFileSchema.safeParse({ name: 'p', stages: [] });
    expect(issuesOf(result)).toEqual([{ path: 'stages', code: 'too_small' }]);
    expect(firstIssue(result).message).toBe('a pipeline needs at least one stage');
  });

  test('a stage entry with an unknown field or a bad id is an issue at that stage', () => {
    expect(
      issuesOf(
        LoopPipelineFileSchema.safeParse({
          name: 'p',
          stages: [{ id: 'ideas', template: 'idea-generator', max_iteration: 5 }],
        }),
      ),
    ).toEqual([{ path: 'stages.0', code: 'unrecognized_keys' }]);
    expect(
      issuesOf(
        LoopPipelineFileSchema.safeParse({ name: 'p', stages: [{ id: '../ideas', template: 'idea-generator' }] }),
      ),
    ).toEqual([{ path: 'stages.0.id', code: 'invalid_format' }]);
  });
});

// ---------------------------------------------------------------------------------------------------------
// status.json

describe('status.json (StatusFileSchema)', () => {
  test("the seed's status.json example parses unchanged", () => {
    expect(StatusFileSchema.parse(SEED_STATUS)).toEqual(SEED_STATUS);
  });

  test('decision, reason and summary are all it needs; errors defaults to none', () => {
    expect(
      StatusFileSchema.parse({ decision: 'stop', reason: 'plan is complete', summary: 'Nothing left to improve.' }),
    ).toEqual({ decision: 'stop', reason: 'plan is complete', summary: 'Nothing left to improve.', errors: [] });
    expect(StatusFileSchema.parse({ ...SEED_STATUS, work: {} }).work).toEqual({
      items_completed: [],
      files_touched: [],
    });
  });

  test("decision 'done' is rejected at decision", () => {
    const result = StatusFileSchema.safeParse({ ...SEED_STATUS, decision: 'done' });
    expect(issuesOf(result)).toEqual([{ path: 'decision', code: 'invalid_value' }]);
    expect(firstIssue(result)).toMatchObject({ values: ['continue', 'stop', 'error'] });
  });

  test('a missing reason is rejected at reason', () => {
    const { reason: _reason, ...noReason } = SEED_STATUS;
    expect(issuesOf(StatusFileSchema.safeParse(noReason))).toEqual([{ path: 'reason', code: 'invalid_type' }]);
  });

  test('files_touched must be a list of paths', () => {
    expect(
      issuesOf(StatusFileSchema.safeParse({ ...SEED_STATUS, work: { files_touched: 'docs/plan-auth.md' } })),
    ).toEqual([{ path: 'work.files_touched', code: 'invalid_type' }]);
  });

  test('extra fields are kept, at the top and inside work and verify', () => {
    const withExtras = {
      ...SEED_STATUS,
      confidence: 0.8,
      work: { ...SEED_STATUS.work, tests_added: 3 },
      verify: { ...SEED_STATUS.verify, log: 'verify.log' },
    };
    expect(StatusFileSchema.parse(withExtras)).toEqual(withExtras);
  });
});

// ---------------------------------------------------------------------------------------------------------
// A loop stage's with:

describe('checkLoopStageConfig', () => {
  test('a stage writing inside the workspace has no problems', () => {
    expect(checkLoopStageConfig({ stage: seedStage() })).toEqual([]);
    expect(
      checkLoopStageConfig({
        stage: seedStage(),
        output: 'docs/plans/auth.md',
        max_iterations: 10,
        inputs: { from: 'synthesize' },
      }),
    ).toEqual([]);
  });

  test('an absolute output is a problem, in the stage or in the override', () => {
    expect(checkLoopStageConfig({ stage: { ...seedStage(), output: '/etc/plan.md' } })).toEqual([
      'stage.output: "/etc/plan.md" is absolute; give a path relative to the workspace',
    ]);
    expect(checkLoopStageConfig({ stage: seedStage(), output: 'C:\\plans\\auth.md' })).toEqual([
      'output: "C:\\plans\\auth.md" is absolute; give a path relative to the workspace',
    ]);
  });

  test('an output with .. is a problem', () => {
    expect(checkLoopStageConfig({ stage: seedStage(), output: '../elsewhere/plan.md' })).toEqual([
      'output: "../elsewhere/plan.md" leads out of the workspace ("..")',
    ]);
    expect(checkLoopStageConfig({ stage: { ...seedStage(), output: 'docs/../../plan.md' } })).toEqual([
      'stage.output: "docs/../../plan.md" leads out of the workspace ("..")',
    ]);
    // Two dots inside a name are not a way out.
    expect(checkLoopStageConfig({ stage: seedStage(), output: 'docs/plan..md' })).toEqual([]);
  });

  test('both outputs wrong: both are listed', () => {
    expect(checkLoopStageConfig({ stage: { ...seedStage(), output: '/tmp/plan.md' }, output: '../plan.md' })).toEqual([
      'stage.output: "/tmp/plan.md" is absolute; give a path relative to the workspace',
      'output: "../plan.md" leads out of the workspace ("..")',
    ]);
  });

  test('.claude and .treadle mean the internal output and have no problems', () => {
    expect(checkLoopStageConfig({ stage: { ...seedStage(), output: '.claude' } })).toEqual([]);
    expect(checkLoopStageConfig({ stage: seedStage(), output: '.treadle' })).toEqual([]);
    expect(isInternalOutput('.claude')).toBe(true);
    expect(isInternalOutput('.treadle')).toBe(true);
    expect(isInternalOutput(undefined)).toBe(true);
    expect(isInternalOutput('docs/plan.md')).toBe(false);
    expect(outputProblems('.claude', 'output')).toEqual([]);
  });

  test('a with: that does not parse lists its problems by field', () => {
    expect(checkLoopStageConfig(undefined)).toEqual([expect.stringMatching(/^stage: /)]);
    expect(checkLoopStageConfig({ stage: minimalStage({ termination: { type: 'judgement' } }) })).toEqual([
      'stage.termination.type: must be one of judgment, queue, fixed (got "judgement"; did you mean "judgment"?)',
    ]);
    expect(checkLoopStageConfig({ stage: minimalStage(), max_iteration: 5 })).toEqual([
      'max_iteration: unknown field (did you mean "max_iterations"?); the fields here are: template, stage, max_iterations, inputs, output, verify, session, index, pipeline_max_runtime_seconds, iterations_per_run',
    ]);
    expect(LoopStageConfigSchema.safeParse({ stage: minimalStage(), index: 100 }).success).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Folder names

describe('folder names', () => {
  test("iterationDir is the seed's iterations/NNN", () => {
    expect(iterationDir(3)).toBe('iterations/003');
    expect(iterationDir(1)).toBe('iterations/001');
    expect(iterationDir(120)).toBe('iterations/120');
  });

  test("stageDirName is the seed's stage-NN-<id>", () => {
    expect(stageDirName(2, 'refine')).toBe('stage-02-refine');
    expect(stageDirName(0, 'init')).toBe('stage-00-init');
    expect(stageDirName(12, 'ideas')).toBe('stage-12-ideas');
  });
});

// ---------------------------------------------------------------------------------------------------------
// The CLI's messages

describe('describeFileIssue', () => {
  const STAGE_FIELDS = Object.keys(StageFileSchema.shape);

  test('a misspelled enum value gets the allowed values and a did-you-mean', () => {
    const issue = firstIssue(StageFileSchema.safeParse(minimalStage({ termination: { type: 'judgement' } })));
    expect(describeFileIssue('stage.yaml', issue, STAGE_FIELDS, 'judgement')).toBe(
      'stage.yaml: termination.type: must be one of judgment, queue, fixed (got "judgement"; did you mean "judgment"?)',
    );
  });

  test('an enum value close to none gets the allowed values and what it got, no guess', () => {
    const issue = firstIssue(StageFileSchema.safeParse(minimalStage({ termination: { type: 'forever' } })));
    expect(describeFileIssue('stage.yaml', issue, STAGE_FIELDS, 'forever')).toBe(
      'stage.yaml: termination.type: must be one of judgment, queue, fixed (got "forever")',
    );
  });

  test('a misspelled status decision gets a did-you-mean too', () => {
    const issue = firstIssue(StatusFileSchema.safeParse({ ...SEED_STATUS, decision: 'stpo' }));
    expect(describeFileIssue('status.json', issue, [], 'stpo')).toBe(
      'status.json: decision: must be one of continue, stop, error (got "stpo"; did you mean "stop"?)',
    );
  });

  test('an unknown key at the top gets a did-you-mean and the fields there are', () => {
    const issue = firstIssue(
      StageFileSchema.safeParse(minimalStage({ descripton: 'Iteratively improve a plan document' })),
    );
    expect(describeFileIssue('stage.yaml', issue, STAGE_FIELDS, undefined)).toBe(
      'stage.yaml: descripton: unknown field (did you mean "description"?); the fields are: name, description, tags, prompt, termination, output, guardrails, verify, delay, model, agent',
    );
  });

  test('an unknown key inside an object is named with its path', () => {
    const issue = firstIssue(
      StageFileSchema.safeParse(minimalStage({ termination: { type: 'judgment', consenus: 2 } })),
    );
    expect(describeFileIssue('stage.yaml', issue, ['type', 'min_iterations', 'consensus', 'queue'], undefined)).toBe(
      'stage.yaml: termination.consenus: unknown field (did you mean "consensus"?); the fields are: type, min_iterations, consensus, queue',
    );
  });

  test('an unknown key close to no field gets the fields only', () => {
    const issue = firstIssue(StageFileSchema.safeParse(minimalStage({ consensus_field: 'plateau' })));
    expect(describeFileIssue('stage.yaml', issue, STAGE_FIELDS, undefined)).toBe(
      `stage.yaml: consensus_field: unknown field; the fields are: ${STAGE_FIELDS.join(', ')}`,
    );
  });

  test("any other issue is the file, the field and zod's message", () => {
    const issue = firstIssue(LoopPipelineFileSchema.safeParse({ name: 'p', stages: [] }));
    expect(describeFileIssue('pipeline.yaml', issue, [], [])).toBe(
      'pipeline.yaml: stages: a pipeline needs at least one stage',
    );
  });
});

describe('checkLoopStageConfig: a min_iterations the loop cannot reach', () => {
  test('is a problem naming both numbers', () => {
    const stage = { name: 'x', prompt: 'go', termination: { type: 'judgment', min_iterations: 12 } };
    expect(checkLoopStageConfig({ stage, max_iterations: 10 })).toEqual([
      'stage.termination.min_iterations: 12 is beyond max_iterations (10): the loop could only ever stop by its guardrail; lower it or raise max_iterations',
    ]);
    expect(checkLoopStageConfig({ stage: { ...stage, guardrails: { max_iterations: 20 } } })).toEqual([]);
  });
});
