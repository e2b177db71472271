/// <reference lib="dom" />
/**
 * Headless Chromium for the review inbox's browser tests (test/browser/): one browser per test file, a fresh
 * incognito context per test, and a record of everything that went wrong in the page (console errors, page
 * errors, failed requests, dialogs) that {@link BrowserSession.expectClean} turns into a test failure.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import puppeteer, { type Browser, type BrowserContext, type Page } from 'puppeteer-core';

/** The Chromium to drive: `TREADLE_CHROMIUM`, else /usr/bin/chromium, else `chromium` on PATH. */
export function chromiumPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.TREADLE_CHROMIUM) {
    if (!existsSync(env.TREADLE_CHROMIUM)) throw new Error(`TREADLE_CHROMIUM=${env.TREADLE_CHROMIUM} does not exist`);
    return env.TREADLE_CHROMIUM;
  }
  if (existsSync('/usr/bin/chromium')) return '/usr/bin/chromium';
  try {
    const found = execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim();
    if (found) return found;
  } catch {
    // not on PATH: the error below says how to install it
  }
  // Never a skip: the inbox's flows are part of the suite, so a machine without Chromium fails loudly.
  throw new Error(
    'no Chromium for the browser tests: run .ci/run (it installs chromium and fonts-dejavu-core), or `apt-get install chromium`, or set TREADLE_CHROMIUM to its path',
  );
}

/** One thing that went wrong in a page. */
export interface PageProblem {
  kind: 'console' | 'pageerror' | 'requestfailed' | 'dialog';
  text: string;
}

/** A browser for one test file. */
export interface BrowserSession {
  browser: Browser;
  /** A fresh incognito context and a page in it (1280×800), watched for problems. */
  newPage(): Promise<Page>;
  /**
   * The next dialog `page` opens is expected (a confirmation the test answers), not a problem: it is accepted or
   * dismissed as `answer` says, and the promise resolves with its message.
   */
  expectDialog(page: Page, answer: 'accept' | 'dismiss'): Promise<string>;
  /** What went wrong in the pages of this test so far. */
  problems: PageProblem[];
  /** Fails when anything went wrong in a page since the last call (then starts a new record). */
  expectClean(): void;
  /** Closes this test's contexts (call in afterEach). */
  closeContexts(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A request that ends because the page navigated away (the event stream, a fetch cut short by a reload) is
 * aborted by the browser itself: not a failure of the page.
 */
const navigationAbort = (errorText: string | undefined): boolean => errorText === 'net::ERR_ABORTED';

/** Launches Chromium headless; one per test file. */
export async function launchBrowser(): Promise<BrowserSession> {
  const browser = await puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    // uid 0 (CI runs as root) needs --no-sandbox; /dev/shm is small in containers.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--font-render-hinting=none'],
  });
  const problems: PageProblem[] = [];
  let contexts: BrowserContext[] = [];
  /** Each page's expected dialogs, answered in order. */
  const expectedDialogs = new WeakMap<Page, { answer: 'accept' | 'dismiss'; said: (message: string) => void }[]>();
  const session: BrowserSession = {
    browser,
    problems,
    async newPage() {
      const context = await browser.createBrowserContext();
      contexts.push(context);
      const page = await context.newPage();
      await page.setViewport({ width: 1280, height: 800 });
      page.on('console', (message) => {
        const where = message.location().url;
        if (message.type() === 'error')
          problems.push({ kind: 'console', text: `${message.text()}${where ? ` (${where})` : ''}` });
      });
      page.on('pageerror', (error) => problems.push({ kind: 'pageerror', text: String(error) }));
      page.on('requestfailed', (request) => {
        const failure = request.failure()?.errorText;
        if (!navigationAbort(failure)) problems.push({ kind: 'requestfailed', text: `${request.url()}: ${failure}` });
      });
      page.on('dialog', (dialog) => {
        const expected = expectedDialogs.get(page)?.shift();
        if (expected) {
          expected.said(dialog.message());
          void (expected.answer === 'accept' ? dialog.accept() : dialog.dismiss()).catch(() => undefined);
          return;
        }
        // A dialog nobody expected: a hostile artefact's alert() must fail the test, and must not hang it.
        problems.push({ kind: 'dialog', text: `${dialog.type()}: ${dialog.message()}` });
        void dialog.dismiss().catch(() => undefined);
      });
      return page;
    },
    expectDialog(page, answer) {
      return new Promise<string>((said) => {
        const queue = expectedDialogs.get(page) ?? [];
        queue.push({ answer, said });
        expectedDialogs.set(page, queue);
      });
    },
    expectClean() {
      const seen = problems.splice(0);
      expect(seen).toEqual([]);
    },
    async closeContexts() {
      // A test that failed early leaves its problems: they are its own, not the next test's.
      problems.splice(0);
      const closing = contexts;
      contexts = [];
      await Promise.all(closing.map((c) => c.close().catch(() => undefined)));
    },
    async close() {
      await session.closeContexts();
      await browser.close();
    },
  };
  return session;
}
