/// <reference lib="dom" />
/**
 * Request changes in Chromium (issue 40): a scripted gate rejects three attempts and escalates; the reviewer
 * clicks Request changes with an empty note (refused on the page, nothing sent), then writes a note and sends
 * it; attempt 4 runs with the note and the gate's last feedback in its feedback, passes its gate, and the item
 * completes with attempt 4's output.
 */
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { inboxSuite, login, openDecision, tid } from '../support/inbox';

jest.setTimeout(180_000);

// Visibility is namespace-wide and test files run one after another on the same server: this file's own name.
const PIPELINE = 'browser-request-changes';

const s = inboxSuite();

it('request changes on an escalated review runs attempt 4 with the note beside the gate feedback', async () => {
  const spec = pipeline(PIPELINE)
    .stage('draft', 'scripted')
    .qualityGate('draft', 'scripted')
    .retryBudget('draft', { maxAttempts: 3, onExhausted: 'escalate' });
  const id = s.h.id('changes');
  const rejected = { verdict: 'rejected', summary: 'numbers missing' };
  // Attempt 4 gives no `output`: the scripted stage's artefact is then the feedback it was handed.
  await s.h.client.start(spec, { script: { draft: [rejected, rejected, rejected, {}] } }, { id });
  const key = decisionKey(id, 'review', 'draft');
  await eventually(
    async () => (await s.h.client.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key),
    60_000,
    'the escalated review in the listing',
  );

  const page = await s.browser.newPage();
  await login(page, s.inbox, s.inbox.tokens.alice);
  await openDecision(page, s.inbox, key);
  await page.waitForSelector(tid(TEST_IDS.actionRequestChanges));

  // No note: the page says so and sends nothing.
  await page.click(tid(TEST_IDS.actionRequestChanges));
  const refused = await page.waitForSelector(`${tid(TEST_IDS.notice)}.error`);
  expect(await refused!.evaluate((el) => el.textContent)).toContain('the note is required');
  expect((await s.h.client.getState(id)).pendingReviews.map((r) => r.stage)).toEqual(['draft']);

  await page.type(tid(TEST_IDS.changesNote), 'Give the speed-up as a percentage.');
  await page.click(tid(TEST_IDS.actionRequestChanges));
  await page.waitForFunction(
    (sel) => [...document.querySelectorAll(sel)].some((el) => el.textContent?.includes('by alice')),
    {},
    tid(TEST_IDS.notice),
  );

  const result = await eventually(
    async () => {
      const r = await s.h.client.result(id);
      return r.status === 'completed' ? r : undefined;
    },
    60_000,
    'the item to complete',
  );
  const state = await s.h.client.getState(id);
  expect(state.stages.draft!.attempts).toHaveLength(4);
  expect(state.stages.draft!.review).toMatchObject({
    reviewer: 'alice',
    kind: 'request_changes',
    note: 'Give the speed-up as a percentage.',
  });
  // What attempt 4's implementation was handed: the note as guidance, and the gate's last feedback.
  expect(await s.h.client.readArtefact(result.artefacts.draft)).toMatchObject({
    attempt: 4,
    feedback: {
      summary: "changes requested by alice; the gate's last feedback: numbers missing",
      guidance: 'Give the speed-up as a percentage.',
      reviewer: 'alice',
    },
  });
  s.browser.expectClean();
});
