/**
 * The Treadle side of the benchmarks: a registry of no-op implementations and the pipeline specs each
 * scenario runs. Every stage does no work, so what is measured is the engine.
 */
import { Registry } from '../src/activities/registry';
import { registerScripted } from '../src/pipelines/scripted';
import type { ActionCatalog } from '../src/kinds/approval/worker/activities';
import { registerKinds } from '../src/kinds';

/** Stage names of the linear pipeline: `s01` … `s10`. */
export function linearStageNames(stages: number): string[] {
  return Array.from({ length: stages }, (_, i) => `s${String(i + 1).padStart(2, '0')}`);
}

/**
 * `noop` (returns a tiny artefact at once), `payload` (an artefact of `with.bytes` characters, for the
 * large-artefact scenario), `items` (`{items: [0 … with.count-1]}`, the list of the fan-out over items),
 * the `fan_out`, `loop` and `approval` stage kinds, and the built-in `scripted` stage and gate (verdicts from the
 * item's `script`).
 */
export function benchRegistry(): Registry {
  return registerKinds(registerScripted(new Registry()), ['fan_out', 'loop', 'approval'])
    .stage('items', async (ctx) => ({
      outcome: 'completed',
      artefact: { items: Array.from({ length: (ctx.config as { count: number }).count }, (_, i) => i) },
    }))
    .stage('noop', async (ctx) => ({ outcome: 'completed', artefact: { i: ctx.attempt } }))
    .stage('payload', async (ctx) => {
      const bytes = (ctx.config as { bytes?: number } | undefined)?.bytes ?? 0;
      return { outcome: 'completed', artefact: { text: 'x'.repeat(bytes) } };
    });
}

/** `stages` no-op stages in a chain. */
export function linearPipelineSpec(stages: number) {
  const names = linearStageNames(stages);
  return {
    name: `bench-linear-${stages}`,
    stages: names.map((name, i) => ({ name, run: 'noop', ...(i > 0 ? { depends_on: [names[i - 1]!] } : {}) })),
  };
}

/** One stage, `width` stages in parallel after it, and one stage that joins them. */
export function fanOutPipelineSpec(width: number) {
  const parallel = Array.from({ length: width }, (_, i) => `p${String(i + 1).padStart(3, '0')}`);
  return {
    name: `bench-fan-out-${width}`,
    stages: [
      { name: 'start', run: 'noop' },
      ...parallel.map((name) => ({ name, run: 'noop', depends_on: ['start'] })),
      { name: 'join', run: 'noop', depends_on: parallel },
    ],
  };
}

/** The fan-out stage of {@link fanOutItemsPipelineSpec}; its children are `<item>.each.1.<index>`. */
export const FAN_OUT_ITEMS_STAGE = 'each';

/** A list of `count` elements, then a `fan_out` stage running the `noop` stage once per element, `concurrency` at once. */
export function fanOutItemsPipelineSpec(count: number, concurrency: number) {
  return {
    name: `bench-fan-out-items-${count}`,
    stages: [
      { name: 'list', run: 'items', with: { count } },
      {
        name: FAN_OUT_ITEMS_STAGE,
        type: 'fan_out',
        depends_on: ['list'],
        with: { items: 'items', stage: { run: 'noop' }, max_concurrent: concurrency },
      },
    ],
  };
}

/** `review` (policy always: a human signs off) followed by `next`. */
export const reviewPipelineSpec = {
  name: 'bench-review',
  stages: [
    { name: 'review', run: 'noop', review_policy: 'always' },
    { name: 'next', run: 'noop', depends_on: ['review'] },
  ],
};

/** The stage the retry pipeline retries. */
export const RETRY_STAGE = 'work';

/** One stage with the scripted gate and a budget of `maxAttempts` attempts, no delay between them. */
export function retryPipelineSpec(maxAttempts: number) {
  return {
    name: 'bench-retry',
    stages: [
      { name: RETRY_STAGE, run: 'noop', gate: 'scripted', retry_budget: { max_attempts: maxAttempts, delay: 0 } },
    ],
  };
}

/** The item input that makes the scripted gate reject the first `rejections` attempts, then accept. */
export function retryScript(rejections: number) {
  return {
    script: {
      [RETRY_STAGE]: [
        ...Array.from({ length: rejections }, (_, i) => ({
          verdict: 'rejected',
          summary: `attempt ${i + 1} rejected`,
        })),
        { verdict: 'accepted' },
      ],
    },
  };
}

