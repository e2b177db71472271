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
import { launchBrowser, type BrowserSession } from '../support/browser';
import { eventually, startHarness, type Harness } from '../support/harness';
import { login, startInbox, tid, type TestInbox } from '../support/inbox';
import { leaf, tddRepos, type TddRepos } from '../support/tdd-fixtures';

jest.setTimeout(180_000);

const PIPELINE = 'browser-loops';

let h: Harness;
let inbox: TestInbox;
let browser: BrowserSession;
let repos: TddRepos;
let workspace: string;
const saved = { workspace: process.env.TREADLE_LOOP_WORKSPACE, commands: process.env.TREADLE_LOOP_COMMANDS };
beforeAll(async () => {
  // The loop's run folder and the TDD repositories, read by the worker this harness starts.
  workspace = mkdtempSync(path.join(os.tmpdir(), 'browser-loops-'));
  process.env.TREADLE_LOOP_WORKSPACE = workspace;
  process.env.TREADLE_LOOP_COMMANDS = JSON.stringify([['test', '-s']]);
  repos = tddRepos('browser-tdd-');
  [h, browser] = await Promise.all([startHarness(), launchBrowser()]);
  inbox = await startInbox(h);
});
afterEach(async () => {
  await browser.closeContexts();
});
afterAll(async () => {
  await browser?.close();
  await inbox?.close();
  await h?.shutdown();
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

/** A scripted loop iteration's reply: output, progress entry and status file, as an agent writes them. */
const reply = (n: number): Json => ({
  output: `# Output ${n}\n`,
  progress: `## Iteration ${n}\n- did step ${n}\n`,
  status: {
    decision: 'continue',
    reason: `iteration ${n}`,
    summary: `summary ${n}`,
    work: { items_completed: [], files_touched: [] },
    errors: [],
  },
});

it('resumes a failed loop from its page: it completes, and its state says alice resumed it', async () => {
  const id = h.id('loop');
  const spec = {
    name: PIPELINE,
    stages: [
      {
        name: 'work',
        run: 'loop',
        with: {
          stage: {
            name: 'work',
            prompt: 'Read ${CTX}. Append to ${PROGRESS}. Write ${OUTPUT}. Report in ${STATUS}.',
            termination: { type: 'fixed' },
          },
          max_iterations: 2,
        },
      },
    ],
  };
  await h.client.start(
    spec,
    // Iteration 2's agent crashes (a crash is not retried: the loop fails); the resumed iteration 2 gets reply 2.
    { agent_replies: { work: [reply(1), { crash: 'agent exited with code 1' }, reply(2)] } },
    { id },
  );
  const pending = await eventually(
    async () =>
      (await h.client.listPendingDecisions({ pipeline: PIPELINE, kinds: ['loop'] })).find((d) => d.itemId === id),
    60_000,
    'the failed loop in the listing',
  );

  const page = await browser.newPage();
  await login(page, inbox, inbox.tokens.alice);
  const opened = await page.goto(`${inbox.url}d/${encodeURIComponent(pending.key)}`);
  expect(opened?.status()).toBe(200);
  await page.click(tid(TEST_IDS.actionResume));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice));
  expect(await notice!.evaluate((el) => el.textContent)).toContain('by alice');

  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const [loop] = await h.client.loops(id);
  expect(loop?.state.lastResume).toMatchObject({ action: 'resume', iteration: 2, by: 'alice' });
  browser.expectClean();
});

it('sends guidance to a stuck TDD node from its page: the node reruns Impl with it and merges', async () => {
  const l = leaf('browserstuck');
  const repo = await repos.create('browserstuck');
  const id = h.id('tdd');
  const replies: Record<string, Json[]> = {
    'browserstuck.scaffold': [l.initWork],
    'browserstuck.tddWriteTests': [l.testsReady],
    'browserstuck.impl': [l.stuck, l.testsPassed],
    'browserstuck.tddReviewImpl': [l.approved],
    'browserstuck.merger': [l.mergeComplete],
  };
  await h.client.startTdd(l.spec, { repo, id, replies });
  const pending = await eventually(
    async () => (await h.client.listPendingDecisions({ kinds: ['tdd'] })).find((d) => d.itemId === id),
    90_000,
    'the stuck node in the listing',
  );

  const page = await browser.newPage();
  await login(page, inbox, inbox.tokens.bob);
  const opened = await page.goto(`${inbox.url}d/${encodeURIComponent(pending.key)}`);
  expect(opened?.status()).toBe(200);
  await page.type(tid(TEST_IDS.guidance), '1 is the number one: return it');
  await page.click(tid(TEST_IDS.actionGuidance));
  const notice = await page.waitForSelector(tid(TEST_IDS.notice));
  expect(await notice!.evaluate((el) => el.textContent)).toContain('by bob');

  expect(await h.client.tddResult(id)).toMatchObject({ status: 'merged' });
  const routes = (await h.client.events(id)).filter((e) => e.type === 'NodeRouted').map((e) => e.message);
  expect(routes).toContain('→ impl (attempt 1): guidance from a human');
  browser.expectClean();
});
