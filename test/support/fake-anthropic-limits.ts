/**
 * The rate limits the fake Anthropic server enforces, per model, and the counts tests assert on: what a real
 * key would have seen. Used by `fake-anthropic.ts`; see `FakeLimitOptions` there for how a test turns them on.
 *
 * Counting follows Anthropic's documented behaviour: a request counts against requests per minute when it is
 * admitted, its input tokens when it arrives, its output tokens when the reply is sent. Windows slide (the
 * last `windowMs`), so "never over the limit in any window" is exactly what `maxWindowTokens` measures.
 * A request is admitted only if every limit of its model holds with it counted, so an admitted request over a
 * limit cannot happen; a request that arrives over one is a violation, answered 429.
 */

/** The limits of one model; an unset limit does not apply. */
export interface FakeModelLimits {
  /** Requests in flight at once (arrived, not yet answered). */
  maxConcurrent?: number;
  /** Requests admitted per window. */
  requestsPerMinute?: number;
  /** Input plus output tokens per window (input counts `cache_creation_input_tokens`, not cache reads). */
  tokensPerMinute?: number;
}

/** How the fake shapes traffic. Every field is optional; `{}` is the fake without limits. */
export interface FakeLimitOptions {
  /** Limits by model name; `'*'` applies to each model without an entry of its own (counted per model). */
  limits?: Record<string, FakeModelLimits>;
  /** Length of the sliding window of the per-minute limits, in ms (default 60 000; tests shorten it). */
  windowMs?: number;
  /** Every admitted request waits this long before its reply, in ms (on top of a `slow` reply's delay). */
  latencyMs?: number;
  /** Every message reply reports this many tokens, a fifth of them output (over what its script says). */
  tokensPerReply?: number;
  /** Answer every request 529 `overloaded_error`, as Anthropic does when it is overloaded. */
  overloaded?: boolean;
  /** Also send `retry-after-ms` with a 429 (Anthropic sends only whole-second `retry-after`; the SDK reads both). */
  retryAfterMsHeader?: boolean;
  /** The clock the windows read, in ms (default `Date.now`): a test may drive it by hand. */
  clock?: () => number;
}

/** A limit a request can break. */
export type FakeLimitName = 'concurrency' | 'requests' | 'tokens';

/** Counts for one model. */
export interface FakeModelStats {
  /** Requests that arrived (admitted, answered 429 or 529). */
  requests: number;
  admitted: number;
  /** Requests answered 429 because they arrived over a limit. */
  rateLimited: number;
  /** Requests answered 529 (the `overloaded` mode). */
  overloaded: number;
  /** Requests that arrived over each limit (one request over two limits counts in both). */
  violations: Record<FakeLimitName, number>;
  /** Requests in flight now. */
  inFlight: number;
  /** Most requests in flight at once. */
  maxInFlight: number;
  /** Most requests admitted in any window. */
  maxWindowRequests: number;
  /** Most tokens (input and output) counted in any window. */
  maxWindowTokens: number;
  inputTokens: number;
  outputTokens: number;
}

/** One thing that happened, for tests that look at the shape of a run. */
export interface FakeTimelineEvent {
  /** ms since the fake started or was last reset. */
  atMs: number;
  model: string;
  event: 'admitted' | 'replied' | 'rate_limited' | 'overloaded' | 'finished';
  /** The model's requests in flight and tokens in the window just after the event. */
  inFlight: number;
  windowTokens: number;
  /** Tokens counted by the event (input on `admitted`, output on `replied`); the broken limits on `rate_limited`. */
  tokens?: number;
  limits?: FakeLimitName[];
}

/** What the fake counted since it started or was last reset. */
export interface FakeStats {
  requests: number;
  admitted: number;
  rateLimited: number;
  overloaded: number;
  /** Requests that arrived over each limit, all models together. */
  violations: Record<FakeLimitName, number>;
  /** Requests in flight now, and the most at once, all models together. */
  inFlight: number;
  maxInFlight: number;
  /** The largest `maxWindowRequests` / `maxWindowTokens` of any model. */
  maxWindowRequests: number;
  maxWindowTokens: number;
  models: Record<string, FakeModelStats>;
  /** The first `TIMELINE_LIMIT` events, in order. */
  timeline: FakeTimelineEvent[];
}

