/**
 * The review inbox's HTTP server (`treadle ui`), fastify 5 over an {@link InboxBackend}: the JSON API, batch
 * answers, the event stream, login by token into a 12-hour session that sign-out ends, security headers, the
 * Host check on every route and the CSRF checks on every POST; the HTML pages are in page-routes.ts. Lists come from the in-memory {@link DecisionIndex}; the reviewer
 * passed to `decide` is the authenticated identity only.
 */
import { TreadleError } from '../config/errors';
import { randomBytes } from 'node:crypto';
import fastifyCookie from '@fastify/cookie';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { DecisionAnswer } from '../model/decisions';
import {
  answeringGroup,
  bearerToken,
  requiredGroups,
  groupsFromProxy,
  groupsOf,
  inGroups,
  membersOf,
  reviewerForToken,
  reviewerFromProxy,
  sessionReviewer,
  sessionValue,
  SESSION_TTL_MS,
  SignedOutSessions,
  type ProxyIdentity,
  type Reviewer,
  type TokenEntry,
} from './auth';
import { hostAndPort, INBOX_HOST, INBOX_PORT } from './address';
import type { InboxBackend } from './backend';
import { registerForkRoute } from './fork-route';
import { checkHost, checkStateChange } from './csrf';
import { DecisionIndex, InvalidCursorError, type DecisionIndexOptions } from './decision-index';
import { streamEvents } from './events';
import { FilterError, parseFilter, parseLimit } from './filter';
import { registerPages } from './page-routes';

/** How reviewers are identified: at least one of tokens and proxy. */
export interface InboxAuth {
  /**
   * The reviewers' tokens; a function is asked on every request and by every open event stream, so a removed
   * or replaced token ends its sessions and their streams.
   */
  tokens?: readonly TokenEntry[] | (() => readonly TokenEntry[]);
  proxy?: ProxyIdentity;
}

export interface InboxServerOptions {
  backend: InboxBackend;
  host?: string;
  port?: number;
  auth: InboxAuth;
  webUiUrl?: string;
  /** The Temporal namespace the decisions live in, for Web UI links (default `default`). */
  namespace?: string;
  /** Host headers accepted besides `host:port` and `localhost:port`. */
  allowedHosts?: readonly string[];
  index?: DecisionIndexOptions;
}

export const SESSION_COOKIE = 'treadle_session';
const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
};

/** Builds the server without listening (tests use `inject`); {@link createInboxServer} listens. */
export async function buildInboxApp(
  options: InboxServerOptions,
  allowedHosts: readonly string[],
): Promise<{ app: FastifyInstance; index: DecisionIndex }> {
  const auth = authentication(options.auth);
  const index = new DecisionIndex(options.backend, options.index);
  await index.start();
  // forceCloseConnections: open event streams must not keep close() waiting.
  const app = Fastify({ logger: false, bodyLimit: 8 * 1024 * 1024, forceCloseConnections: true });
  // A secret per process: no session outlives the server, so the sign-outs it keeps in memory cover them all.
  await app.register(fastifyCookie, { secret: randomBytes(32).toString('hex') });
  addSecurityHooks(app, allowedHosts);
  app.addHook('onClose', async () => index.close());

  registerSessionRoutes(app, index, auth);
  registerDecisionRoutes(app, {
    backend: options.backend,
    index,
    guard: auth.guard,
    identify: auth.identify,
    refuse,
  });
  registerCancelRoute(app, { backend: options.backend, index, guard: auth.guard, identify: auth.identify, refuse });
  registerForkRoute(app, { backend: options.backend, index, guard: auth.guard, refuse });
  registerPages(app, {
    backend: options.backend,
    index,
    reviewerOf: auth.identify,
    ...(options.webUiUrl ? { webUiUrl: options.webUiUrl } : {}),
    namespace: options.namespace ?? 'default',
  });
  return { app, index };
}

/** Sends a JSON refusal: `{ error, message }` with the status. */
function refuse(reply: FastifyReply, status: number, error: string, message: string): FastifyReply {
  return reply.code(status).send({ error, message });
}

