/**
 * The `human` stage kind on a real Temporal dev server (issue 40): a person supplies a stage's output. A pipeline
 * draft → sign_off (human) → publish waits for the person; an output that breaks the stage's output_schema is
 * refused before anything is sent (SDK and `treadle respond`, which exits 2), a conforming one completes the stage
 * and the item; a gate that rejects the person's output asks again for the next attempt with its feedback; and a
 * rejection fails the stage with the person's reason.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startHarness, eventually, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';
import { decisionKey } from '../../src/model/decisions';
import { TreadleError } from '../../src/config/errors';
import { isBlobRef } from '../../src/model/shapes';
import type { WorkItemState } from '../../src/model/state';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});

const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'human-stage-'));
const schema = {
  type: 'object',
  required: ['approved', 'signed_by'],
  additionalProperties: false,
  properties: {
    approved: { type: 'boolean' },
    signed_by: { type: 'string', minLength: 1 },
    notes: { type: 'string' },
  },
};
const signOff = (extra: Record<string, unknown> = {}) => ({
  name: 'human-sign-off',
  stages: [
    { name: 'draft', run: 'scripted' },
    {
      name: 'sign_off',
      run: 'human',
      depends_on: ['draft'],
      output_schema: schema,
      with: { instructions: 'Sign the draft off for legal', reviewers: 'legal' },
      ...extra,
    },
    { name: 'publish', run: 'scripted', depends_on: ['sign_off'] },
  ],
});
const bad = { approved: 'yes', extra: 1 };
const good = { approved: true, signed_by: 'Lee' };

/** The item's state once `sign_off` waits for attempt `attempt` of a person's output. */
const waitingFor = (id: string, attempt = 1) =>
  eventually(async () => {
    const state = await h.client.getState(id);
    const request = state.humanRequests?.find((r) => r.stage === 'sign_off' && r.status === 'pending');
    return request?.attempt === attempt ? state : undefined;
  }, 30_000);

/** How many events the item's history has: a refused answer adds none. */
async function historyLength(id: string): Promise<number> {
  const history = await h.temporal.workflow.getHandle(id).fetchHistory();
  return history.events!.length;
}

it("waits for a person's output, refuses one that breaks the schema before sending, and completes with a good one", async () => {
  const id = h.id('human');
  await h.client.start(signOff(), null, { id });
  await waitingFor(id);

  // Listed like the other kinds, with its reviewer group and what the person is asked.
  const key = decisionKey(id, 'human', 'sign_off');
  const listed = await eventually(async () =>
    (await h.client.listPendingDecisions({ kinds: ['human'] })).find((d) => d.key === key),
  );
  expect(listed).toEqual(
    expect.objectContaining({
      kind: 'human',
      stage: 'sign_off',
      reviewers: 'legal',
      attempt: 1,
      answers: ['respond', 'reject'],
      message: 'Sign the draft off for legal',
    }),
  );
  // Not a stage review: `treadle reviews` leaves it out.
  expect((await h.client.listPendingReviews()).filter((r) => r.itemId === id)).toEqual([]);
  const detail = await h.client.decisionDetail(key);
  expect(detail.outputSchema).toEqual(schema);
  expect(detail.human).toEqual({ attempt: 1, instructions: 'Sign the draft off for legal' });

  const before = await historyLength(id);
  expect(await h.client.checkEdit(key, bad)).toEqual(
    expect.arrayContaining([
      { path: '/approved', message: 'must be boolean' },
      { path: '', message: "must have required property 'signed_by'" },
    ]),
  );
  const refused = await h.client.respond(id, 'sign_off', bad, { reviewer: 'lee' }).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(TreadleError);
  expect((refused as TreadleError).code).toBe('invalid_input');
  expect((refused as TreadleError).problems).toEqual(expect.arrayContaining(['/approved: must be boolean']));
  await expect(h.client.decide(key, { action: 'respond', artefact: bad }, 'lee')).rejects.toThrow(
    "does not match the stage's output schema",
  );
  // Nothing reached the workflow.
  expect(await historyLength(id)).toBe(before);
  expect((await h.client.getState(id)).humanRequests![0]!.status).toBe('pending');

  expect(await h.client.respond(id, 'sign_off', good, { reviewer: 'lee' })).toEqual({
    status: 'decided',
    by: 'lee',
    outcome: 'respond',
  });
  expect((await h.client.result(id)).status).toBe('completed');
  const done = await h.client.getState(id);
  expect(done.stages.sign_off!.artefact).toEqual(good);
  expect((done.stages.publish!.artefact as { upstream: unknown }).upstream).toEqual({ sign_off: good });
  expect(done.events.map((e) => e.type)).toEqual(expect.arrayContaining(['HumanRequested', 'HumanResponded']));
  // Answered: a second answer is "already decided", not an error.
  expect(await h.client.respond(id, 'sign_off', good, { reviewer: 'kim' })).toEqual(
    expect.objectContaining({ status: 'already_decided' }),
  );
});