/**
 * `produce` makes an artefact of `bytes` characters; `consume` receives it as its upstream artefact. Both
 * receive the item's input (the large-payload scenario passes a document as large as the artefact).
 */
export function largeArtefactPipelineSpec(bytes: number) {
  return {
    name: `bench-large-${bytes}`,
    stages: [
      { name: 'produce', run: 'payload', with: { bytes } },
      { name: 'consume', run: 'noop', depends_on: ['produce'] },
    ],
  };
}

/** The loop stage of {@link loopPipelineSpec}; its child workflow is `<item>.grind.1`. */
export const LOOP_STAGE_NAME = 'grind';

/**
 * One loop stage of `iterations` fixed iterations with the scripted agent: each writes the output (the
 * input's `agent_replies`, see {@link loopReplies}) and a status file; the engine snapshots and logs.
 */
export function loopPipelineSpec(iterations: number) {
  return {
    name: `bench-loop-${iterations}`,
    stages: [
      {
        name: LOOP_STAGE_NAME,
        run: 'loop',
        with: {
          stage: {
            name: LOOP_STAGE_NAME,
            prompt: 'Read ${CTX}; write ${OUTPUT} and ${STATUS}.',
            termination: { type: 'fixed' },
            agent: 'scripted',
          },
          max_iterations: iterations,
        },
      },
    ],
  };
}

/** The scripted reply every iteration of {@link loopPipelineSpec} repeats. */
export function loopReplies(output: string) {
  return {
    agent_replies: {
      [LOOP_STAGE_NAME]: [{ output, status: { decision: 'continue', reason: 'r', summary: 's', errors: [] } }],
    },
  };
}

/**
 * The approval action of the inbox scenario: `note` checks nothing and does nothing, so an approval request
 * costs only the engine's work.
 */
export function benchActions(): ActionCatalog {
  return {
    validatePayload: (type) => (type === 'note' ? [] : [`unknown action type "${type}"`]),
    summarize: (_type, payload) => `note "${(payload as { title?: string }).title ?? ''}"`,
    names: () => ['note'],
    execute: async () => ({ noted: true }),
  };
}

/** The stage every inbox review waits at. */
export const INBOX_REVIEW_STAGE = 'review';

/**
 * An inbox review: a no-op stage a person signs off (`review_policy: always`), for `reviewers` when given,
 * then a no-op stage. Pipelines and groups vary so the inbox's filters have something to choose from.
 */
export function inboxReviewSpec(pipeline: string, reviewers: string | undefined) {
  return {
    name: pipeline,
    stages: [
      {
        name: INBOX_REVIEW_STAGE,
        run: 'noop',
        review_policy: 'always',
        ...(reviewers !== undefined ? { reviewers } : {}),
      },
      { name: 'next', run: 'noop', depends_on: [INBOX_REVIEW_STAGE] },
    ],
  };
}

/** One approval request (the `note` action) that waits an hour, escalating to `leads` when `escalates`. */
export function inboxApprovalSpec(escalates: boolean) {
  return {
    name: escalates ? 'bench-inbox-approval-escalating' : 'bench-inbox-approval',
    stages: [
      { name: 'draft', run: 'scripted' },
      {
        name: 'approve',
        type: 'approval',
        depends_on: ['draft'],
        with: {
          action: 'note',
          items: 'notes',
          ttl: '1h',
          ...(escalates ? { escalation: { to: 'leads', ttl: '1h', default: 'reject' } } : {}),
        },
      },
    ],
  };
}

/** The input of {@link inboxApprovalSpec}: the draft's one note. */
export function inboxApprovalInput(title: string) {
  return { script: { draft: [{ output: { notes: [{ title }] } }] } };
}

/** A loop stage whose scripted agent crashes on both of its tries: the loop fails and waits to be resumed. */
export const inboxFailingLoopSpec = {
  name: 'bench-inbox-loop',
  stages: [
    {
      name: 'work',
      run: 'loop',
      with: {
        stage: {
          name: 'work',
          prompt: 'Read ${CTX}',
          termination: { type: 'judgment', consensus: 2 },
          agent: 'scripted',
        },
        max_iterations: 3,
      },
    },
  ],
};

/** The scripted replies of {@link inboxFailingLoopSpec}: the agent exits 1 twice. */
export const inboxFailingLoopInput = { agent_replies: { work: [{ crash: 'exit 1' }, { crash: 'exit 1' }] } };
