/**
 * Issue 26 §2, one rule per task queue, the pure parts: `task_queue` on a pipeline and a stage (YAML and the
 * builder give the same spec; a queue with spaces is refused); a name Treadle does not ship is a problem
 * without a queue and the worker's business with one; the prepare step's routing (only what the worker lacks
 * leaves the item's queue, the stage's queue over the pipeline's, approval actions with their stage; a spec with
 * no queue is unchanged, so old items schedule as before); contracts' validators and revisers (issue 37 §1:
 * accepted with a queue, listed with the fix without one, routed contract → consumer → pipeline); the hint
 * `run` and `validate` add; a worker's extras.
 */
import YAML from 'yaml';
import { pipeline } from '../../src/kinds/builder';
import { type PipelineSpec } from '../../src/model/pipeline';
import { validatePipeline } from '../../src/kinds/pipeline';
import { BUILT_IN_IMPLEMENTATIONS } from '../../src/pipelines/catalog';
import { APPROVAL_CREATE_ACTIVITY, APPROVAL_EXECUTE_ACTIVITY } from '../../src/kinds/approval/shapes';
import { CONTRACT_REVISE_ACTIVITY, CONTRACT_VALIDATE_ACTIVITY, gateActivityType } from '../../src/model/activity-types';
import {
  implementationActivityTypes,
  missingQueueHint,
  namesBeyond,
  workerCommandFor,
} from '../../src/worker/task-queues';
import { routeImplementations } from '../../src/worker/implementation-routing';

const valid = (raw: unknown): PipelineSpec => {
  const result = validatePipeline(raw, BUILT_IN_IMPLEMENTATIONS);
  if (!result.ok) throw new Error(result.problems.join('\n'));
  return result.spec;
};

const yaml = `
name: summaries
task_queue: summaries
stages:
  - { name: summarize, run: summarize, gate: tone }
  - { name: check, run: llm, gate: tone, task_queue: judges, depends_on: [summarize], with: { prompt: "x" } }
  - { name: sign_off, type: approval, depends_on: [check], with: { action: post_invoice, items: invoices } }
`;

it('reads task_queue on the pipeline and the stage, the same from YAML and the builder', () => {
  const fromYaml = validatePipeline(YAML.parse(yaml));
  const built = pipeline('summaries')
    .taskQueue('summaries')
    .stage('summarize', 'summarize')
    .qualityGate('summarize', 'tone')
    .stage('check', 'llm', { dependsOn: ['summarize'], with: { prompt: 'x' } })
    .qualityGate('check', 'tone')
    .taskQueue('judges', 'check')
    .toJSON();
  expect(fromYaml.ok && fromYaml.spec.taskQueue).toBe('summaries');
  expect(fromYaml.ok && fromYaml.spec.stages.map((s) => s.taskQueue)).toEqual([undefined, 'judges', undefined]);
  expect(validatePipeline(built)).toEqual(
    validatePipeline({ ...YAML.parse(yaml), stages: YAML.parse(yaml).stages.slice(0, 2) }),
  );
  expect(validatePipeline({ name: 'p', task_queue: 'a b', stages: [{ name: 's', run: 'scripted' }] })).toEqual(
    expect.objectContaining({ ok: false, problems: ['task_queue: must not contain spaces'] }),
  );
});

it('lists a name Treadle does not ship without a queue, and leaves it to the queue named', () => {
  const bare = { name: 'p', stages: [{ name: 'summarize', run: 'summarize', gate: 'tone' }] };
  const result = validatePipeline(bare, BUILT_IN_IMPLEMENTATIONS);
  expect(result.ok).toBe(false);
  expect(!result.ok && result.problems.map((p) => p.split(' (registered')[0])).toEqual([
    'stage summarize: unknown stage implementation "summarize"',
    'stage summarize: unknown gate implementation "tone"',
  ]);
  expect(missingQueueHint(!result.ok ? result.problems : [])).toContain('name the task_queue their worker polls');
  // A typo of a shipped name is said to be one, with no talk of queues.
  const typo = validatePipeline({ name: 'p', stages: [{ name: 'a', run: 'scriptd' }] }, BUILT_IN_IMPLEMENTATIONS);
  expect(missingQueueHint(!typo.ok ? typo.problems : [])).toBe('');
  expect(validatePipeline({ ...bare, task_queue: 'summaries' }, BUILT_IN_IMPLEMENTATIONS).ok).toBe(true);
  const staged = { name: 'p', stages: [{ ...bare.stages[0], task_queue: 'summaries' }] };
  expect(validatePipeline(staged, BUILT_IN_IMPLEMENTATIONS).ok).toBe(true);
});