/** How the server tells who a request is from. */
interface Authentication {
  /** The reviewers' tokens now. */
  tokens(): readonly TokenEntry[];
  /** Sessions ended by sign-out before they expired. */
  signedOut: SignedOutSessions;
  /** The verified session value of a request's cookie, or undefined. */
  sessionOf(request: FastifyRequest): string | undefined;
  /**
   * The reviewer a request is from: a bearer token, a trusted proxy's header, or a session cookie. Their groups
   * are read now (the tokens file as it is, the proxy's groups header), so a change applies without a new login.
   */
  identify(request: FastifyRequest): Reviewer | undefined;
  /** Authenticates; returns the reviewer or sends the refusal. */
  guard(request: FastifyRequest, reply: FastifyReply): Reviewer | undefined;
}

/** Identifies reviewers by the configured tokens and proxy; an inbox with neither is refused at start. */
function authentication(auth: InboxAuth): Authentication {
  const tokens = (): readonly TokenEntry[] => {
    const t = auth.tokens ?? [];
    return typeof t === 'function' ? t() : t;
  };
  if (tokens().length === 0 && !auth.proxy) {
    throw new Error('the inbox needs a way to identify reviewers: a tokens file or a trusted proxy user header');
  }
  const signedOut = new SignedOutSessions();
  const sessionOf = (request: FastifyRequest): string | undefined => {
    const cookie = request.cookies[SESSION_COOKIE];
    const unsigned = cookie ? request.unsignCookie(cookie) : undefined;
    return unsigned?.valid && unsigned.value ? unsigned.value : undefined;
  };
  const fromTokens = (name: string | undefined): Reviewer | undefined =>
    name === undefined ? undefined : { name, groups: groupsOf(tokens(), name) };
  const identify = (request: FastifyRequest): Reviewer | undefined => {
    const token = bearerToken(request.headers.authorization);
    if (token !== undefined) return fromTokens(reviewerForToken(tokens(), token));
    const fromProxy = reviewerFromProxy(auth.proxy, request.socket.remoteAddress, request.headers);
    if (fromProxy) return { name: fromProxy, groups: groupsFromProxy(auth.proxy!, request.headers) };
    const session = sessionOf(request);
    return fromTokens(session ? sessionReviewer(session, tokens(), Date.now(), signedOut) : undefined);
  };
  const guard = (request: FastifyRequest, reply: FastifyReply): Reviewer | undefined => {
    const reviewer = identify(request);
    if (!reviewer) refuse(reply, 401, 'unauthenticated', 'sign in with a reviewer token');
    return reviewer;
  };
  return { tokens, signedOut, sessionOf, identify, guard };
}

/** The security headers on every response, and the Host and CSRF checks before every request. */
function addSecurityHooks(app: FastifyInstance, allowedHosts: readonly string[]): void {
  app.addHook('onSend', async (_request, reply) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
      // A route that chose its caching keeps it (the assets: no-cache); everything else is no-store.
      if (name !== 'cache-control' || !reply.hasHeader(name)) reply.header(name, value);
    }
  });
  // Every request names one of our hosts (a rebound DNS name reaches us with its own), before anything else.
  // Every POST changes state (login and logout included): the CSRF checks run here, once, before the body is
  // parsed. They check the origin before the content type, so a cross-site form gets the 403, not a 415.
  app.addHook('onRequest', async (request, reply) => {
    const script = bearerToken(request.headers.authorization) !== undefined;
    const refusal =
      request.method === 'POST'
        ? checkStateChange(request.headers, allowedHosts, { script })
        : checkHost(request.headers.host, allowedHosts);
    if (refusal) return refuse(reply, refusal.status, 'refused', refusal.message);
  });
}