/** Whether a request may go on, with the headers its answer carries. */
export type FakeAdmission =
  | { admitted: true; headers: Record<string, string> }
  | { admitted: false; limits: FakeLimitName[]; message: string; headers: Record<string, string> };

/** Keeps a long benchmark's timeline bounded; later events are counted but not listed. */
export const TIMELINE_LIMIT = 100_000;
const DEFAULT_WINDOW_MS = 60_000;
/** When a concurrency slot frees is unknown at arrival; Anthropic's retry-after has whole seconds, so one. */
const CONCURRENCY_RETRY_MS = 1_000;

interface ModelWindow {
  inFlight: number;
  /** Arrival times of admitted requests in the window, oldest first. */
  admissions: number[];
  /** Tokens counted in the window, oldest first. */
  tokens: { at: number; count: number }[];
  stats: Omit<FakeModelStats, 'inFlight'>;
}

/** The fake's limit state: per-model windows, in-flight counts and stats. */
export class FakeRateLimits {
  private options: FakeLimitOptions = {};
  private readonly models = new Map<string, ModelWindow>();
  private inFlight = 0;
  private maxInFlight = 0;
  private timeline: FakeTimelineEvent[] = [];
  private startedAt: number;

  constructor(options: FakeLimitOptions = {}) {
    this.configure(options);
    this.startedAt = this.now();
  }

  /** Replaces the options (fields left out return to their defaults); counts and requests in flight stay. */
  configure(options: FakeLimitOptions): void {
    for (const [model, limits] of Object.entries(options.limits ?? {}))
      for (const [name, value] of Object.entries(limits))
        if (value !== undefined && !(Number.isInteger(value) && value > 0))
          throw new Error(`fake-anthropic: limits['${model}'].${name} must be a positive integer, not ${value}`);
    for (const name of ['windowMs', 'latencyMs', 'tokensPerReply'] as const) {
      const value = options[name];
      if (value !== undefined && !(Number.isFinite(value) && value >= 0))
        throw new Error(`fake-anthropic: ${name} must be a number ≥ 0, not ${value}`);
    }
    this.options = { ...options };
  }

  get latencyMs(): number {
    return this.options.latencyMs ?? 0;
  }

  get overloaded(): boolean {
    return this.options.overloaded === true;
  }

  /** The usage every message reply reports over its script's, when `tokensPerReply` is set. */
  get replyUsage(): { input_tokens: number; output_tokens: number } | undefined {
    const total = this.options.tokensPerReply;
    if (total === undefined) return undefined;
    const output = Math.round(total / 5);
    return { input_tokens: total - output, output_tokens: output };
  }

  /** A request for `model` arrives carrying `inputTokens`: admits it (counting it) or says which limits it breaks. */
  arrive(model: string, inputTokens: number): FakeAdmission {
    const now = this.now();
    const window = this.window(model, now);
    const limits = this.limitsOf(model);
    window.stats.requests += 1;

    const broken: FakeLimitName[] = [];
    const windowTokens = sum(window.tokens);
    if (limits.maxConcurrent !== undefined && window.inFlight >= limits.maxConcurrent) broken.push('concurrency');
    if (limits.requestsPerMinute !== undefined && window.admissions.length >= limits.requestsPerMinute)
      broken.push('requests');
    if (limits.tokensPerMinute !== undefined && windowTokens + inputTokens > limits.tokensPerMinute)
      broken.push('tokens');

    if (broken.length > 0) {
      window.stats.rateLimited += 1;
      for (const name of broken) window.stats.violations[name] += 1;
      this.record(now, model, window, 'rate_limited', { limits: broken });
      const retryMs = Math.max(...broken.map((name) => this.retryMs(name, window, limits, inputTokens, now)));
      return {
        admitted: false,
        limits: broken,
        message: this.refusal(broken[0]!, model, limits),
        headers: { ...this.retryHeaders(retryMs), ...this.headers(window, limits, now) },
      };
    }

    window.inFlight += 1;
    this.inFlight += 1;
    window.admissions.push(now);
    window.stats.admitted += 1;
    window.stats.maxInFlight = Math.max(window.stats.maxInFlight, window.inFlight);
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    window.stats.maxWindowRequests = Math.max(window.stats.maxWindowRequests, window.admissions.length);
    window.stats.inputTokens += inputTokens;
    this.count(window, inputTokens, now);
    this.record(now, model, window, 'admitted', { tokens: inputTokens });
    return { admitted: true, headers: this.headers(window, limits, now) };
  }

