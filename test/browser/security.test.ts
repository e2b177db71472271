/// <reference lib="dom" />
/**
 * The review inbox in Chromium, safety (issue 27): a hostile artefact (script tags, an `<img onerror>`, a
 * `javascript:` link, `</script>` inside JSON, a 5 MB line, bidi controls) renders inert and readable; no
 * session means a redirect to the login page or a 401; a cross-origin form POST is refused with 403.
 */
import type { HTTPRequest } from 'puppeteer-core';
import { pipeline } from '../../src/kinds/builder';
import { decisionKey } from '../../src/model/decisions';
import { TEST_IDS } from '../../src/ui/test-ids';
import { eventually } from '../support/harness';
import { inboxSuite, login, openDecision, tid } from '../support/inbox';

jest.setTimeout(180_000);

const PIPELINE = 'browser-security';

const s = inboxSuite();

const BIDI = 'safe\u202Etxt.exe\u202C';
const HOSTILE = {
  summary: '<script>window.__pwned = 1; alert("script")</script>',
  image: '<img src=x onerror="window.__pwned = 2; alert(\'img\')">',
  link: '[click me](javascript:window.__pwned=3)',
  markdown: '# Notes\n\n<script>alert("md")</script>\n\n<img src="http://evil.example/x.png" onerror="alert(1)">',
  json: '</script><script>window.__pwned = 4; alert("json")</script>',
  bidi: BIDI,
  long: 'L'.repeat(5 * 1024 * 1024),
};

it('renders a hostile artefact inert and readable: no dialog, no script, no request off 127.0.0.1', async () => {
  const spec = pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always');
  const id = s.h.id('hostile');
  await s.h.client.start(spec, { script: { draft: [{ output: HOSTILE }] } }, { id });
  const key = decisionKey(id, 'review', 'draft');
  await eventually(
    async () => (await s.h.client.listPendingDecisions({ pipeline: PIPELINE })).find((d) => d.key === key),
    60_000,
    'the review in the listing',
  );

  const page = await s.browser.newPage();
  const offHost: string[] = [];
  page.on('request', (request: HTTPRequest) => {
    const url = new URL(request.url());
    if (url.protocol !== 'data:' && url.hostname !== '127.0.0.1') offHost.push(request.url());
  });
  await login(page, s.inbox, s.inbox.tokens.alice);
  const opened = await openDecision(page, s.inbox, key, { waitUntil: 'load' });
  expect(opened?.status()).toBe(200);
  await page.waitForSelector(tid(TEST_IDS.artefact));
  // Give an onerror handler or a late script the time it would need to run.
  await new Promise((r) => setTimeout(r, 1000));

  expect(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned)).toBeUndefined();
  expect(offHost).toEqual([]);
  // The artefact (over the detail limit, so shown as text) is one long line, folded: open it as a reviewer would.
  for (const summary of await page.$$('details.long-line > summary')) await summary.click();
  const text = await page.evaluate(() => document.body.innerText);
  expect(text).toContain('window.__pwned = 1');
  expect(text).toContain('onerror');
  expect(text).toContain('</script><script>');
  expect(text).toContain('txt.exe');
  expect(text).toContain('LLLLLLLLLL');
  // No live javascript: link anywhere on the page.
  expect(await page.$$eval('a[href]', (as) => as.map((a) => a.getAttribute('href') ?? ''))).not.toContainEqual(
    expect.stringMatching(/^\s*javascript:/i),
  );
  s.browser.expectClean();
});

it('sends a visitor without a session to the login page and refuses the API with 401, also for a wrong token', async () => {
  const page = await s.browser.newPage();
  await page.goto(s.inbox.url);
  expect(new URL(page.url()).pathname).toBe('/login');
  await page.waitForSelector(tid(TEST_IDS.loginToken));

  expect((await fetch(`${s.inbox.url}api/decisions`)).status).toBe(401);
  const wrong = await fetch(`${s.inbox.url}api/decisions`, { headers: { authorization: 'Bearer not-a-token' } });
  expect(wrong.status).toBe(401);
  const right = await fetch(`${s.inbox.url}api/decisions`, {
    headers: { authorization: `Bearer ${s.inbox.tokens.bob}` },
  });
  expect(right.status).toBe(200);
  const redirect = await fetch(s.inbox.url, { redirect: 'manual' });
  expect([302, 303]).toContain(redirect.status);
  expect(redirect.headers.get('location')).toBe('/login');
  s.browser.expectClean();
});

it('refuses a cross-origin form POST with a valid session with 403', async () => {
  const origin = s.inbox.url.replace(/\/$/, '');
  const signIn = await fetch(`${s.inbox.url}login`, {
    method: 'POST',
    headers: { origin, 'content-type': 'application/json' },
    body: JSON.stringify({ token: s.inbox.tokens.alice }),
  });
  expect(signIn.status).toBe(200);
  const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
  const key = decisionKey('any-item', 'review', 'draft');
  for (const url of [`${s.inbox.url}api/decisions/${encodeURIComponent(key)}`, `${s.inbox.url}api/batch`]) {
    const evil = await fetch(url, {
      method: 'POST',
      headers: { cookie, origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
      body: 'action=approve&keys=x',
    });
    expect(evil.status).toBe(403);
  }
});
