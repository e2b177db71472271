/**
 * Records engine 9's lineage (issue 42) for the replay test: `lineage-fork`, a fork that carries two stages from
 * its original and runs the third again with a changed setting; `lineage-unattributed`, an item started without a
 * correlation id or search attributes (as a Temporal Schedule starts one), which publishes the id it made.
 */
import type { temporal } from '@temporalio/proto';
import type { Harness } from './harness';

export async function recordLineage(h: Harness): Promise<Record<string, temporal.api.history.v1.IHistory>> {
  const spec = {
    name: 'replay-lineage',
    stages: [
      { name: 'fetch', run: 'scripted' },
      { name: 'parse', run: 'scripted', depends_on: ['fetch'] },
      { name: 'check', run: 'scripted', depends_on: ['parse'] },
    ],
  };
  await h.client.start(spec, null, { id: 'lineage-original' });
  await h.client.result('lineage-original');
  await h.client.items.fork('lineage-original', {
    from: 'check',
    id: 'lineage-fork',
    overrides: { stages: { check: { retry_budget: { max_attempts: 2 } } } },
  });
  await h.client.result('lineage-fork');
  const unattributed = await h.temporal.workflow.start('workItem', {
    taskQueue: h.taskQueue,
    workflowId: 'lineage-unattributed',
    args: [{ pipeline: spec, input: null }],
  });
  await unattributed.result();
  return {
    'lineage-fork': await h.temporal.workflow.getHandle('lineage-fork').fetchHistory(),
    'lineage-unattributed': await unattributed.fetchHistory(),
  };
}
