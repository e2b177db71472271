/**
 * A local fake of the Anthropic Messages API (`POST /v1/messages`) on 127.0.0.1, for tests that drive the
 * real SDK client through `baseURL`. Replies are scripted per request: a queue, then a default; a request
 * with neither gets a 500 naming it, so an unscripted call fails loudly instead of passing by accident.
 * A reply may use the request's tools (`tools`: a tool loop's round) or be computed from the request
 * (`computed`: e.g. from the tool results it carries).
 *
 * Limits (`fake-anthropic-limits.ts`): started with `startFakeAnthropic(options)` or set later with
 * `configure(options)`, the fake enforces per-model limits as a real key does — requests in flight
 * (`maxConcurrent`), `requestsPerMinute` and input+output `tokensPerMinute` over a sliding `windowMs` (60 s by
 * default). Input tokens count when a request arrives, output tokens when its reply is sent; a reply's tokens
 * are what its script reports (`usage`, else 12 in and 7 out), or `tokensPerReply` for every reply. A request
 * over a limit gets 429 `rate_limit_error` with `retry-after` (whole seconds; `retry-after-ms` too with
 * `retryAfterMsHeader`) and the `anthropic-ratelimit-*` headers, and its scripted reply stays queued for the
 * retry. `latencyMs` delays every admitted reply; `overloaded` answers 529 `overloaded_error`. `stats()`
 * counts what a real key would have seen: 429s, violations per limit, the most requests in flight, the most
 * requests and tokens in any window, per model, and a timeline.
 *
 * Without options the fake enforces nothing and adds no header or delay, but still counts. Either way a
 * `computed` reply is worked out when the request arrives (with limits, again at each arrival after a 429).
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FakeRateLimits, type FakeLimitOptions, type FakeStats } from './fake-anthropic-limits';

export type {
  FakeLimitName,
  FakeLimitOptions,
  FakeModelLimits,
  FakeModelStats,
  FakeStats,
  FakeTimelineEvent,
} from './fake-anthropic-limits';

/** Token usage a scripted reply reports; unset fields take small fixed defaults. */
export interface FakeUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

/** One scripted reply. */
export type FakeReply =
  /** A `tool_use` block for the request's forced tool (else its first tool, else `respond`). */
  | { kind: 'tool'; input: unknown; usage?: FakeUsage; stopReason?: string }
  /** A text block. */
  | { kind: 'text'; text: string; usage?: FakeUsage; stopReason?: string }
  /** Calls of the request's tools (`stop_reason` `tool_use`), after an optional text block; ids `toolu_fake_<n>_<i>`. */
  | { kind: 'tools'; uses: { name: string; input: unknown }[]; text?: string; usage?: FakeUsage; stopReason?: string }
  /** The reply `reply` makes of the request (it throws: a 500 naming the error). */
  | { kind: 'computed'; reply: (request: RecordedRequest) => FakeReply }
  /** An API error: `{ type: 'error', error: { type, message, details? } }` with the given status. */
  | {
      kind: 'error';
      status: number;
      type: string;
      message: string;
      details?: Record<string, unknown>;
      headers?: Record<string, string>;
    }
  /** Waits, then replies; the wait ends early and quietly when the client aborts or the fake closes. */
  | { kind: 'slow'; delayMs: number; then: FakeReply }
  /** Destroys the socket without answering: a connection error for the client. */
  | { kind: 'drop' };

/** A request the fake received. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The JSON body, parsed; the raw text when it is not JSON. */
  body: unknown;
}

/** A running fake. */
export interface FakeAnthropic {
  /** Pass as the SDK's `baseURL`. */
  baseURL: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** Queues replies, used one per request in order. */
  enqueue(...replies: FakeReply[]): void;
  /** The reply used when the queue is empty; `undefined` restores the loud 500. */
  setDefault(reply: FakeReply | undefined): void;
  /** Clears the script, the recorded requests and the counts (between tests); the limits stay. */
  reset(): void;
  /** Replaces the limit options (`{}` turns every limit off); counts and requests in flight stay. */
  configure(options: FakeLimitOptions): void;
  /** What the fake counted since it started or was last reset. */
  stats(): FakeStats;
  /**
   * Holds every admitted reply (still counted in flight) until the returned `release` is called, so a test
   * can look at a backlog for as long as it needs instead of racing it; `close` releases them too.
   */
  hold(): () => void;
  /** Stops listening, ends pending slow replies and closes every connection. */
  close(): Promise<void>;
}