  /** A reply reporting `outputTokens` is being sent: counts them; returns the headers the reply carries. */
  replied(model: string, outputTokens: number): Record<string, string> {
    const now = this.now();
    const window = this.window(model, now);
    window.stats.outputTokens += outputTokens;
    this.count(window, outputTokens, now);
    this.record(now, model, window, 'replied', { tokens: outputTokens });
    return this.headers(window, this.limitsOf(model), now);
  }

  /** An admitted request is over (answered, dropped or abandoned by its client): its concurrency slot frees. */
  finished(model: string): void {
    const now = this.now();
    const window = this.window(model, now);
    window.inFlight -= 1;
    this.inFlight -= 1;
    this.record(now, model, window, 'finished', {});
  }

  /** A request for `model` is answered 529 (the `overloaded` mode). */
  refusedOverloaded(model: string): void {
    const now = this.now();
    const window = this.window(model, now);
    window.stats.requests += 1;
    window.stats.overloaded += 1;
    this.record(now, model, window, 'overloaded', {});
  }

  /** The headers any answer for `model` carries now: Anthropic's `anthropic-ratelimit-*` for its limits. */
  headersFor(model: string): Record<string, string> {
    const now = this.now();
    return this.headers(this.window(model, now), this.limitsOf(model), now);
  }

  /** A copy of the counts. */
  stats(): FakeStats {
    const models = Object.fromEntries(
      [...this.models].map(([model, window]) => [
        model,
        { ...window.stats, inFlight: window.inFlight, violations: { ...window.stats.violations } },
      ]),
    );
    const all = Object.values(models);
    const total = (pick: (stats: FakeModelStats) => number): number => all.reduce((n, s) => n + pick(s), 0);
    const highest = (pick: (stats: FakeModelStats) => number): number => Math.max(0, ...all.map(pick));
    return {
      requests: total((s) => s.requests),
      admitted: total((s) => s.admitted),
      rateLimited: total((s) => s.rateLimited),
      overloaded: total((s) => s.overloaded),
      violations: {
        concurrency: total((s) => s.violations.concurrency),
        requests: total((s) => s.violations.requests),
        tokens: total((s) => s.violations.tokens),
      },
      inFlight: this.inFlight,
      maxInFlight: this.maxInFlight,
      maxWindowRequests: highest((s) => s.maxWindowRequests),
      maxWindowTokens: highest((s) => s.maxWindowTokens),
      models,
      timeline: [...this.timeline],
    };
  }

  /** Clears counts, windows and the timeline; requests still in flight stay counted as in flight. */
  resetStats(): void {
    for (const [model, window] of this.models) {
      if (window.inFlight === 0) this.models.delete(model);
      else this.models.set(model, { ...emptyWindow(), inFlight: window.inFlight });
    }
    this.maxInFlight = this.inFlight;
    this.timeline = [];
    this.startedAt = this.now();
  }

  private now(): number {
    return (this.options.clock ?? Date.now)();
  }

  private get windowMs(): number {
    return this.options.windowMs ?? DEFAULT_WINDOW_MS;
  }

  private limitsOf(model: string): FakeModelLimits {
    return this.options.limits?.[model] ?? this.options.limits?.['*'] ?? {};
  }

  /** The model's window with entries older than `windowMs` dropped. */
  private window(model: string, now: number): ModelWindow {
    let window = this.models.get(model);
    if (!window) {
      window = emptyWindow();
      this.models.set(model, window);
    }
    const cutoff = now - this.windowMs;
    while (window.admissions.length > 0 && window.admissions[0]! <= cutoff) window.admissions.shift();
    while (window.tokens.length > 0 && window.tokens[0]!.at <= cutoff) window.tokens.shift();
    return window;
  }

  private count(window: ModelWindow, tokens: number, now: number): void {
    if (tokens <= 0) return;
    window.tokens.push({ at: now, count: tokens });
    // A window's total only grows when tokens are added, so its maximum over time is reached at an addition.
    window.stats.maxWindowTokens = Math.max(window.stats.maxWindowTokens, sum(window.tokens));
  }