it('routes only what the worker lacks, to the stage queue over the pipeline queue', () => {
  const routed = routeImplementations(valid(YAML.parse(yaml)), BUILT_IN_IMPLEMENTATIONS);
  expect(routed.stages.map((s) => s.queues)).toEqual([
    { summarize: 'summaries', 'gate:tone': 'summaries' },
    { 'gate:tone': 'judges' },
    { 'treadle.approvalCreate': 'summaries', 'treadle.approvalExecute': 'summaries' },
  ]);
  // Nothing to route: the spec is the same object's content, so the workflow's commands are unchanged.
  const plain = valid({ name: 'p', stages: [{ name: 'a', run: 'scripted', gate: 'scripted' }] });
  expect(routeImplementations(plain, BUILT_IN_IMPLEMENTATIONS)).toEqual(plain);
  const shippedOnQueue = valid({ name: 'p', task_queue: 'q', stages: [{ name: 'a', run: 'scripted' }] });
  expect(routeImplementations(shippedOnQueue, BUILT_IN_IMPLEMENTATIONS).stages[0]!.queues).toBeUndefined();
});

it("names what a worker's registrations add to the shipped set", () => {
  expect(
    namesBeyond(
      { stages: ['scripted', 'summarize'], gates: ['tone'], actions: ['create_task', 'post_invoice'] },
      BUILT_IN_IMPLEMENTATIONS,
    ),
  ).toEqual(['stage summarize', 'gate tone', 'action type post_invoice']);
});

it('gives an implementations queue the activity types beyond the shipped set, contract roles included, and refuses nothing', () => {
  const shipped = { ...BUILT_IN_IMPLEMENTATIONS, actions: ['create_task'], validators: ['llm'], revisers: ['llm'] };
  const own = { stages: ['scripted', 'summarize'], gates: ['tone'], actions: ['create_task', 'post_invoice'] };
  expect([...implementationActivityTypes('summaries', own, shipped)].sort()).toEqual(
    ['summarize', gateActivityType('tone'), APPROVAL_CREATE_ACTIVITY, APPROVAL_EXECUTE_ACTIVITY].sort(),
  );
  // Validators and revisers of your own run there too: the contract activities check their names.
  const contractRoles = {
    stages: ['scripted'],
    gates: [],
    validators: ['llm', 'my-rules'],
    revisers: ['llm', 'my-fixer'],
  };
  expect([...implementationActivityTypes('contracts', contractRoles, shipped)].sort()).toEqual(
    [CONTRACT_REVISE_ACTIVITY, CONTRACT_VALIDATE_ACTIVITY].sort(),
  );
  expect([...implementationActivityTypes('contracts', { ...contractRoles, revisers: ['llm'] }, shipped)]).toEqual([
    CONTRACT_VALIDATE_ACTIVITY,
  ]);
  expect(() => implementationActivityTypes('summaries', { stages: ['scripted'], gates: [] }, shipped)).toThrow(
    'the implementations queue summaries would serve nothing',
  );
});

/** Seed 002's boundary with a code validator and reviser of the user's own; `extra` is added to the contract. */
function contractSpec(
  extra: Record<string, unknown> = {},
  consumer: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    name: 'discovery',
    stages: [
      { name: 'intake', run: 'scripted' },
      { name: 'roadmap', run: 'scripted', depends_on: ['intake'], ...consumer },
    ],
    contracts: [
      {
        from: 'intake',
        to: 'roadmap',
        items: 'briefs',
        item_id: 'id',
        validate: 'my-rules',
        revise: 'my-fixer',
        ...extra,
      },
    ],
  };
}

