/**
 * Stage output schemas on a real Temporal dev server (issue 27): an item keeps its stages' `output_schema:` in
 * its state; a reviewer's edit that breaks it is refused before anything is sent (`checkEdit`, `approveWithEdits`,
 * `decide`, `treadle review --edit` exiting 2), a conforming one flows downstream; a schema that does not
 * compile fails the item at the worker's prepare step, listed with the spec's other problems; an `llm` stage's
 * reply schema (`with.output_schema`) is its edit schema when it has none of its own, and a schema registered on
 * an implementations queue reaches the item's state with the stage's first attempt.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startHarness, eventually, type Harness } from '../support/harness';
import { runTreadle, showRun } from '../support/cli';
import { decisionKey } from '../../src/model/decisions';
import { TreadleError } from '../../src/config/errors';
import { NativeConnection } from '@temporalio/worker';
import { createImplementationsWorker, defaultRegistry } from '../../src/worker';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});

const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'output-schema-'));
const schema = {
  type: 'object',
  required: ['title', 'body'],
  additionalProperties: false,
  properties: { title: { type: 'string', minLength: 1 }, body: { type: 'string' } },
};
const reviewed = {
  name: 'schema-review',
  stages: [
    { name: 'draft', run: 'scripted', review_policy: 'always', output_schema: schema },
    { name: 'publish', run: 'scripted', depends_on: ['draft'] },
  ],
};
const bad = { title: 7, extra: true };

const waitingReview = (id: string) =>
  eventually(async () => {
    const state = await h.client.getState(id);
    return state.status === 'waiting_review' ? state : undefined;
  });

/** `bad` as an edit of `draft` of `id`: the schema check lists its problem, and approving with it is refused. */
async function expectEditRefused(id: string): Promise<void> {
  const key = decisionKey(id, 'review', 'draft');
  expect(await h.client.checkEdit(key, bad)).toEqual(
    expect.arrayContaining([{ path: '/title', message: 'must be string' }]),
  );
  await expect(h.client.approveWithEdits(id, 'draft', bad)).rejects.toThrow("does not match the stage's output schema");
}

it('refuses an edit that breaks the schema before sending it, and sends a conforming one downstream', async () => {
  const id = h.id('schema');
  await h.client.start(reviewed, null, { id });
  const waiting = await waitingReview(id);
  expect(waiting.outputSchemas).toEqual({ draft: schema });

  const key = decisionKey(id, 'review', 'draft');
  expect(await h.client.checkEdit(key, bad)).toEqual(
    expect.arrayContaining([
      { path: '', message: "must have required property 'body'" },
      { path: '', message: 'must NOT have additional properties: extra' },
      { path: '/title', message: 'must be string' },
    ]),
  );
  expect(await h.client.checkEdit(key, { title: 't', body: 'b' })).toEqual([]);

  const refused = await h.client.approveWithEdits(id, 'draft', bad).catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(TreadleError);
  expect((refused as TreadleError).code).toBe('invalid_input');
  expect((refused as TreadleError).message).toMatch(
    /^the edited draft of .* does not match the stage's output schema:/,
  );
  expect((refused as TreadleError).problems).toEqual(expect.arrayContaining(['/title: must be string']));
  await expect(h.client.decide(key, { action: 'edit', artefact: bad }, 'ana')).rejects.toThrow(
    "does not match the stage's output schema",
  );

  const file = path.join(dir, 'bad-edit.json');
  writeFileSync(file, JSON.stringify(bad));
  const cli = await runTreadle(h, ['review', id, 'draft', '--edit', file]);
  expect(cli.code).toBe(2);
  expect(cli.stderr).toContain('/title: must be string');
  expect(cli.stderr).toContain("(the whole artefact): must have required property 'body'");

  // Nothing was sent: the stage still waits, with no review recorded.
  const still = await h.client.getState(id);
  expect(still.status).toBe('waiting_review');
  expect(still.stages.draft!.review).toBeUndefined();

  const good = { title: 'Edited', body: 'conforms' };
  await h.client.approveWithEdits(id, 'draft', good, { reviewer: 'ana' });
  expect((await h.client.result(id)).status).toBe('completed');
  const done = await h.client.getState(id);
  expect(done.stages.draft!.artefact).toEqual(good);
  expect((done.stages.publish!.artefact as { upstream: unknown }).upstream).toEqual({ draft: good });
});