/** Liveness, and signing in and out of a session. */
function registerSessionRoutes(app: FastifyInstance, index: DecisionIndex, auth: Authentication): void {
  // Liveness for anyone; what waits, only for a reviewer.
  app.get('/healthz', async (request) =>
    auth.identify(request) ? { ok: true, decisions: index.size, version: index.version } : { ok: true },
  );

  app.post('/login', async (request, reply) => {
    const sent = (request.body as { token?: unknown } | undefined)?.token;
    const token = typeof sent === 'string' ? sent : '';
    const reviewer = token ? reviewerForToken(auth.tokens(), token) : undefined;
    if (!reviewer)
      return refuse(
        reply,
        401,
        'unauthenticated',
        'not a reviewer token; paste the whole token that "treadle ui token add <name>" printed, or ask for a new one',
      );
    reply.setCookie(SESSION_COOKIE, sessionValue(reviewer, token, Date.now()), {
      signed: true,
      httpOnly: true,
      sameSite: 'strict',
      secure: request.protocol === 'https',
      path: '/',
      maxAge: SESSION_TTL_MS / 1000,
    });
    return { reviewer };
  });

  // Ends the session on the server too: a copy of the cookie stops working now, not when it expires.
  app.post('/logout', async (request, reply) => {
    const session = auth.sessionOf(request);
    if (session) auth.signedOut.add(session, Date.now());
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return { ok: true };
  });
}

/** What the JSON routes need from {@link buildInboxApp}. */
interface ApiContext {
  backend: InboxBackend;
  index: DecisionIndex;
  /** Authenticates (the CSRF checks ran before, in the onRequest hook); the reviewer, or undefined once refused. */
  guard(request: FastifyRequest, reply: FastifyReply): Reviewer | undefined;
  /** The reviewer a request is from now, or undefined (signed out, token removed or replaced). */
  identify(request: FastifyRequest): Reviewer | undefined;
  refuse(reply: FastifyReply, status: number, error: string, message: string): FastifyReply;
}

/** The decision API: list, detail, edit check, decide, batch, and the event stream. */
function registerDecisionRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get('/api/decisions', async (request, reply) => {
    if (!ctx.guard(request, reply)) return reply;
    const q = request.query as Record<string, string | undefined>;
    try {
      return ctx.index.query(parseFilter(q), { after: q.after, limit: parseLimit(q.limit) });
    } catch (e) {
      if (e instanceof InvalidCursorError || e instanceof FilterError)
        return ctx.refuse(reply, 400, 'bad_request', e.message);
      throw e;
    }
  });

  app.get('/api/decisions/:key', async (request, reply) => {
    if (!ctx.guard(request, reply)) return reply;
    const { key } = request.params as { key: string };
    const detail = ctx.index.get(key) ? await ctx.index.whilePending(key, () => ctx.backend.detail(key)) : undefined;
    return detail ?? notPending(ctx, reply, key);
  });

  app.post('/api/decisions/:key/check', async (request, reply) => {
    const reviewer = ctx.guard(request, reply);
    if (!reviewer) return reply;
    const { key } = request.params as { key: string };
    const answering = await answeringAs(ctx, reviewer, key);
    if ('refused' in answering) return reply.code(answering.status).send(answering.refused);
    const artefact = (request.body as { artefact?: unknown } | undefined)?.artefact;
    const errors = await ctx.index.whilePending(key, () => ctx.backend.checkEdit(key, artefact));
    return errors ? { errors } : notPending(ctx, reply, key);
  });

  app.post('/api/decisions/:key', async (request, reply) => {
    const reviewer = ctx.guard(request, reply);
    if (!reviewer) return reply;
    const { key } = request.params as { key: string };
    const answer = answerOf(request.body);
    if (typeof answer === 'string') return ctx.refuse(reply, 422, 'refused', answer);
    const answering = await answeringAs(ctx, reviewer, key);
    if ('refused' in answering) return reply.code(answering.status).send(answering.refused);
    try {
      const outcome = await ctx.backend.decide(key, answer, reviewer.name, answering.group);
      ctx.index.remove(key);
      return outcome.status === 'already_decided' ? reply.code(409).send(outcome) : outcome;
    } catch (e) {
      return ctx.refuse(reply, 422, 'refused', e instanceof Error ? e.message : String(e));
    }
  });

  app.post('/api/batch', async (request, reply) => {
    const reviewer = ctx.guard(request, reply);
    if (!reviewer) return reply;
    const batch = batchOf(request.body);
    if (typeof batch === 'string') return ctx.refuse(reply, 422, 'refused', batch);
    const answer: DecisionAnswer = { action: batch.action, ...(batch.reason ? { reason: batch.reason } : {}) };
    const outcomes = await mapLimit(batch.keys, BATCH_CONCURRENCY, async (key) => {
      const answering = await answeringAs(ctx, reviewer, key);
      // Refused like any other answer the batch cannot give (the page keeps the row and says why).
      if ('refused' in answering) return { key, status: 'refused' as const, message: answering.refused.message };
      try {
        const outcome = await ctx.backend.decide(key, answer, reviewer.name, answering.group);
        ctx.index.remove(key);
        return { key, ...outcome };
      } catch (e) {
        return { key, status: 'refused' as const, message: e instanceof Error ? e.message : String(e) };
      }
    });
    return { outcomes };
  });

  app.get('/api/events', async (request, reply) => {
    const reviewer = ctx.guard(request, reply);
    if (!reviewer) return reply;
    // A stream outlives the request that opened it: it ends once its reviewer is no longer signed in.
    streamEvents(ctx.index, request, reply, SECURITY_HEADERS, () => ctx.identify(request)?.name === reviewer.name);
    return reply;
  });
}

