/**
 * Scenarios that exercise most of the workflow's code paths in one item each; shared by the replay
 * recorder and the maxCachedWorkflows=0 run.
 */
import type { Harness } from './harness';
import { pipeline } from '../../src/kinds/builder';
import { ATTEMPT_TIMEOUT, FAR_TOO_SLOW_MS } from './attempt-timeout';

/**
 * How long a scenario waits for a stage to ask for review: several attempts, one of them timed out, with
 * every task replayed in the no-cache run on a loaded machine.
 */
export const REVIEW_WAIT_MS = 90_000;
/** A jest timeout that covers any one scenario, waits for review included. */
export const SCENARIO_TEST_MS = 2 * REVIEW_WAIT_MS;

/** A named scenario: starts an item, drives its reviews, and waits for the result (or for a review). */
export interface Scenario {
  name: string;
  /** The one right status when `run` returns. */
  expected: 'completed' | 'failed' | 'waiting_review' | 'cancelled';
  run(h: Harness, id: string): Promise<void>;
}

const waitForReview = async (h: Harness, id: string, stage: string): Promise<void> => {
  const deadline = Date.now() + REVIEW_WAIT_MS;
  while (Date.now() < deadline) {
    const state = await h.client.getState(id);
    if (state.pendingReviews.some((r) => r.stage === stage)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${id}: ${stage} never waited for review`);
};

export const SCENARIOS: Scenario[] = [
  {
    name: 'retry-escalate-edit-parallel',
    expected: 'completed',
    async run(h, id) {
      const spec = pipeline('replay-main')
        .stage('draft', 'scripted')
        .stage('left', 'scripted', { dependsOn: ['draft'] })
        .stage('right', 'scripted', { dependsOn: ['draft'] })
        .stage('publish', 'scripted', { dependsOn: ['left', 'right'] })
        .qualityGate('draft', 'scripted')
        .retryBudget('draft', { maxAttempts: 3, delay: '100ms', onExhausted: 'escalate' })
        .reviewPolicy('publish', 'always');
      const script = {
        draft: [
          { verdict: 'rejected', summary: 'short' },
          { verdict: 'uncertain', summary: 'hmm' },
          { verdict: 'rejected', summary: 'still short' },
        ],
        left: [{ sleepMs: 200 }],
      };
      await h.client.start(spec, { script }, { id });
      await waitForReview(h, id, 'draft');
      await h.client.approveWithEdits(id, 'draft', { text: 'edited' }, { reviewer: 'replay', note: 'fixed' });
      await waitForReview(h, id, 'publish');
      await h.client.approve(id, 'publish', { reviewer: 'replay' });
      await h.client.result(id);
    },
  },
  {
    name: 'timeout-mechanical-reject',
    expected: 'failed',
    async run(h, id) {
      const spec = pipeline('replay-faults')
        .stage('slow', 'scripted')
        .stage('flaky', 'scripted')
        .stage('judged', 'scripted', { dependsOn: ['slow', 'flaky'] })
        .stage('never', 'scripted', { dependsOn: ['judged'] })
        .qualityGate('slow', 'scripted')
        .qualityGate('judged', 'scripted')
        .retryBudget('slow', { maxAttempts: 2, attemptTimeout: ATTEMPT_TIMEOUT })
        .activityOptions('flaky', { retry: { initialInterval: '100ms', maximumAttempts: 3 } })
        .reviewPolicy('judged', 'on_uncertain');
      const script = {
        slow: [{ sleepMs: FAR_TOO_SLOW_MS }, {}],
        flaky: [{ error: 'transient', errorTimes: 1 }],
        judged: [{ verdict: 'uncertain', summary: 'a human should look' }],
      };
      await h.client.start(spec, { script }, { id });
      await waitForReview(h, id, 'judged');
      const handle = h.temporal.workflow.getHandle(id);
      await handle.signal('review', { stage: 'ghost', outcome: { kind: 'approve' } });
      await h.client.reject(id, 'judged', 'not good', { reviewer: 'replay' });
      await h.client.result(id);
    },
  },
  {
    // TTL expiry both ways, a composed gate, a stage named like an Object.prototype property, a large
    // artefact by reference, and a budget review (scripted agent) approved to continue.
    name: 'ttl-composed-budget-blobs',
    // `optional` expires under on_review_expired: reject, so the item fails; everything else completes.
    expected: 'failed',
    async run(h, id) {
      const spec = {
        name: 'replay-more',
        max_parallel: 2,
        token_budget: 5,
        stages: [
          { name: 'constructor', run: 'scripted', gate: { all: ['scripted', { any: ['scripted', 'scripted'] }] } },
          {
            name: 'expires',
            run: 'scripted',
            review_policy: 'always',
            review_ttl: '1s',
            on_review_expired: 'approve',
            depends_on: ['constructor'],
          },
          { name: 'optional', run: 'scripted', review_policy: 'always', review_ttl: '1s', on_review_expired: 'reject' },
          {
            name: 'ask',
            run: 'llm',
            agent: 'scripted',
            with: {
              prompt: 'Say {{ input.word }}',
              output_schema: { type: 'object', properties: { said: { type: 'string' } }, required: ['said'] },
            },
            gate: 'scripted',
            retry_budget: { max_attempts: 2 },
            depends_on: ['expires'],
          },
        ],
      };
      const script = {
        constructor: [{ outputBytes: 40_000 }],
        ask: [{ verdict: 'rejected', summary: 'say it louder' }, { verdict: 'accepted' }],
      };
      await h.client.start(
        spec,
        { script, word: 'hello', agent_replies: { ask: [{ said: 'hello' }, { said: 'HELLO' }] } },
        { id },
      );
      await waitForReview(h, id, 'ask');
      await h.client.approve(id, 'ask', { reviewer: 'replay' });
      await h.client.result(id).catch(() => undefined);
    },
  },
  {
    // Cancelled while one stage runs (its activity is sent a cancellation) and another waits for review.
    name: 'cancelled-running-and-waiting',
    expected: 'cancelled',
    async run(h, id) {
      const spec = pipeline('replay-cancelled')
        .stage('slow', 'scripted')
        .stage('check', 'scripted')
        .stage('after', 'scripted', { dependsOn: ['slow', 'check'] })
        .reviewPolicy('check', 'always');
      await h.client.start(spec, { script: { slow: [{ sleepMs: FAR_TOO_SLOW_MS }] } }, { id });
      await waitForReview(h, id, 'check');
      const handle = h.temporal.workflow.getHandle(id);
      await handle.cancel();
      await handle.result().catch(() => undefined);
    },
  },
  {
    // Engine 8: cancelled by someone (`treadle cancel`) while one stage runs, another waits for review and an
    // approval request waits: who and why recorded, the request ended `cancelled`.
    name: 'cancelled-by-person',
    expected: 'cancelled',
    async run(h, id) {
      const spec = {
        name: 'replay-cancelled-by-person',
        stages: [
          { name: 'slow', run: 'scripted' },
          { name: 'check', run: 'scripted', review_policy: 'always' },
          { name: 'draft', run: 'scripted' },
          { name: 'approve', type: 'approval', depends_on: ['draft'], with: { action: 'create_task', items: 'tasks' } },
        ],
      };
      const script = { slow: [{ sleepMs: FAR_TOO_SLOW_MS }], draft: [{ output: { tasks: [{ title: 'recorded' }] } }] };
      await h.client.start(spec, { script }, { id });
      await waitForReview(h, id, 'check');
      const deadline = Date.now() + REVIEW_WAIT_MS;
      while (!(await h.client.getState(id)).approvals?.some((r) => r.status === 'pending')) {
        if (Date.now() > deadline) throw new Error(`${id}: no approval request was made`);
        await new Promise((r) => setTimeout(r, 100));
      }
      await h.client.cancel(id, { by: 'replay', reason: 'recorded' });
    },
  },
  {
    // Recorded while the item waits for review: a deploy must not break items that wait for days.
    name: 'waiting-for-review',
    expected: 'waiting_review',
    async run(h, id) {
      const spec = pipeline('replay-waiting')
        .stage('draft', 'scripted')
        .stage('publish', 'scripted', { dependsOn: ['draft'] })
        .qualityGate('draft', 'scripted')
        .retryBudget('draft', { maxAttempts: 2, onExhausted: 'escalate' })
        .reviewTtl('draft', '30d');
      await h.client.start(
        spec,
        {
          script: {
            draft: [
              { verdict: 'rejected', summary: 'no' },
              { verdict: 'rejected', summary: 'still no' },
            ],
          },
        },
        { id },
      );
      await waitForReview(h, id, 'draft');
      await h.temporal.workflow.getHandle(id).signal('review', { stage: 'draft', outcome: { kind: 'reject' } });
    },
  },
  {
    // Engine 8: an escalated review answered "request changes" runs a 4th attempt with the note; the gate
    // rejects it, so the stage escalates again (not fails); changes requested again, the 5th attempt passes.
    name: 'request-changes',
    expected: 'completed',
    async run(h, id) {
      const spec = pipeline('replay-changes')
        .stage('draft', 'scripted')
        .qualityGate('draft', 'scripted')
        .retryBudget('draft', { maxAttempts: 3, onExhausted: 'escalate' });
      const rejected = (summary: string) => ({ verdict: 'rejected', summary });
      const script = {
        draft: [rejected('short'), rejected('short'), rejected('short'), rejected('no sources'), {}],
      };
      await h.client.start(spec, { script }, { id });
      await waitForReview(h, id, 'draft');
      await h.client.requestChanges(id, 'draft', 'cite two sources', { reviewer: 'replay' });
      await waitForReview(h, id, 'draft');
      await h.client.requestChanges(id, 'draft', 'and keep it short', { reviewer: 'replay' });
      await h.client.result(id);
    },
  },
  {
    // Ten stages in a line, the benchmark's shape: its history is where replay.test.ts counts what a stage
    // costs the workflow thread.
    name: 'linear-ten',
    expected: 'completed',
    async run(h, id) {
      const spec = pipeline('replay-linear');
      for (let i = 1; i <= 10; i++) spec.stage(`s${i}`, 'scripted', i > 1 ? { dependsOn: [`s${i - 1}`] } : {});
      await h.client.start(spec, {}, { id });
      await h.client.result(id);
    },
  },
  {
    // A human stage (issue 40): a person's output, sent back once by the gate with feedback, then accepted.
    name: 'human-stage',
    expected: 'completed',
    async run(h, id) {
      const spec = {
        name: 'replay-human',
        stages: [
          { name: 'draft', run: 'scripted' },
          {
            name: 'sign_off',
            run: 'human',
            depends_on: ['draft'],
            output_schema: { type: 'object', required: ['approved'], properties: { approved: { type: 'boolean' } } },
            with: { instructions: 'Sign it off', reviewers: 'legal' },
            gate: 'scripted',
            retry_budget: { max_attempts: 2 },
          },
          { name: 'publish', run: 'scripted', depends_on: ['sign_off'] },
        ],
      };
      const script = { sign_off: [{ verdict: 'rejected', summary: 'not dated', criteria: ['dated'] }, {}] };
      await h.client.start(spec, { script }, { id });
      for (const attempt of [1, 2]) {
        const deadline = Date.now() + REVIEW_WAIT_MS;
        const waiting = async () =>
          (await h.client.getState(id)).humanRequests?.some((r) => r.status === 'pending' && r.attempt === attempt);
        while (!(await waiting())) {
          if (Date.now() > deadline) throw new Error(`${id}: sign_off never waited for attempt ${attempt}`);
          await new Promise((r) => setTimeout(r, 100));
        }
        await h.client.respond(id, 'sign_off', { approved: attempt === 2 }, { reviewer: 'replay' });
      }
      await h.client.result(id);
    },
  },
];
