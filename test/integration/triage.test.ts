/**
 * Seed 003's example end to end on the real server, offline: the email-triage pipeline extracts five items
 * from an inbox, classifies each as a fan-out element, merges the duplicate, routes them to three actions,
 * and waits for approval; approving two and rejecting one makes one task and one busy block, and no message.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { bundledActionRegistry } from '../../src/cli/bundled-examples';
import { TaskList } from '../../examples/task-list';
import { EXAMPLES_DIR, findPipeline, readPipelineFile } from '../../src/pipelines/catalog';
import type { Json } from '../../src/model/shapes';
import { eventually, startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';

let h: Harness;
let tasksFile: string;
beforeAll(async () => {
  tasksFile = path.join(mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'triage-')), 'tasks.json');
  h = await startHarness({ approvalActions: bundledActionRegistry({ tasksFile }) });
});
afterAll(async () => {
  await h?.shutdown();
});

it('triages the sample inbox: extract, classify (fan-out), dedup, route, then the approved actions take effect', async () => {
  const entry = findPipeline('email-triage')!;
  expect(entry.specFile).toBe(path.join(EXAMPLES_DIR, 'triage', 'pipeline.yaml'));
  const inbox = JSON.parse(readFileSync(entry.sampleInputFile, 'utf8')) as Json;
  const id = h.id('triage');
  await h.client.start(readPipelineFile(entry.specFile), inbox, { id });

  const requests = await eventually(
    async () => {
      const listed = (await h.client.listApprovals()).filter((r) => r.itemId === id);
      return listed.length === 3 ? listed : undefined;
    },
    60_000,
    'three approval requests',
  );
  const byType = new Map(requests.map((r) => [r.actionType, r]));
  expect([...byType.keys()].sort()).toEqual(['add_busy_block', 'create_task', 'send_message']);
  expect(byType.get('create_task')!.context).toBe(
    "Triage of this morning's inbox — ana@example.com: Q3 report — also in: ben@example.com: Design review",
  );

  const state = await h.client.getState(id);
  expect(state.stages['classify']!.fanOut).toEqual({ total: 5, running: 0, completed: 5, failed: 0 });
  expect(state.stages['dedup']!.summary).toBe('4 distinct items (1 duplicate merged)');
  expect(state.stages['route']!.summary).toBe('3 actions to approve from 4 items');
  expect(state.status).toBe('waiting_approval');
  // The classification of each element is a model call of the element's own item, and counts in this one.
  const elements = await Promise.all(Array.from({ length: 5 }, (_, i) => h.client.usage(`${id}.classify.1.${i}`)));
  expect(elements.map((u) => u.total.calls)).toEqual([1, 1, 1, 1, 1]);
  expect(state.usage!.stages['classify']).toMatchObject({
    calls: 5,
    inputTokens: elements.reduce((sum, u) => sum + u.total.inputTokens, 0),
  });
  expect(state.usage!.stages['extract']!.calls).toBe(1);

  await h.client.decideApproval(byType.get('create_task')!.id, 'approve', { by: 'me' });
  await h.client.decideApproval(byType.get('add_busy_block')!.id, 'approve', { by: 'me' });
  const cli = await runTreadle(h, [
    'approve',
    'reject',
    byType.get('send_message')!.id,
    '--reason',
    'I will call her instead',
    '--by',
    'me',
  ]);
  expect(cli.code).toBe(0);
  expect((await h.client.result(id)).status).toBe('completed');

  const list = await new TaskList({ file: tasksFile }).read();
  expect(list.tasks.map((t) => [t.title, t.priority, t.due, t.notes])).toEqual([
    ['Send the Q3 report to Ana', 'high', '2026-11-27', 'From ana@example.com: Q3 report'],
  ]);
  expect(list.busyBlocks.map((b) => [b.title, b.start, b.end])).toEqual([
    ['Design review', '2026-11-26T14:00:00Z', '2026-11-26T15:00:00Z'],
  ]);
  expect(list.outbox).toEqual([]);
  const audit = (await h.client.audit(id)).map((e) => e.message);
  expect(audit.filter((m) => / executed: /.test(m))).toHaveLength(2);
  expect(audit).toContain(`${byType.get('send_message')!.id} rejected by me: I will call her instead (update)`);
}, 120_000);

it('treadle run email-triage --wait stops when the run waits for approval and shows the requests', async () => {
  const id = h.id('triage-cli');
  const run = await runTreadle(h, ['run', 'email-triage', '--id', id, '--wait']);
  // Waiting for approval is exit 3, with the commands that decide the requests.
  expect(run.code).toBe(3);
  expect(run.stdout).toMatch(/treadle approve ap-\S+ +\(or treadle approve reject ap-/);
  expect(run.stdout).toContain(`started ${id}`);
  expect(run.stdout).toContain('ApprovalRequested');
  expect(run.stdout).toMatch(new RegExp(`${id} · pipeline email-triage · waiting_approval`));
  expect(run.stdout).toMatch(/approve +waiting_approval/);
  expect(run.stdout).toContain('Approval requests:');
  for (const request of (await h.client.getState(id)).approvals!)
    await h.client.decideApproval(request.id, 'reject', { reason: 'second run' });
  expect((await h.client.result(id)).status).toBe('completed');
}, 120_000);