/** The longest reason a cancel from the inbox takes (the item keeps it cut to the history's text limit anyway). */
const MAX_CANCEL_REASON_CHARS = 1_000;

/**
 * `POST /api/decisions/:key/cancel` `{ reason? }`: cancels the work item a pending decision belongs to, as the
 * signed-in reviewer (`treadle cancel <item> --by <reviewer> --reason …`). Only from a decision the reviewer may
 * answer: a decision for groups they are not in is 403 here too, one that is not pending 404.
 */
function registerCancelRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.post('/api/decisions/:key/cancel', async (request, reply) => {
    const reviewer = ctx.guard(request, reply);
    if (!reviewer) return reply;
    const { key } = request.params as { key: string };
    const decision = ctx.index.get(key);
    if (!decision) return notPending(ctx, reply, key);
    if (answeringGroup(reviewer, decision.reviewers) === false) return notYours(reply, decision.reviewers!, reviewer);
    const reason = (request.body as { reason?: unknown } | undefined)?.reason;
    if (reason !== undefined && (typeof reason !== 'string' || reason.length > MAX_CANCEL_REASON_CHARS))
      return ctx.refuse(reply, 422, 'refused', `reason must be text of at most ${MAX_CANCEL_REASON_CHARS} characters`);
    try {
      const outcome = await ctx.backend.cancel(decision.itemId, reviewer.name, reason?.trim() || undefined);
      ctx.index.remove(key);
      return outcome;
    } catch (e) {
      return ctx.refuse(reply, 422, 'refused', e instanceof Error ? e.message : String(e));
    }
  });
}

/** The 404 for a decision that is not (or no longer) pending. */
function notPending(ctx: ApiContext, reply: FastifyReply, key: string): FastifyReply {
  return ctx.refuse(reply, 404, 'not_found', `no pending decision ${key}`);
}

/**
 * The groups decision `key` is addressed to (`reviewers`), from the index, or from the decision itself when the
 * index has not listed it yet (it polls). A decision neither knows is not pending: answering it tells who
 * decided first, as before, and changes nothing.
 */
async function addressedTo(
  ctx: ApiContext,
  key: string,
): Promise<{ reviewers: string | undefined } | { unknown: string }> {
  const listed = ctx.index.get(key);
  if (listed) return { reviewers: listed.reviewers };
  try {
    return { reviewers: (await ctx.backend.detail(key, { attempts: [] })).decision.reviewers };
  } catch (e) {
    if (e instanceof TreadleError && e.code === 'not_found') return { reviewers: undefined };
    // Whom it is for cannot be told now (a query that failed): refused, never let through as "anyone's".
    return {
      unknown: `cannot tell whom decision ${key} is addressed to now: ${e instanceof Error ? e.message : String(e)}`,
    };
  }
}

/**
 * The group under which `reviewer` answers decision `key` (undefined: it names none), or the refusal: 403 when it is
 * addressed to groups they are in none of, 503 when whom it is for cannot be told now.
 */
