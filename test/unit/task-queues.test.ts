/**
 * Issue 26 §2, one rule per task queue, the pure parts: `task_queue` on a pipeline and a stage (YAML and the
 * builder give the same spec; a queue with spaces is refused); a name Treadle does not ship is a problem
 * without a queue and the worker's business with one; the prepare step's routing (only what the worker lacks
 * leaves the item's queue, the stage's queue over the pipeline's, approval actions with their stage; a spec with
 * no queue is unchanged, so old items schedule as before); the hint `run` and `validate` add; a worker's extras.
 */
import YAML from 'yaml';
import { pipeline } from '../../src/model/builder';
import { validatePipeline, type PipelineSpec } from '../../src/model/pipeline';
import { BUILT_IN_IMPLEMENTATIONS } from '../../src/pipelines/catalog';
import { APPROVAL_CREATE_ACTIVITY, APPROVAL_EXECUTE_ACTIVITY } from '../../src/kinds/approval/shapes';
import { gateActivityType } from '../../src/model/activity-types';
import {
  implementationActivityTypes,
  missingQueueHint,
  namesBeyond,
  routeImplementations,
  workerCommandFor,
} from '../../src/task-queues';

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

it('gives an implementations queue the activity types beyond the shipped set, and refuses contract roles or nothing', () => {
  const shipped = { ...BUILT_IN_IMPLEMENTATIONS, actions: ['create_task'] };
  const own = { stages: ['scripted', 'summarize'], gates: ['tone'], actions: ['create_task', 'post_invoice'] };
  expect([...implementationActivityTypes('summaries', own, shipped)].sort()).toEqual(
    ['summarize', gateActivityType('tone'), APPROVAL_CREATE_ACTIVITY, APPROVAL_EXECUTE_ACTIVITY].sort(),
  );
  expect(() => implementationActivityTypes('summaries', { ...own, validators: ['schema_x'] }, shipped)).toThrow(
    /validator schema_x must run on the item's own queue/,
  );
  expect(() => implementationActivityTypes('summaries', { stages: ['scripted'], gates: [] }, shipped)).toThrow(
    'the implementations queue summaries would serve nothing',
  );
});

test('the advice for a queue nobody polls names the command that polls it: plain on the default queue', () => {
  expect(workerCommandFor('treadle')).toBe('treadle worker');
  expect(workerCommandFor('host-b')).toBe('TREADLE_TASK_QUEUE=host-b treadle worker');
});