it("re-opens the wait for the next attempt with the gate's feedback when the gate rejects the person's output", async () => {
  const id = h.id('human-gate');
  const spec = signOff({ gate: 'scripted', retry_budget: { max_attempts: 2 } });
  const input = { script: { sign_off: [{ verdict: 'rejected', summary: 'not dated', criteria: ['dated'] }, {}] } };
  await h.client.start(spec, input, { id });
  await waitingFor(id, 1);
  await h.client.respond(id, 'sign_off', good, { reviewer: 'lee' });

  const again: WorkItemState = await waitingFor(id, 2);
  expect(again.humanRequests![0]).toEqual(
    expect.objectContaining({ attempt: 2, feedback: 'not dated (failed: dated)' }),
  );
  const key = decisionKey(id, 'human', 'sign_off');
  const listed = await eventually(async () =>
    (await h.client.listPendingDecisions({ kinds: ['human'] })).find((d) => d.key === key && d.attempt === 2),
  );
  expect(listed.human).toEqual({ instructions: 'Sign the draft off for legal', feedback: 'not dated (failed: dated)' });
  expect(listed.message).toContain('the gate sent attempt 1 back: not dated');

  // An answer for the attempt that no longer waits is refused, naming the one that does.
  await expect(
    h.temporal.workflow
      .getHandle(id)
      .executeUpdate('respondHuman', { args: [{ stage: 'sign_off', attempt: 1, output: good, by: 'x' }] }),
  ).rejects.toMatchObject({
    cause: { message: expect.stringContaining('waits for attempt 2, not 1: answer attempt 2') },
  });

  const dated = { ...good, notes: 'dated 2026-12-06' };
  await h.client.respond(id, 'sign_off', dated, { reviewer: 'lee' });
  expect((await h.client.result(id)).status).toBe('completed');
  const done = await h.client.getState(id);
  expect(done.stages.sign_off!.artefact).toEqual(dated);
  expect(done.stages.sign_off!.attempts.map((a) => a.verdict?.kind)).toEqual(['rejected', 'accepted']);
});

it('sends a large output by blob reference, and a rejection fails the stage with the reason', async () => {
  const id = h.id('human-large');
  await h.client.start(signOff(), null, { id });
  await waitingFor(id);
  const large = { ...good, notes: 'n'.repeat(20_000) };
  await h.client.respond(id, 'sign_off', large, { reviewer: 'lee' });
  expect((await h.client.result(id)).status).toBe('completed');
  const done = await h.client.getState(id);
  expect(isBlobRef(done.stages.sign_off!.artefact)).toBe(true);
  const history = JSON.stringify(await h.temporal.workflow.getHandle(id).fetchHistory());
  expect(history).not.toContain('n'.repeat(5_000));

  const rejected = h.id('human-reject');
  await h.client.start(signOff(), null, { id: rejected });
  await waitingFor(rejected);
  await h.client.decide(decisionKey(rejected, 'human', 'sign_off'), { action: 'reject', reason: 'not ours' }, 'lee');
  const result = await h.client.result(rejected);
  expect(result.status).toBe('failed');
  expect(JSON.stringify(result)).toContain('rejected by lee: not ours');
});

it('answers through `treadle respond`: a schema violation exits 2 listing the problems, a good output completes', async () => {
  const id = h.id('human-cli');
  await h.client.start(signOff(), null, { id });
  const waiting = await waitingFor(id);
  // The item waits on a person: `watch` stops there (exit 3) and says how to answer.
  expect([waiting.status, waiting.stages.sign_off!.status]).toEqual(['waiting_review', 'waiting_review']);
  const watched = await runTreadle(h, ['watch', id]);
  expect(watched.code).toBe(3);
  expect(watched.stdout).toContain(`treadle respond ${id} sign_off --output @output.json`);
  const before = await historyLength(id);

  const badFile = path.join(dir, 'bad.json');
  writeFileSync(badFile, JSON.stringify(bad));
  const violation = await runTreadle(h, ['respond', id, 'sign_off', '--output', `@${badFile}`]);
  expect(violation.code).toBe(2);
  expect(violation.stderr).toContain('/approved: must be boolean');
  expect(violation.stderr).toContain("(the whole output): must have required property 'signed_by'");
  const notJson = await runTreadle(h, ['respond', id, 'sign_off', '--output', '{approved']);
  expect(notJson.code).toBe(2);
  expect(notJson.stderr).toContain('--output is not valid JSON');
  expect(await historyLength(id)).toBe(before);

  const ok = await runTreadle(h, ['respond', id, 'sign_off', '--output', JSON.stringify(good), '--reviewer', 'lee']);
  expect(ok.code).toBe(0);
  expect(ok.stdout).toBe(`sign_off of ${id}: output supplied by lee\n`);
  expect((await h.client.result(id)).status).toBe('completed');
  const listedAfter = await runTreadle(h, ['respond', id, 'sign_off', '--output', JSON.stringify(good)]);
  expect(listedAfter.code).toBe(1);
  expect(listedAfter.stderr).toContain('answered already by lee');
});