const DEFAULT_USAGE = {
  input_tokens: 12,
  output_tokens: 7,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
};

/** A reply once its `computed` parts are worked out: the waits of its `slow` wrappers, then what it sends. */
type FinalReply = Exclude<FakeReply, { kind: 'slow' } | { kind: 'computed' }>;
type MessageReply = Extract<FinalReply, { kind: 'tool' | 'tools' | 'text' }>;

/** Starts a fake on 127.0.0.1 and an ephemeral port, enforcing `options`' limits (none by default). */
export async function startFakeAnthropic(options: FakeLimitOptions = {}): Promise<FakeAnthropic> {
  const limits = new FakeRateLimits(options);
  const requests: RecordedRequest[] = [];
  let queue: FakeReply[] = [];
  let fallback: FakeReply | undefined;
  const waits = new Set<() => void>();
  let held: { until: Promise<void>; release: () => void } | undefined;
  let served = 0;

  const server = createServer((req, res) => {
    void handle(req, res).catch((error: unknown) => {
      if (!res.headersSent && !res.destroyed)
        sendError(res, 500, 'api_error', `fake-anthropic crashed: ${String(error)}`);
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await readBody(req);
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      // Keep the raw text: a test asserting on the body will show what arrived.
    }
    const recorded: RecordedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body };
    requests.push(recorded);
    served += 1;
    const requestId = `req_fake_${served}`;

    if (recorded.method !== 'POST' || recorded.path.split('?')[0] !== '/v1/messages') {
      sendError(
        res,
        404,
        'not_found_error',
        `fake-anthropic serves only POST /v1/messages, not ${recorded.method} ${recorded.path}`,
        requestId,
      );
      return;
    }
    const fromQueue = queue.length > 0;
    const reply = queue.shift() ?? fallback;
    if (!reply) {
      const model = (body as { model?: unknown } | undefined)?.model;
      sendError(
        res,
        500,
        'api_error',
        `fake-anthropic: no scripted reply for request #${requests.length} (POST /v1/messages, model ${String(model)}); enqueue one or set a default`,
        requestId,
      );
      return;
    }
    const model = modelOf(recorded);
    if (limits.overloaded) {
      if (fromQueue) queue.unshift(reply);
      limits.refusedOverloaded(model);
      sendError(res, 529, 'overloaded_error', 'fake-anthropic: Overloaded', requestId, limits.headersFor(model));
      return;
    }
    const { delayMs, final } = workOut(reply, recorded);
    const usage = final.kind === 'error' || final.kind === 'drop' ? undefined : usageOf(final);
    const admission = limits.arrive(model, usage ? inputTokensOf(usage) : 0);
    if (!admission.admitted) {
      // The client retries, and the scripted reply is what that retry must get, as a real API still owes it.
      if (fromQueue) queue.unshift(reply);
      sendError(res, 429, 'rate_limit_error', admission.message, requestId, admission.headers);
      return;
    }
    try {
      if (held) await held.until;
      const waitMs = delayMs + limits.latencyMs;
      if (waitMs === 0 || (await wait(waitMs, res))) send(final, recorded, res, requestId);
    } finally {
      limits.finished(model);
    }
  }

  /** Works out `computed` replies and adds up the delays of `slow` ones, down to what the fake sends. */
  function workOut(reply: FakeReply, request: RecordedRequest): { delayMs: number; final: FinalReply } {
    let delayMs = 0;
    let current = reply;
    for (;;) {
      if (current.kind === 'slow') {
        delayMs += current.delayMs;
        current = current.then;
      } else if (current.kind === 'computed') {
        current = current.reply(request);
      } else {
        return { delayMs, final: current };
      }
    }
  }

  /** The usage a message reply reports: its script's over small defaults, under `tokensPerReply`. */
  function usageOf(reply: MessageReply): Required<FakeUsage> {
    return { ...DEFAULT_USAGE, ...reply.usage, ...limits.replyUsage };
  }

  function send(reply: FinalReply, request: RecordedRequest, res: ServerResponse, requestId: string): void {
    const model = modelOf(request);
    switch (reply.kind) {
      case 'drop':
        res.socket?.destroy();
        return;
      case 'error':
        sendError(
          res,
          reply.status,
          reply.type,
          reply.message,
          requestId,
          { ...limits.headersFor(model), ...reply.headers },
          reply.details,
        );
        return;
      case 'tool':
      case 'tools':
      case 'text': {
        if (res.destroyed) return;
        const usage = usageOf(reply);
        // Output tokens count as the reply leaves, as Anthropic counts them.
        const headers = limits.replied(model, usage.output_tokens ?? 0);
        const content =
          reply.kind === 'tool'
            ? [
                {
                  type: 'tool_use',
                  id: `toolu_fake_${requestId}`,
                  name: forcedToolName(request.body),
                  input: reply.input,
                },
              ]
            : reply.kind === 'tools'
              ? [
                  ...(reply.text !== undefined ? [{ type: 'text', text: reply.text, citations: null }] : []),
                  ...reply.uses.map((use, i) => ({
                    type: 'tool_use',
                    id: `toolu_fake_${requestId}_${i}`,
                    name: use.name,
                    input: use.input,
                  })),
                ]
              : [{ type: 'text', text: reply.text, citations: null }];
        sendJson(
          res,
          200,
          {
            id: `msg_fake_${requestId}`,
            type: 'message',
            role: 'assistant',
            model,
            content,
            stop_reason: reply.stopReason ?? (reply.kind === 'text' ? 'end_turn' : 'tool_use'),
            stop_sequence: null,
            usage,
          },
          requestId,
          headers,
        );
        return;
      }
    }
  }

  /** Resolves true after `ms`, or false as soon as the client goes away or the fake closes. */
  function wait(ms: number, res: ServerResponse): Promise<boolean> {
    return new Promise((resolve) => {
      const finish = (elapsed: boolean): void => {
        clearTimeout(timer);
        res.off('close', abandon);
        waits.delete(abandon);
        resolve(elapsed);
      };
      const abandon = (): void => finish(false);
      const timer = setTimeout(() => finish(true), ms);
      res.on('close', abandon);
      waits.add(abandon);
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://127.0.0.1:${port}`,
    requests,
    enqueue: (...replies) => {
      queue.push(...replies);
    },
    setDefault: (reply) => {
      fallback = reply;
    },
    reset: () => {
      queue = [];
      fallback = undefined;
      requests.length = 0;
      limits.resetStats();
    },
    configure: (next) => limits.configure(next),
    stats: () => limits.stats(),
    hold: () => {
      let release = (): void => undefined;
      const until = new Promise<void>((resolve) => (release = resolve));
      const hold = { until, release };
      held = hold;
      return () => {
        if (held === hold) held = undefined;
        hold.release();
      };
    },
    close: async () => {
      held?.release();
      for (const abandon of [...waits]) abandon();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function modelOf(request: RecordedRequest): string {
  return String((request.body as { model?: unknown } | undefined)?.model ?? 'claude-fake');
}

/** The input tokens a request counts against a token limit: cache writes count, cache reads do not. */
function inputTokensOf(usage: Required<FakeUsage>): number {
  return (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);
}

/** The tool a reply must use: the forced one, else the first offered, else `respond`. */
function forcedToolName(body: unknown): string {
  const { tool_choice: choice, tools } = (body ?? {}) as {
    tool_choice?: { name?: unknown };
    tools?: { name?: unknown }[];
  };
  if (typeof choice?.name === 'string') return choice.name;
  const first = tools?.[0]?.name;
  return typeof first === 'string' ? first : 'respond';
}

function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  requestId?: string,
  headers: Record<string, string> = {},
  details?: Record<string, unknown>,
): void {
  sendJson(
    res,
    status,
    { type: 'error', error: { type, message, ...(details && { details }) }, request_id: requestId ?? null },
    requestId,
    headers,
  );
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  requestId?: string,
  headers: Record<string, string> = {},
): void {
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...(requestId && { 'request-id': requestId }),
    ...headers,
  });
  res.end(text);
}

/** A `tool_result` block of a request, as the client sent it. */
export interface SentToolResult {
  tool_use_id: string;
  content?: unknown;
  is_error?: boolean;
}

/** The `tool_result` blocks of the last message of a request: the results of the round before it. */
export function toolResultsOf(request: RecordedRequest): SentToolResult[] {
  const messages = (request.body as { messages?: { role: string; content: unknown }[] } | undefined)?.messages ?? [];
  const last = messages[messages.length - 1];
  if (!last || last.role !== 'user' || !Array.isArray(last.content)) return [];
  return (last.content as { type?: string }[]).filter((block) => block.type === 'tool_result') as SentToolResult[];
}