async function answeringAs(
  ctx: ApiContext,
  reviewer: Reviewer,
  key: string,
): Promise<{ group: string | undefined } | { status: number; refused: { error: string; message: string } }> {
  const addressed = await addressedTo(ctx, key);
  if ('unknown' in addressed) return { status: 503, refused: { error: 'unavailable', message: addressed.unknown } };
  const { reviewers } = addressed;
  const group = answeringGroup(reviewer, reviewers);
  if (group !== false) return { group };
  const refused = {
    error: 'forbidden',
    message: notYoursMessage(reviewers!, reviewer),
    groups: requiredGroups(reviewers),
  };
  return { status: 403, refused };
}

/**
 * The 403 for a decision addressed to groups `reviewer` is in none of: `{ error: 'forbidden', message, groups }`,
 * `groups` being the groups that may answer it.
 */
function notYours(reply: FastifyReply, reviewers: string, reviewer: Reviewer): FastifyReply {
  return reply
    .code(403)
    .send({ error: 'forbidden', message: notYoursMessage(reviewers, reviewer), groups: requiredGroups(reviewers) });
}

/** "only members of legal can answer this decision; alice is in leads", as the API says it. */
function notYoursMessage(reviewers: string, reviewer: Reviewer): string {
  return `only ${membersOf(reviewers)} can answer this decision; ${reviewer.name} is ${inGroups(reviewer)}`;
}

/** How many decisions of a batch are answered at once. */
const BATCH_CONCURRENCY = 8;
/** The most keys one batch takes. */
const MAX_BATCH = 500;

/** A batch request's body, or why it is not one. */
function batchOf(body: unknown): { keys: string[]; action: 'approve' | 'reject'; reason?: string } | string {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  if (!Array.isArray(b.keys) || b.keys.length === 0 || !b.keys.every((k) => typeof k === 'string'))
    return 'a batch needs "keys": a non-empty list of decision keys';
  if (b.keys.length > MAX_BATCH) return `a batch takes at most ${MAX_BATCH} keys`;
  if (b.action !== 'approve' && b.action !== 'reject') return 'a batch\'s "action" is "approve" or "reject"';
  const reason = typeof b.reason === 'string' ? b.reason.trim() : '';
  if (b.action === 'reject' && !reason) return 'a reason is required to reject';
  return { keys: [...new Set(b.keys as string[])], action: b.action, ...(reason ? { reason } : {}) };
}

/** Runs `run` over `items` with at most `limit` at a time; results in the items' order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, run: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await run(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** Starts the inbox server; `url` is where it listens. */
export async function createInboxServer(options: InboxServerOptions): Promise<{ url: string; close(): Promise<void> }> {
  const host = options.host ?? INBOX_HOST;
  const port = options.port ?? INBOX_PORT;
  const hosts = [hostAndPort(host, port), `localhost:${port}`, ...(options.allowedHosts ?? [])];
  const { app } = await buildInboxApp(options, hosts);
  // The index already polls: a port in use must not leave it running (`treadle dev` goes on without the inbox).
  await app.listen({ host, port }).catch(async (error: unknown) => {
    await app.close();
    throw error;
  });
  // Port 0 asks the system for a free port: report the one bound, and answer as it (the checks read `hosts`).
  const bound = app.server.address();
  const actual = typeof bound === 'object' && bound !== null ? bound.port : port;
  if (actual !== port) hosts.push(hostAndPort(host, actual), `localhost:${actual}`);
  return { url: `http://${hostAndPort(host, actual)}/`, close: () => app.close() };
}

/** The answer in a request body, or why it is not one. A `reviewer`/`by` field in the body is ignored. */
function answerOf(body: unknown): DecisionAnswer | string {
  if (typeof body !== 'object' || body === null) return 'the body must be a JSON object with an "action"';
  const b = body as Record<string, unknown>;
  if (typeof b.action !== 'string') return 'the body must say its "action"';
  return {
    action: b.action as DecisionAnswer['action'],
    ...(typeof b.attempt === 'number' ? { attempt: b.attempt } : {}),
    ...(typeof b.reason === 'string' ? { reason: b.reason } : {}),
    ...(typeof b.note === 'string' ? { note: b.note } : {}),
    ...('artefact' in b ? { artefact: b.artefact } : {}),
  };
}
