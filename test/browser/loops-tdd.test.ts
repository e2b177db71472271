/// <reference lib="dom" />
/**
 * The review inbox in Chromium, loops and TDD nodes (issue 27): a loop stage whose iteration crashed is resumed
 * from its page and completes, its state recording the signed-in reviewer; a TDD node stuck in Impl gets a
 * guidance note from its page and goes on with it to a merge.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Json } from '../../src/model/shapes';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { inboxSuite, login, openDecision, tid } from '../support/inbox';
import { leaf, tddRepos, type TddRepos } from '../support/tdd-fixtures';
import { fixedLoopSpec, loopReply } from '../support/pipelines';

jest.setTimeout(180_000);

const PIPELINE = 'browser-loops';

let repos: TddRepos;
let workspace: string;
const saved = { workspace: process.env.TREADLE_LOOP_WORKSPACE, commands: process.env.TREADLE_LOOP_COMMANDS };
// Before the suite's hooks: the loop's run folder and the TDD repositories, read by the worker it starts.
beforeAll(() => {
  workspace = mkdtempSync(path.join(os.tmpdir(), 'browser-loops-'));
  process.env.TREADLE_LOOP_WORKSPACE = workspace;
  process.env.TREADLE_LOOP_COMMANDS = JSON.stringify([['test', '-s']]);
  repos = tddRepos('browser-tdd-');
});
const s = inboxSuite();
// After them: the worker is gone.
afterAll(() => {
  repos?.remove();
  for (const [key, value] of [
    ['TREADLE_LOOP_WORKSPACE', saved.workspace],
    ['TREADLE_LOOP_COMMANDS', saved.commands],
  ] as const) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  rmSync(workspace, { recursive: true, force: true });
});

it('resumes a failed loop from its page: it completes, and its state says alice resumed it', async () => {
  const id = s.h.id('loop');
  const spec = fixedLoopSpec(PIPELINE, 2);
  await s.h.client.start(
    spec,
    // Iteration 2's agent crashes (a crash is not retried: the loop fails); the resumed iteration 2 gets reply 2.
    { agent_replies: { work: [loopReply(1), { crash: 'agent exited with code 1' }, loopReply(2)] } },
    { id },
  );
  const pending = await eventually(
    async () =>
      (await s.h.client.listPendingDecisions({ pipeline: PIPELINE, kinds: ['loop'] })).find((d) => d.itemId === id),
    60_000,
    'the failed loop in the listing',
  );

  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.alice);
  const opened = await openDecision(page, s.inbox, pending.key);
  expect(opened?.status()).toBe(200);
  await page.click(tid(TEST_IDS.actionResume));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice));
  expect(await notice!.evaluate((el) => el.textContent)).toContain('by alice');

  const result = await s.h.client.result(id);
  expect(result.status).toBe('completed');
  const [loop] = await s.h.client.loops(id);
  expect(loop?.state.lastResume).toMatchObject({ action: 'resume', iteration: 2, by: 'alice' });
  s.browser.expectClean();
});

it('sends guidance to a stuck TDD node from its page: the node reruns Impl with it and merges', async () => {
  const l = leaf('browserstuck');
  const repo = await repos.create('browserstuck');
  const id = s.h.id('tdd');
  const replies: Record<string, Json[]> = {
    'browserstuck.scaffold': [l.initWork],
    'browserstuck.tddWriteTests': [l.testsReady],
    'browserstuck.impl': [l.stuck, l.testsPassed],
    'browserstuck.tddReviewImpl': [l.approved],
    'browserstuck.merger': [l.mergeComplete],
  };
  await s.h.client.startTdd(l.spec, { repo, id, replies });
  const pending = await eventually(
    async () => (await s.h.client.listPendingDecisions({ kinds: ['tdd'] })).find((d) => d.itemId === id),
    90_000,
    'the stuck node in the listing',
  );

  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.bob);
  const opened = await openDecision(page, s.inbox, pending.key);
  expect(opened?.status()).toBe(200);
  await page.type(tid(TEST_IDS.guidance), '1 is the number one: return it');
  await page.click(tid(TEST_IDS.actionGuidance));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice));
  expect(await notice!.evaluate((el) => el.textContent)).toContain('by bob');

  expect(await s.h.client.tddResult(id)).toMatchObject({ status: 'merged' });
  const routes = (await s.h.client.events(id)).filter((e) => e.type === 'NodeRouted').map((e) => e.message);
  expect(routes).toContain('→ impl (attempt 1): guidance from a human');
  s.browser.expectClean();
});
