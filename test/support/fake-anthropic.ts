/**
 * A local fake of the Anthropic Messages API (`POST /v1/messages`) on 127.0.0.1, for tests that drive the
 * real SDK client through `baseURL`. Replies are scripted per request: a queue, then a default; a request
 * with neither gets a 500 naming it, so an unscripted call fails loudly instead of passing by accident.
 * A reply may use the request's tools (`tools`: a tool loop's round) or be computed from the request
 * (`computed`: e.g. from the tool results it carries).
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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
  /** Clears the script and the recorded requests (between tests). */
  reset(): void;
  /** Stops listening, ends pending slow replies and closes every connection. */
  close(): Promise<void>;
}

const DEFAULT_USAGE = {
  input_tokens: 12,
  output_tokens: 7,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
};

/** Starts a fake on 127.0.0.1 and an ephemeral port. */
export async function startFakeAnthropic(): Promise<FakeAnthropic> {
  const requests: RecordedRequest[] = [];
  let queue: FakeReply[] = [];
  let fallback: FakeReply | undefined;
  const waits = new Set<() => void>();
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
    await answer(reply, recorded, res, requestId);
  }

  async function answer(
    reply: FakeReply,
    request: RecordedRequest,
    res: ServerResponse,
    requestId: string,
  ): Promise<void> {
    switch (reply.kind) {
      case 'slow':
        if (await wait(reply.delayMs, res)) await answer(reply.then, request, res, requestId);
        return;
      case 'drop':
        res.socket?.destroy();
        return;
      case 'computed':
        await answer(reply.reply(request), request, res, requestId);
        return;
      case 'error':
        sendError(res, reply.status, reply.type, reply.message, requestId, reply.headers, reply.details);
        return;
      case 'tool':
      case 'tools':
      case 'text': {
        const model = String((request.body as { model?: unknown } | undefined)?.model ?? 'claude-fake');
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
            usage: { ...DEFAULT_USAGE, ...reply.usage },
          },
          requestId,
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
    },
    close: async () => {
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