  /** How long until `limit` would admit the request, in ms. */
  private retryMs(
    limit: FakeLimitName,
    window: ModelWindow,
    limits: FakeModelLimits,
    inputTokens: number,
    now: number,
  ): number {
    if (limit === 'concurrency') return CONCURRENCY_RETRY_MS;
    if (limit === 'requests') {
      // The oldest admissions must leave until one slot is free.
      const leaving = window.admissions[window.admissions.length - limits.requestsPerMinute!];
      return (leaving ?? now) + this.windowMs - now;
    }
    let excess = sum(window.tokens) + inputTokens - limits.tokensPerMinute!;
    for (const entry of window.tokens) {
      excess -= entry.count;
      if (excess <= 0) return entry.at + this.windowMs - now;
    }
    // The request alone is over the limit: no wait admits it; say a whole window.
    return this.windowMs;
  }

  /** `retry-after` in whole seconds, rounded up as Anthropic does, and `retry-after-ms` when asked for. */
  private retryHeaders(retryMs: number): Record<string, string> {
    const ms = Math.max(1, Math.ceil(retryMs));
    return {
      'retry-after': String(Math.ceil(ms / 1000)),
      ...(this.options.retryAfterMsHeader && { 'retry-after-ms': String(ms) }),
    };
  }

  /** Anthropic's `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` for the limits set. */
  private headers(window: ModelWindow, limits: FakeModelLimits, now: number): Record<string, string> {
    const headers: Record<string, string> = {};
    // Reset: when the window is wholly free again (RFC 3339), i.e. when its newest entry leaves it; now if empty.
    const reset = (newest: number | undefined): string =>
      new Date(newest === undefined ? now : newest + this.windowMs).toISOString();
    if (limits.requestsPerMinute !== undefined) {
      headers['anthropic-ratelimit-requests-limit'] = String(limits.requestsPerMinute);
      headers['anthropic-ratelimit-requests-remaining'] = String(
        Math.max(0, limits.requestsPerMinute - window.admissions.length),
      );
      headers['anthropic-ratelimit-requests-reset'] = reset(window.admissions.at(-1));
    }
    if (limits.tokensPerMinute !== undefined) {
      headers['anthropic-ratelimit-tokens-limit'] = String(limits.tokensPerMinute);
      headers['anthropic-ratelimit-tokens-remaining'] = String(
        Math.max(0, limits.tokensPerMinute - sum(window.tokens)),
      );
      headers['anthropic-ratelimit-tokens-reset'] = reset(window.tokens.at(-1)?.at);
    }
    return headers;
  }

  /** The 429's message, worded like Anthropic's (and never like a spend limit, which callers treat as final). */
  private refusal(limit: FakeLimitName, model: string, limits: FakeModelLimits): string {
    const per = `per ${this.windowMs} ms window`;
    switch (limit) {
      case 'concurrency':
        return `fake-anthropic: number of concurrent requests has exceeded your rate limit of ${limits.maxConcurrent} for model ${model}`;
      case 'requests':
        return `fake-anthropic: number of requests has exceeded your rate limit of ${limits.requestsPerMinute} ${per} for model ${model}`;
      case 'tokens':
        return `fake-anthropic: this request would exceed your rate limit of ${limits.tokensPerMinute} input and output tokens ${per} for model ${model}`;
    }
  }

  private record(
    now: number,
    model: string,
    window: ModelWindow,
    event: FakeTimelineEvent['event'],
    extra: Pick<FakeTimelineEvent, 'tokens' | 'limits'>,
  ): void {
    if (this.timeline.length >= TIMELINE_LIMIT) return;
    this.timeline.push({
      atMs: now - this.startedAt,
      model,
      event,
      inFlight: window.inFlight,
      windowTokens: sum(window.tokens),
      ...extra,
    });
  }
}

function emptyWindow(): ModelWindow {
  return {
    inFlight: 0,
    admissions: [],
    tokens: [],
    stats: {
      requests: 0,
      admitted: 0,
      rateLimited: 0,
      overloaded: 0,
      violations: { concurrency: 0, requests: 0, tokens: 0 },
      maxInFlight: 0,
      maxWindowRequests: 0,
      maxWindowTokens: 0,
      inputTokens: 0,
      outputTokens: 0,
    },
  };
}

function sum(entries: readonly { count: number }[]): number {
  return entries.reduce((total, entry) => total + entry.count, 0);
}
