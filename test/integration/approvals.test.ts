/**
 * The approval stage kind (seed 003) on the real server: requests made from an upstream artefact, listed
 * from visibility, decided by id (approve, reject with skip and with stop), expired after their TTL,
 * escalated and then decided by the escalation's default; stale and double decisions refused without
 * entering history; the approved action executed once per idempotency key.
 */
import type { ActionCatalog } from '../../src/kinds/approval/worker/activities';
import { pipeline } from '../../src/kinds/builder';
import type { ApprovalStageArtefact } from '../../src/kinds/approval/shapes';
import type { Json } from '../../src/model/shapes';
import { resolveArtefact } from '../../src/storage/blob-store';
import { eventually, startHarness, type Harness } from '../support/harness';
import { approveBatchInTerminal, runTreadle } from '../support/cli';

/** A test action type: `note` records its title, once per idempotency key; a title "explode" fails for good. */
const executed = new Map<string, Json>();
let executions = 0;
const catalog: ActionCatalog = {
  validatePayload: (type, payload) => {
    if (type !== 'note') return [`unknown action type "${type}" (known: note)`];
    const title = (payload as { title?: unknown } | null)?.title;
    return typeof title === 'string' && title !== '' ? [] : ['title: must be a non-empty string'];
  },
  summarize: (_type, payload) => `note "${(payload as { title: string }).title}"`,
  names: () => ['note'],
  execute: async (_type, payload, { idempotencyKey }) => {
    executions++;
    if ((payload as { title: string }).title === 'explode') throw new Error('the note service refused it');
    if (!executed.has(idempotencyKey)) executed.set(idempotencyKey, { noted: (payload as { title: string }).title });
    return executed.get(idempotencyKey)!;
  },
};

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ approvalActions: catalog });
});
afterAll(async () => {
  await h?.shutdown();
});

function approvalPipeline(name: string, approval: Record<string, Json>) {
  return pipeline(name)
    .stage('draft', 'scripted')
    .stage('approve', 'approval', { dependsOn: ['draft'], with: { action: 'note', items: 'notes', ...approval } })
    .stage('after', 'scripted', { dependsOn: ['approve'] });
}
const draftOf = (titles: string[]): Json => ({
  script: { draft: [{ output: { notes: titles.map((title) => ({ title, source: `meeting about ${title}` })) } }] },
});

async function pendingOf(id: string, count: number) {
  return eventually(
    async () => {
      const listed = (await h.client.listApprovals()).filter((r) => r.itemId === id);
      return listed.length === count ? listed : undefined;
    },
    30_000,
    `${count} pending approvals of ${id}`,
  );
}

async function artefactOf(id: string): Promise<ApprovalStageArtefact> {
  const state = await h.client.getState(id);
  return (await resolveArtefact(state.stages['approve']!.artefact, h.blobs)) as unknown as ApprovalStageArtefact;
}