it("checks an llm stage's edit against its reply's with.output_schema when it gives no output_schema: of its own (issue 37 §5)", async () => {
  const id = h.id('llm-reply-schema');
  const spec = {
    name: 'llm-reply-schema',
    stages: [
      {
        name: 'draft',
        run: 'llm',
        review_policy: 'always',
        with: { agent: 'scripted', prompt: 'Write a post.', output_schema: schema },
      },
    ],
  };
  await h.client.start(spec, null, { id });
  const waiting = await waitingReview(id);
  expect(waiting.outputSchemas).toEqual({ draft: schema });
  await expectEditRefused(id);
  const good = { title: 'Edited', body: 'conforms' };
  await h.client.approveWithEdits(id, 'draft', good, { reviewer: 'ana' });
  expect((await h.client.result(id)).status).toBe('completed');
  expect((await h.client.getState(id)).stages.draft!.artefact).toEqual(good);
});

it('keeps the output schema a stage registered on an implementations queue, for edits of its artefact (issue 37 §5)', async () => {
  const queue = `${h.taskQueue}-impl`;
  const connection = await NativeConnection.connect({ address: h.address });
  const registry = defaultRegistry().stage(
    'outline',
    async () => ({ outcome: 'completed', artefact: { title: 'Outline', body: 'three parts' } }),
    { outputSchema: schema },
  );
  const worker = await createImplementationsWorker({
    connection,
    registry,
    blobs: h.blobs,
    callLog: null,
    implementationsQueue: queue,
  });
  const running = worker.run();
  try {
    const id = h.id('registered-schema');
    const spec = {
      name: 'registered-schema',
      stages: [{ name: 'draft', run: 'outline', task_queue: queue, review_policy: 'always' }],
    };
    await h.client.start(spec, null, { id });
    const waiting = await waitingReview(id);
    expect(waiting.outputSchemas).toEqual({ draft: schema });
    await expectEditRefused(id);
    await h.client.approveWithEdits(id, 'draft', { title: 'Edited', body: 'conforms' }, { reviewer: 'ana' });
    expect((await h.client.result(id)).status).toBe('completed');
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
  }
});

it("fails an item whose output_schema does not compile at the worker's prepare step, with the other problems", async () => {
  const id = h.id('bad-schema');
  const spec = {
    name: 'bad-schema',
    stages: [{ name: 'draft', run: 'scripted', output_schema: { type: 'object', requird: ['title'] } }],
  };
  await h.client.start(spec, null, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  const state = await h.client.getState(id);
  expect(state.problems).toEqual([
    expect.stringMatching(/^stage draft: output_schema: does not compile: unknown keyword: "requird"/),
  ]);
});

it('treadle validate lists a schema that does not compile with the other problems (exit 1, as every invalid spec)', async () => {
  const file = path.join(dir, 'bad.yaml');
  writeFileSync(file, 'name: bad\nstages:\n  - name: a\n    run: scriptd\n    output_schema: { type: objekt }\n');
  const run = await runTreadle(h, ['validate', file]);
  expect(run.code).toBe(1);
  expect(run.stderr + run.stdout).toMatch(/stage a: unknown stage implementation "scriptd"/);
  expect(run.stderr + run.stdout).toMatch(
    /stage a: output_schema: does not compile: schema is invalid: \/type must be/,
  );
  expect(showRun(run)).not.toMatch(/TypeError|at Object/);
});
