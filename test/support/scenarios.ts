/**
 * Scenarios that exercise most of the workflow's code paths in one item each; shared by the replay
 * recorder and the maxCachedWorkflows=0 run.
 */
import type { Harness } from './harness';
import { pipeline } from '../../src/model/builder';

/** A named scenario: starts an item, drives its reviews, and waits for the result. */
export interface Scenario {
  name: string;
  run(h: Harness, id: string): Promise<void>;
}

const waitForReview = async (h: Harness, id: string, stage: string): Promise<void> => {
  const deadline = Date.now() + 30_000;
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
        draft: [{ verdict: 'rejected', summary: 'short' }, { verdict: 'uncertain', summary: 'hmm' }, { verdict: 'rejected', summary: 'still short' }],
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
    async run(h, id) {
      const spec = pipeline('replay-faults')
        .stage('slow', 'scripted')
        .stage('flaky', 'scripted')
        .stage('judged', 'scripted', { dependsOn: ['slow', 'flaky'] })
        .stage('never', 'scripted', { dependsOn: ['judged'] })
        .qualityGate('slow', 'scripted')
        .qualityGate('judged', 'scripted')
        .retryBudget('slow', { maxAttempts: 2, attemptTimeout: '1s' })
        .activityOptions('flaky', { retry: { initialInterval: '100ms', maximumAttempts: 3 } })
        .reviewPolicy('judged', 'on_uncertain');
      const script = { slow: [{ sleepMs: 10_000 }, {}], flaky: [{ error: 'transient', errorTimes: 1 }], judged: [{ verdict: 'uncertain', summary: 'a human should look' }] };
      await h.client.start(spec, { script }, { id });
      await waitForReview(h, id, 'judged');
      const handle = h.temporal.workflow.getHandle(id);
      await handle.signal('review', { stage: 'ghost', outcome: { kind: 'approve' } });
      await h.client.reject(id, 'judged', 'not good', { reviewer: 'replay' });
      await h.client.result(id);
    },
  },
];