it('lists requests from visibility, approves and rejects them by id, refuses double and unknown decisions, and runs each approved action once', async () => {
  const id = h.id('approve');
  executions = 0;
  await h.client.start(
    approvalPipeline(`approvals-${h.taskQueue}`, {
      context: 'From the weekly meeting',
      context_field: 'source',
      reviewers: 'team',
    }),
    draftOf(['write the report', 'book the room']),
    { id },
  );
  const listed = await pendingOf(id, 2);
  const bySummary = new Map(listed.map((r) => [r.summary, r]));
  for (const title of ['write the report', 'book the room']) {
    expect(bySummary.get(`note "${title}"`)).toMatchObject({
      step: 'approve',
      actionType: 'note',
      context: `From the weekly meeting — meeting about ${title}`,
      reviewers: 'team',
      status: 'pending',
    });
  }
  for (const r of listed) expect(r.id).toMatch(/^ap-[a-z2-9]{10}$/);
  expect(new Set(listed.map((r) => r.id)).size).toBe(2);

  const state = await h.client.getState(id);
  expect(state.status).toBe('waiting_approval');
  expect(state.stages['approve']!.status).toBe('waiting_approval');
  const [report, room] = [bySummary.get('note "write the report"'), bySummary.get('note "book the room"')];
  expect((await h.client.getApproval(report!.id)).payload).toEqual({
    title: 'write the report',
    source: 'meeting about write the report',
  });

  const before = (await h.temporal.workflow.getHandle(id).fetchHistory()).events!.length;
  await expect(h.client.decideApproval('ap-2222222222', 'approve')).rejects.toThrow(
    'approval request ap-2222222222 not found: no work item has it',
  );
  await expect(h.client.decideApproval('not-an-id', 'approve')).rejects.toThrow('"not-an-id" is not an approval id');
  expect(await h.client.decideApproval(report!.id, 'approve', { by: 'ann' })).toEqual({
    id: report!.id,
    itemId: id,
    step: 'approve',
    status: 'approved',
    decidedBy: 'ann',
  });
  // A decided request is not "not found": the refusal says who decided what, and when.
  await expect(h.client.decideApproval(report!.id, 'reject', { by: 'bob' })).rejects.toThrow(
    new RegExp(`^decision refused: approval request ${report!.id} is already approved \\(by ann at \\d{4}-`),
  );
  await h.client.decideApproval(room!.id, 'reject', { by: 'bob', reason: 'no budget' });

  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  // Once the item has finished too; the same decision again gets the first one's answer.
  await expect(h.client.decideApproval(room!.id, 'reject', { by: 'bob', reason: 'no budget' })).resolves.toEqual({
    id: room!.id,
    itemId: id,
    step: 'approve',
    status: 'rejected',
    decidedBy: 'bob',
    repeated: true,
  });
  await expect(h.client.decideApproval(room!.id, 'approve', { by: 'cy' })).rejects.toThrow(
    new RegExp(
      `^decision refused: approval request ${room!.id} is already rejected by bob at \\d{4}-\\S+: no budget; work item ${id} has finished \\(completed\\)$`,
    ),
  );
  const artefact = await artefactOf(id);
  expect(artefact).toMatchObject({ approved: 1, rejected: 1, expired: 0 });
  expect(executions).toBe(1);
  expect(artefact.requests.find((r) => r.id === report!.id)).toMatchObject({
    status: 'approved',
    decidedBy: 'ann',
    result: { noted: 'write the report' },
  });
  expect(artefact.requests.find((r) => r.id === room!.id)).toMatchObject({
    status: 'rejected',
    decidedBy: 'bob',
    reason: 'no budget',
  });
  const done = await h.client.getState(id);
  expect(done.stages['after']!.status).toBe('completed');
  expect(done.approvals!.map((r) => r.status).sort()).toEqual(['approved', 'rejected']);
  // Two decisions became two updates; the refused ones left no trace in the history.
  const history = (await h.temporal.workflow.getHandle(id).fetchHistory()).events!;
  expect(history.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).length).toBe(2);
  expect(history.length).toBeGreaterThan(before);
  expect(history.filter((e) => e.workflowExecutionUpdateRejectedEventAttributes).length).toBe(0);
}, 90_000);

it('with on_reject: stop, a rejection stops the stage and fails the run; the other pending request ends with it', async () => {
  const id = h.id('stop');
  await h.client.start(
    approvalPipeline(`approvals-stop-${h.taskQueue}`, { on_reject: 'stop' }),
    draftOf(['one', 'two']),
    { id },
  );
  const [first] = await pendingOf(id, 2);
  await h.client.decideApproval(first!.id, 'reject', { by: 'cat', reason: 'not now' });
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(result.failedStages).toEqual(['approve']);
  expect(result.error).toContain('approve');
  const state = await h.client.getState(id);
  expect(state.stages['approve']!.error).toContain(
    `approval ${first!.id} (note) was rejected by cat: not now; the stage stops on rejection`,
  );
  expect(state.stages['after']!.status).toBe('skipped');
  expect(state.approvals!.map((r) => [r.status, r.decidedBy])).toEqual(
    expect.arrayContaining([
      ['rejected', 'cat'],
      ['rejected', 'treadle'],
    ]),
  );
}, 90_000);

