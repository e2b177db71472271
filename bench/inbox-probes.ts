/**
 * What the review inbox scenario (bench/scenarios/inbox.ts) measures with: a worker process's resident memory
 * sampled every second from /proc, the inbox's HTTP API called as a script would (bearer token, real HTTP),
 * and the first screen as a reviewer's browser loads it (puppeteer-core and the system's Chromium).
 */
import puppeteer, { type Browser } from 'puppeteer-core';
import { chromiumPath } from '../test/support/browser';
import { TEST_IDS } from '../src/ui/test-ids';
import { SESSION_COOKIE } from '../src/ui/server';
import { residentMiB } from './cpu';
import { median, round } from './statistics';
import { nowMs } from './scenario';

/** The browser's flags: those of the inbox's browser tests (no sandbox in containers, no GPU, small /dev/shm). */
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'];
const ROW_SELECTOR = `[data-testid="${TEST_IDS.decisionRow}"]`;
/** A first screen that takes longer than this is broken, not slow. */
const FIRST_SCREEN_TIMEOUT_MS = 60_000;

/** Resident memory of one process over a run: every sample, the peak, and the median of a settled window. */
export interface RssSummary {
  peakMiB: number;
  /** Median over {@link RssSampler.settle}'s window: everything started and waiting, nothing else going on. */
  settledMiB: number;
  /** One sample a second, MiB. */
  samples: number[];
}

/** Samples a process's VmRSS once a second until stopped. */
export class RssSampler {
  private readonly samples: { at: number; miB: number }[] = [];
  private readonly timer: NodeJS.Timeout;
  private settledFrom = Number.NaN;
  private settledTo = Number.NaN;

  constructor(private readonly pid: number) {
    this.sample();
    this.timer = setInterval(() => this.sample(), 1_000);
    this.timer.unref();
  }

  /** Samples for `ms` with nothing else started: the settled window. */
  async settle(ms: number): Promise<void> {
    this.settledFrom = nowMs();
    await new Promise((r) => setTimeout(r, ms));
    this.sample();
    this.settledTo = nowMs();
  }

  stop(): RssSummary {
    clearInterval(this.timer);
    this.sample();
    const all = this.samples.map((s) => s.miB);
    const settled = this.samples.filter((s) => s.at >= this.settledFrom && s.at <= this.settledTo).map((s) => s.miB);
    return {
      peakMiB: all.length > 0 ? Math.max(...all) : Number.NaN,
      settledMiB: settled.length > 0 ? round(median(settled), 1) : Number.NaN,
      samples: all,
    };
  }

  private sample(): void {
    const miB = residentMiB(this.pid);
    if (miB !== null) this.samples.push({ at: nowMs(), miB });
  }
}

/** The inbox's HTTP API as a script calls it: a bearer token on every request. */
export class InboxApi {
  constructor(
    readonly url: string,
    private readonly token: string,
  ) {}

  /** GET `path` (with its query); throws unless the answer is 200. */
  async get<T>(path: string): Promise<T> {
    const response = await fetch(new URL(path, this.url), { headers: { authorization: `Bearer ${this.token}` } });
    if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  }

  /** POST a JSON body to `path`; throws unless the answer is 200. */
  async post<T>(path: string, body: unknown): Promise<T> {
    const response = await fetch(new URL(path, this.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.status !== 200) throw new Error(`POST ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  }

  /** Signs in with the token as the page's login form does; the signed session cookie's value. */
  async session(): Promise<string> {
    const response = await fetch(new URL('/login', this.url), {
      method: 'POST',
      headers: { origin: new URL(this.url).origin, 'content-type': 'application/json' },
      body: JSON.stringify({ token: this.token }),
    });
    const cookie = response.headers.getSetCookie().find((c) => c.startsWith(`${SESSION_COOKIE}=`));
    if (response.status !== 200 || !cookie) throw new Error(`login: ${response.status} ${await response.text()}`);
    return cookie.slice(SESSION_COOKIE.length + 1).split(';')[0]!;
  }
}

/**
 * The browser tests' Chromium (`TREADLE_CHROMIUM`, /usr/bin/chromium, or `chromium` on PATH; an error saying how to
 * install one otherwise), headless, with their flags.
 */
export function launchChromium(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: CHROMIUM_ARGS,
  });
}

/**
 * One first screen: a fresh browser context holding the reviewer's session, `goto /`, until the `rows`-th
 * decision row is in the DOM. Milliseconds from the navigation's start; the context is not part of it.
 */
export async function firstScreenMs(browser: Browser, url: string, session: string, rows: number): Promise<number> {
  const context = await browser.createBrowserContext();
  try {
    await context.setCookie({ name: SESSION_COOKIE, value: session, domain: new URL(url).hostname, path: '/' });
    const page = await context.newPage();
    const started = nowMs();
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: FIRST_SCREEN_TIMEOUT_MS });
    // A string: the bench compiles without the DOM's types, and this runs in the page.
    await page.waitForFunction(`document.querySelectorAll('${ROW_SELECTOR}').length >= ${rows}`, {
      timeout: FIRST_SCREEN_TIMEOUT_MS,
    });
    return nowMs() - started;
  } finally {
    await context.close();
  }
}