it('lists validators and revisers Treadle does not ship without a queue, naming the fix, and leaves them to the queue named', () => {
  const bare = validatePipeline(contractSpec(), BUILT_IN_IMPLEMENTATIONS);
  expect(!bare.ok && bare.problems).toEqual([
    'contracts[0] (intake → roadmap): validate: unknown validator "my-rules" (registered: llm)',
    'contracts[0] (intake → roadmap): revise: unknown reviser "my-fixer" (registered: llm)',
  ]);
  expect(missingQueueHint(!bare.ok ? bare.problems : [])).toContain(
    'name the task_queue their worker polls (on the stage or the contract, or on the pipeline for all of them',
  );
  // A typo of the built-in llm is said to be one, with no talk of queues.
  const typo = validatePipeline(contractSpec({ validate: 'lm' }), BUILT_IN_IMPLEMENTATIONS);
  expect(!typo.ok && typo.problems[0]).toContain('unknown validator "lm" (did you mean "llm"?)');
  expect(missingQueueHint(!typo.ok ? typo.problems.slice(0, 1) : [])).toBe('');
  // The contract's own queue, its consuming stage's, or the pipeline's: each is enough.
  expect(validatePipeline(contractSpec({ task_queue: 'contracts-q' }), BUILT_IN_IMPLEMENTATIONS).ok).toBe(true);
  expect(validatePipeline(contractSpec({}, { task_queue: 'contracts-q' }), BUILT_IN_IMPLEMENTATIONS).ok).toBe(true);
  expect(validatePipeline({ ...contractSpec(), task_queue: 'contracts-q' }, BUILT_IN_IMPLEMENTATIONS).ok).toBe(true);
  // The builder's contract takes the queue too, and a queue with spaces is refused like any task_queue.
  const built = pipeline('discovery')
    .stage('intake', 'scripted')
    .stage('roadmap', 'scripted', { dependsOn: ['intake'] })
    .contract('intake', 'roadmap', {
      items: 'briefs',
      itemId: 'id',
      validate: 'my-rules',
      revise: 'my-fixer',
      taskQueue: 'contracts-q',
    })
    .build(BUILT_IN_IMPLEMENTATIONS);
  expect(built.contracts?.[0]?.taskQueue).toBe('contracts-q');
  expect(validatePipeline(contractSpec({ task_queue: 'a b' }))).toEqual(
    expect.objectContaining({ ok: false, problems: ['contracts[0].task_queue: must not contain spaces'] }),
  );
});

it("routes a contract's validate and revise calls when the worker lacks their names: the contract's queue, then the consumer's, then the pipeline's", () => {
  const registered = { ...BUILT_IN_IMPLEMENTATIONS, validators: ['llm'], revisers: ['llm'] };
  const routed = (raw: Record<string, unknown>) => routeImplementations(valid(raw), registered).contracts![0]!.queues;
  const both = { [CONTRACT_VALIDATE_ACTIVITY]: 'c-q', [CONTRACT_REVISE_ACTIVITY]: 'c-q' };
  expect(routed({ ...contractSpec({ task_queue: 'c-q' }, { task_queue: 's-q' }), task_queue: 'p-q' })).toEqual(both);
  expect(routed({ ...contractSpec({}, { task_queue: 'c-q' }), task_queue: 'p-q' })).toEqual(both);
  expect(routed({ ...contractSpec(), task_queue: 'c-q' })).toEqual(both);
  // Only what the worker lacks leaves the item's queue: the built-in llm reviser stays.
  const llmReviser = { revise: { run: 'llm', with: { criteria: 'fix it' } }, task_queue: 'c-q' };
  expect(routed(contractSpec(llmReviser))).toEqual({ [CONTRACT_VALIDATE_ACTIVITY]: 'c-q' });
  // A worker that registers them (its own taskQueue) routes nothing, and a contract with no queue is unchanged.
  const own = { ...registered, validators: ['llm', 'my-rules'], revisers: ['llm', 'my-fixer'] };
  const spec = valid({ ...contractSpec({ task_queue: 'c-q' }) });
  expect(routeImplementations(spec, own)).toEqual(spec);
  const shippedOnly = valid({
    ...contractSpec({
      validate: { run: 'llm', with: { criteria: 'x' } },
      revise: { run: 'llm', with: { criteria: 'y' } },
    }),
    task_queue: 'p-q',
  });
  expect(routeImplementations(shippedOnly, registered)).toEqual(shippedOnly);
});

test('the advice for a queue nobody polls names the command that polls it: plain on the default queue', () => {
  expect(workerCommandFor('treadle')).toBe('treadle worker');
  expect(workerCommandFor('host-b')).toBe('TREADLE_TASK_QUEUE=host-b treadle worker');
});