it('expires requests after their TTL (treated as rejected: the step is skipped and the run goes on)', async () => {
  const id = h.id('expire');
  await h.client.start(approvalPipeline(`approvals-expire-${h.taskQueue}`, { ttl: '2s' }), draftOf(['late']), { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const state = await h.client.getState(id);
  expect(state.stages['approve']!.status).toBe('skipped');
  expect(state.stages['after']!.status).toBe('completed');
  expect(state.approvals![0]).toMatchObject({ status: 'expired', decidedBy: 'treadle' });
  expect(state.events.map((e) => e.type)).toContain('ApprovalExpired');
}, 60_000);

it('escalates after the TTL to the escalation group, then applies its default decision', async () => {
  const id = h.id('escalate');
  await h.client.start(
    approvalPipeline(`approvals-escalate-${h.taskQueue}`, {
      ttl: '1s',
      reviewers: 'team',
      escalation: { to: 'leads', ttl: '2s', default: 'approve' },
    }),
    draftOf(['urgent']),
    { id },
  );
  const escalated = await eventually(
    async () => (await h.client.listApprovals()).find((r) => r.itemId === id && r.escalated),
    30_000,
    'the escalation to show in the listing',
  );
  expect(escalated.reviewers).toBe('leads');
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const artefact = await artefactOf(id);
  expect(artefact.requests[0]).toMatchObject({ status: 'approved', decidedBy: 'treadle', result: { noted: 'urgent' } });
  const types = (await h.client.getState(id)).events.map((e) => e.type);
  expect(types.indexOf('ApprovalEscalated')).toBeLessThan(types.indexOf('ApprovalDecided'));
}, 60_000);

it('approve list shows an escalated request: who it is escalated to and its new expiry', async () => {
  const id = h.id('escalated-list');
  const name = `approvals-escalated-list-${h.taskQueue}`;
  await h.client.start(
    approvalPipeline(name, {
      ttl: '1s',
      reviewers: 'team',
      escalation: { to: 'leads', ttl: '10m', default: 'reject' },
    }),
    draftOf(['late one']),
    { id },
  );
  const escalated = await eventually(
    async () => (await h.client.listApprovals()).find((r) => r.itemId === id && r.escalated),
    30_000,
    'the escalation to show in the listing',
  );
  const list = await runTreadle(h, ['approve', 'list', '--pipeline', name]);
  expect(list.code).toBe(0);
  const row = list.stdout.split('\n').find((l) => l.startsWith(escalated.id))!;
  expect(row).toMatch(
    new RegExp(
      `^${escalated.id} +${id} +approve +note +escalated to leads +expires ${escalated.expiresAt!.slice(0, 19).replace('T', ' ')} +note "late one"$`,
    ),
  );
  // The new expiry is the escalation's TTL after the first one ran out, not the first one.
  expect(Date.parse(escalated.expiresAt!) - Date.parse(escalated.createdAt)).toBeGreaterThan(9 * 60_000);
  await h.client.decideApproval(escalated.id, 'approve', { by: 'lead' });
  expect((await h.client.result(id)).status).toBe('completed');
}, 60_000);

it('refuses an action type the worker lacks before the first stage runs, with a did-you-mean', async () => {
  // The client starts what the CLI would refuse: the worker's own check must catch it (run --custom-worker).
  const id = h.id('unknown-action');
  await h.client.start(approvalPipeline(`approvals-unknown-${h.taskQueue}`, { action: 'nots' }), draftOf(['alpha']), {
    id,
  });
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  expect(result.error).toContain('unknown action type "nots" (did you mean "note"?)');
  const state = await h.client.getState(id);
  expect(state.stages['draft']?.attempts ?? []).toEqual([]);
});

it('refuses invalid payloads when the requests are made, listing every problem, and makes no request', async () => {
  const id = h.id('invalid');
  await h.client.start(
    approvalPipeline(`approvals-invalid-${h.taskQueue}`, {}),
    { script: { draft: [{ output: { notes: [{ title: 'ok' }, { title: '' }, {}] } }] } },
    { id },
  );
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  const state = await h.client.getState(id);
  expect(state.stages['approve']!.error).toBe(
    'approve cannot make its approval requests (2 problems): draft.notes[1]: title: must be a non-empty string; draft.notes[2]: title: must be a non-empty string',
  );
  expect(state.approvals ?? []).toEqual([]);
}, 60_000);

it('a decision by signal works for temporal CLI users; an invalid one is recorded and changes nothing', async () => {
  const id = h.id('signal');
  await h.client.start(approvalPipeline(`approvals-signal-${h.taskQueue}`, {}), draftOf(['by signal']), { id });
  const [request] = await pendingOf(id, 1);
  const handle = h.temporal.workflow.getHandle(id);
  await handle.signal('approval', { id: request!.id, decision: 'maybe' });
  await handle.signal('approval', { id: request!.id, decision: 'approve', by: 'cli-user' });
  expect((await h.client.result(id)).status).toBe('completed');
  const state = await h.client.getState(id);
  expect(state.approvals![0]).toMatchObject({ status: 'approved', decidedBy: 'cli-user' });
  expect(state.events.find((e) => e.type === 'ApprovalInputRejected')?.message).toBe(
    'invalid decision: decision: must be "approve" or "reject", got "maybe"',
  );
}, 60_000);

describe('the approve commands', () => {
  // Other test files share the server and may leave requests pending: the batch takes this test's pipeline only.
  it('lists, approves and rejects by id, and reviews every pending request in turn in a terminal', async () => {
    const id = h.id('cli');
    await h.client.start(
      approvalPipeline(`approvals-cli-${h.taskQueue}`, { reviewers: 'ops', context: 'Quarterly planning' }),
      draftOf(['alpha', 'beta', 'gamma', 'delta']),
      { id },
    );
    const listed = await pendingOf(id, 4);
    const list = await runTreadle(h, ['approve', 'list', '--pipeline', `approvals-cli-${h.taskQueue}`]);
    expect(list.code).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID +ITEM +STEP +ACTION +REVIEWERS +EXPIRES +WHAT$/);
    for (const r of listed) expect(list.stdout).toContain(`${r.id}  ${id}`);

    const status = await runTreadle(h, ['status', id]);
    expect(status.stdout).toMatch(/approve +waiting_approval +1\/1/);
    expect(status.stdout).toContain('Approval requests:');
    for (const r of listed) expect(status.stdout).toMatch(new RegExp(`${r.id} +approve +note +pending`));

    const [first, second, third, fourth] = listed;
    expect(await runTreadle(h, ['approve', first!.id, '--by', 'dee'])).toEqual({
      code: 0,
      stdout: `${first!.id} (approve of ${id}): approved by dee\n`,
      stderr: '',
    });
    // The same decision again (as after an answer lost to a server failure): the first one's answer, marked.
    expect(await runTreadle(h, ['approve', first!.id, '--by', 'dee'])).toEqual({
      code: 0,
      stdout: `${first!.id} (approve of ${id}): approved by dee (already recorded: sending the same decision again changed nothing)\n`,
      stderr: '',
    });
    const again = await runTreadle(h, ['approve', 'reject', first!.id, '--reason', 'changed my mind']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(
      new RegExp(`^treadle: decision refused: approval request ${first!.id} is already approved \\(by dee at \\d{4}-`),
    );
    expect(await runTreadle(h, ['approve', 'ap-2222222222'])).toMatchObject({
      code: 1,
      stderr:
        'treadle: approval request ap-2222222222 not found: no work item has it (treadle approve list shows the pending ones)\n',
    });

    // The batch lists from visibility, which may lag a decision by a moment: wait until the first is gone.
    await eventually(
      async () => ((await h.client.listApprovals()).some((r) => r.id === first!.id) ? undefined : true),
      20_000,
      'the listing to drop the decided request',
    );
    const batch = await approveBatchInTerminal(
      ['a', 'r', 'not this quarter', 's'],
      { TEMPORAL_ADDRESS: h.address, TREADLE_TASK_QUEUE: h.taskQueue, TREADLE_BLOB_DIR: h.blobs.dir },
      `approvals-cli-${h.taskQueue}`,
    );
    expect(batch.code).toBe(0);
    expect(batch.output).toContain(`[1/3] ${second!.id} · approve of ${id} · note · for ops`);
    expect(batch.output).toContain('context: Quarterly planning');
    expect(batch.output).toContain('"title":');
    expect(batch.output).toContain('1 approved, 1 rejected, 1 skipped');
    const state = await h.client.getState(id);
    const byId = new Map(state.approvals!.map((r) => [r.id, r]));
    expect(byId.get(second!.id)).toMatchObject({ status: 'approved', decidedBy: 'tty-user' });
    expect(byId.get(third!.id)).toMatchObject({
      status: 'rejected',
      decidedBy: 'tty-user',
      reason: 'not this quarter',
    });
    expect(byId.get(fourth!.id)).toMatchObject({ status: 'pending' });

    expect(await runTreadle(h, ['approve', 'reject', fourth!.id, '--by', 'eve', '--reason', 'duplicate'])).toEqual({
      code: 0,
      stdout: `${fourth!.id} (approve of ${id}): rejected by eve\n`,
      stderr: '',
    });
    expect((await h.client.result(id)).status).toBe('completed');
    // Without a terminal the batch refuses rather than waiting on a pipe.
    const piped = await runTreadle(h, ['approve', 'batch']);
    expect(piped).toMatchObject({
      code: 1,
      stderr:
        'treadle: approve batch is interactive and needs a terminal; in scripts use treadle approve <id> or treadle approve reject <id>\n',
    });
  }, 120_000);
});

it('audits a run from its history: steps, attempts, model calls, approval requests, decisions and actions, in order', async () => {
  const id = h.id('audit');
  const raw = {
    name: `audited-${h.taskQueue}`,
    stages: [
      { name: 'draft', run: 'scripted' },
      {
        name: 'summarize',
        type: 'llm',
        agent: 'scripted',
        depends_on: ['draft'],
        with: { prompt: 'Summarize {{ upstream.draft.notes[0].title }}' },
      },
      // Its first reply does not match output_schema: a failed attempt, retried.
      {
        name: 'classify',
        type: 'llm',
        agent: 'scripted',
        depends_on: ['draft'],
        retry_budget: { max_attempts: 2 },
        with: {
          prompt: 'Classify',
          output_schema: { type: 'object', properties: { label: { type: 'string' } }, required: ['label'] },
        },
      },
      {
        name: 'approve',
        type: 'approval',
        depends_on: ['draft', 'summarize', 'classify'],
        with: { action: 'note', from: 'draft', items: 'notes' },
      },
    ],
  };
  await h.client.start(
    raw,
    {
      ...(draftOf(['ship it']) as Record<string, Json>),
      agent_replies: { summarize: ['one note to ship'], classify: [{ kind: 'no label' }, { label: 'ops' }] },
    },
    { id },
  );
  const [request] = await pendingOf(id, 1);
  await h.client.decideApproval(request!.id, 'approve', { by: 'ann', reason: 'looks right' });
  expect((await h.client.result(id)).status).toBe('completed');

  const entries = await h.client.audit(id);
  const lines = entries.map((e) => `${e.kind}|${e.step ?? ''}|${e.message}`);
  const at = (pattern: RegExp) => lines.findIndex((l) => pattern.test(l));
  const order = [
    /^run\|\|started: workItem of pipeline audited-.* \(correlation [0-9a-f-]{36}\)$/,
    /^step\|draft\|draft attempt 1 \(scripted\) completed/,
    /^model_call\|summarize\|scripted\/scripted: success, \d+ in \+ \d+ out tokens, \d+ ms, prompt sha256:/,
    /^step\|summarize\|summarize attempt 1 \(llm\) completed/,
    // The step's own line, then each request, each decision and each action under the step.
    /^step\|approve\|approve attempt 1 \(approval\): 1 request made, waiting for decisions$/,
    new RegExp(`^approval\\|approve\\|${request!.id} requested: note: note "ship it"$`),
    new RegExp(`^approval\\|approve\\|${request!.id} approved by ann: looks right \\(update\\)$`),
    new RegExp(`^approval\\|approve\\|${request!.id} executed: note done: `),
    /^step\|approve\|approve attempt 1 \(approval\) completed: 1 approved, 0 rejected, 0 expired of 1 request$/,
    /^run\|\|finished: completed$/,
  ];
  const positions = order.map(at);
  expect(positions.every((p) => p >= 0)).toBe(true);
  expect([...positions].sort((a, b) => a - b)).toEqual(positions);
  // An llm reply that failed its output_schema is a failed attempt, with the reason; the retry completed.
  expect(lines).toContainEqual(
    expect.stringMatching(
      /^step\|classify\|classify attempt 1 \(llm\) failed: the reply did not match the output schema: .*label/,
    ),
  );
  expect(lines).toContainEqual(expect.stringMatching(/^step\|classify\|classify attempt 2 \(llm\) completed: /));
  expect(lines.some((l) => /^step\|classify\|classify attempt 1 \(llm\) completed/.test(l))).toBe(false);
  // Every line about the approval step names it.
  expect(lines.filter((l) => l.startsWith('approval|') && !l.startsWith('approval|approve|'))).toEqual([]);
  expect(lines.filter((l) => l.includes('treadle.storeArtefact'))).toEqual([]);

  // By correlation id, from the CLI.
  const correlationId = (await h.client.getState(id)).correlationId!;
  const cli = await runTreadle(h, ['audit', correlationId]);
  expect(cli.code).toBe(0);
  expect(cli.stdout.split('\n')[0]).toMatch(/^TIME +KIND +STEP +WHAT$/);
  expect(cli.stdout).toContain(`${request!.id} approved by ann: looks right (update)`);
  expect(await runTreadle(h, ['audit', '00000000-0000-4000-8000-000000000000'])).toMatchObject({
    code: 1,
    stderr: 'treadle: no run has correlation id 00000000-0000-4000-8000-000000000000\n',
  });
}, 60_000);
