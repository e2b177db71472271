/// <reference lib="dom" />
/**
 * The review inbox for the browser tests: `createInboxServer` in-process on a free port over the harness's
 * client (the production backend), a temporary tokens file with reviewers alice and bob, and sign-in through
 * the real login page.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { GoToOptions, HTTPResponse, Page } from 'puppeteer-core';
import { addToken, tokensFileSource } from '../../src/ui/auth';
import { clientBackend } from '../../src/ui/client-backend';
import { createInboxServer, type InboxServerOptions } from '../../src/ui/server';
import { TEST_IDS } from '../../src/ui/test-ids';
import { launchBrowser, type BrowserSession } from './browser';
import { eventually, startHarness, type Harness, type HarnessOptions } from './harness';

/** A running inbox and its reviewers' tokens. */
export interface TestInbox {
  /** The base address, with a trailing slash. */
  url: string;
  tokens: { alice: string; bob: string };
  tokensFile: string;
  close(): Promise<void>;
}

/** Starts the inbox over `h`'s client; `options` overrides the server's (e.g. `webUiUrl`). */
export async function startInbox(h: Harness, options: Partial<InboxServerOptions> = {}): Promise<TestInbox> {
  const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'inbox-'));
  const tokensFile = path.join(dir, 'ui-tokens');
  const tokens = { alice: addToken(tokensFile, 'alice'), bob: addToken(tokensFile, 'bob') };
  const server = await createInboxServer({
    backend: clientBackend(h.client),
    port: 0,
    auth: { tokens: tokensFileSource(tokensFile) },
    // Short periods so a new or decided item shows within a second or two.
    index: { deltaMs: 300, reconcileMs: 5_000 },
    ...options,
  });
  return { url: server.url, tokens, tokensFile, close: server.close };
}

/** Signs `page` in as the token's reviewer through the login page's `#token=` fragment; waits for the inbox. */
export async function login(page: Page, inbox: TestInbox, token: string): Promise<void> {
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.goto(`${inbox.url}login#token=${token}`)]);
  // The login page posts the token, then moves to the inbox.
  if (new URL(page.url()).pathname === '/login') await page.waitForNavigation({ waitUntil: 'load' });
  await page.waitForSelector(`[data-testid="${TEST_IDS.decisionCount}"]`);
}

/**
 * Puts reviewers in reviewer groups by editing their lines of the tokens file, as an operator would (no new
 * tokens; the inbox reads the file again when it changes), e.g. `{ alice: 'legal', bob: 'leads' }`.
 */
export function assignGroups(inbox: TestInbox, groups: Partial<Record<'alice' | 'bob', string>>): void {
  let text = readFileSync(inbox.tokensFile, 'utf8');
  for (const [name, list] of Object.entries(groups))
    text = text.replace(new RegExp(`^(${name} sha256:\\S+)$`, 'm'), `$1 groups=${list}`);
  writeFileSync(inbox.tokensFile, text, { mode: 0o600 });
}

/**
 * Waits until the inbox's own index lists decision `key`: it follows the cluster a delta behind the client's
 * listing, so a page opened as soon as the client lists a decision can still answer 404 on a loaded machine.
 */
export async function whenListed(inbox: TestInbox, key: string): Promise<void> {
  await eventually(
    async () => {
      const res = await fetch(new URL(`/api/decisions/${encodeURIComponent(key)}`, inbox.url), {
        headers: { authorization: `Bearer ${inbox.tokens.alice}` },
      });
      return res.status === 200 ? true : undefined;
    },
    30_000,
    `${key} in the inbox's index`,
  );
}

/** Opens decision `key`'s page in `page` once the inbox lists it ({@link whenListed}); the page's response. */
export async function openDecision(
  page: Page,
  inbox: TestInbox,
  key: string,
  options?: GoToOptions,
): Promise<HTTPResponse | null> {
  await whenListed(inbox, key);
  return page.goto(`${inbox.url}d/${encodeURIComponent(key)}`, options);
}

/** The keys of the rows the list shows, in order. */
export async function rowKeys(page: Page): Promise<string[]> {
  return page.$$eval(`[data-testid="${TEST_IDS.decisionRow}"]`, (rows) =>
    rows.map((r) => (r as HTMLElement).dataset.key ?? ''),
  );
}

/** A `data-testid` selector. */
export const tid = (id: string): string => `[data-testid="${id}"]`;

/** What a browser test file works with, filled in by {@link inboxSuite}'s `beforeAll`. */
export interface InboxSuite {
  h: Harness;
  browser: BrowserSession;
  /** Started for the file unless `inbox: false`; a test that starts its own assigns it here to have it closed. */
  inbox: TestInbox;
}

/**
 * Registers the hooks every browser test file needs: a harness and Chromium before all tests, the inbox over
 * the harness (unless `inbox: false`), a fresh browser context per test, and everything closed after all.
 */
export function inboxSuite(options: { harness?: HarnessOptions; inbox?: boolean } = {}): InboxSuite {
  const suite = {} as InboxSuite;
  beforeAll(async () => {
    [suite.h, suite.browser] = await Promise.all([startHarness(options.harness), launchBrowser()]);
    if (options.inbox !== false) suite.inbox = await startInbox(suite.h);
  });
  afterEach(async () => {
    await suite.browser.closeContexts();
  });
  afterAll(async () => {
    await suite.browser?.close();
    await suite.inbox?.close();
    await suite.h?.shutdown();
  });
  return suite;
}
