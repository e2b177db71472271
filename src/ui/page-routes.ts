/**
 * The inbox's HTML routes: the list (`GET /`), the detail page and its diff fragment, the evaluations (`/evals`,
 * `/evals/<run>`), the login page, and the two static assets. Pages are built on the server from the index (the
 * first screen needs no fetch); a visitor without a session is sent to the login page.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { answeringGroup, inGroups, membersOf, type Reviewer } from './auth';
import type { InboxBackend } from './backend';
import { InvalidCursorError, type DecisionIndex } from './decision-index';
import { FilterError, parseFilter } from './filter';
import type { SafeHtml } from './html';
import { attemptDiff, detailPage } from './pages/detail';
import { inboxPage } from './pages/inbox';
import { errorPage, loginPage } from './pages/layout';
import { evalListPage, evalRunPage } from './pages/evals';

/** What the page routes need from the server. */
export interface PageContext {
  backend: InboxBackend;
  index: DecisionIndex;
  /** The signed-in reviewer (with their groups now), or undefined. */
  reviewerOf(request: FastifyRequest): Reviewer | undefined;
  webUiUrl?: string;
  /** The namespace in Web UI links. */
  namespace: string;
}

/** The files under /assets/ (an allowlist: nothing else on disk is reachable). */
const ASSETS: Record<string, string> = {
  'inbox.js': 'text/javascript; charset=utf-8',
  'inbox.css': 'text/css; charset=utf-8',
};
/** src/ui/assets under ts-jest, lib/ui/assets after the build's copy step. */
const ASSETS_DIR = join(__dirname, 'assets');

/** Registers the HTML routes on `app`. */
export function registerPages(app: FastifyInstance, ctx: PageContext): void {
  const send = (reply: FastifyReply, body: SafeHtml, status = 200): FastifyReply =>
    reply.code(status).type('text/html; charset=utf-8').send(body.value);

  app.get('/login', async (_request, reply) => send(reply, loginPage()));
  // Browsers ask for it on every page; no icon, but no 404 in the reviewer's console either.
  app.get('/favicon.ico', async (_request, reply) => reply.code(204).send());

  // Read once: the files change only with a new build, which restarts the server.
  const assets = new Map(
    Object.entries(ASSETS).map(([name, type]) => [name, { type, body: readFileSync(join(ASSETS_DIR, name)) }]),
  );
  app.get('/assets/:name', async (request, reply) => {
    const { name } = request.params as { name: string };
    const asset = assets.get(name);
    if (!asset) return reply.code(404).send({ error: 'not_found', message: `no asset ${name}` });
    // no-cache, not the pages' no-store: the browser keeps them but asks again, so a new build is seen at once.
    return reply.type(asset.type).header('cache-control', 'no-cache').send(asset.body);
  });

  app.get('/', async (request, reply) => {
    const reviewer = ctx.reviewerOf(request);
    if (!reviewer) return reply.redirect('/login', 303);
    const q = request.query as Record<string, string | undefined>;
    try {
      const filter = parseFilter({ ...q, text: q.q });
      const result = ctx.index.query(filter, { after: q.after });
      const all = ctx.index.size;
      const query = { filter, ...(q.age ? { age: q.age } : {}), ...(q.after ? { after: q.after } : {}) };
      return send(reply, inboxPage(query, result, all, reviewer, Date.now()));
    } catch (e) {
      if (e instanceof InvalidCursorError || e instanceof FilterError)
        return send(reply, errorPage('Bad filter', e.message, reviewer.name), 400);
      throw e;
    }
  });

  app.get('/d/:key', async (request, reply) => {
    const signedIn = ctx.reviewerOf(request);
    if (!signedIn) return reply.redirect('/login', 303);
    const reviewer = signedIn.name;
    const { key } = request.params as { key: string };
    const detail = ctx.index.get(key) ? await ctx.index.whilePending(key, () => ctx.backend.detail(key)) : undefined;
    if (!detail) {
      return send(
        reply,
        errorPage('Not pending', 'This decision is not pending any more (someone decided it) or never was.', reviewer),
        404,
      );
    }
    const withLink = ctx.webUiUrl ? { ...detail, webUiUrl: webUiLink(ctx.webUiUrl, ctx.namespace, detail) } : detail;
    // Addressed to groups the reviewer is in none of: shown read-only, saying why (the API answers 403).
    const reviewers = detail.decision.reviewers;
    const readOnly =
      answeringGroup(signedIn, reviewers) === false
        ? `Only ${membersOf(reviewers!)} can answer this decision; you are ${inGroups(signedIn)}.`
        : undefined;
    return send(reply, detailPage(withLink, reviewer, Date.now(), readOnly));
  });

  registerEvalPages(app, ctx, send);

  app.get('/d/:key/diff', async (request, reply) => {
    const reviewer = ctx.reviewerOf(request)?.name;
    if (!reviewer) return reply.code(401).send({ error: 'unauthenticated', message: 'sign in with a reviewer token' });
    const { key } = request.params as { key: string };
    const { a, b } = request.query as { a?: string; b?: string };
    const detail = ctx.index.get(key)
      ? await ctx.index.whilePending(key, () => ctx.backend.detail(key, { attempts: [Number(a), Number(b)] }))
      : undefined;
    if (!detail) return reply.code(404).send({ error: 'not_found', message: `no pending decision ${key}` });
    const fragment = attemptDiff(detail, Number(a), Number(b));
    if (!fragment)
      return reply.code(400).send({ error: 'bad_request', message: `no attempts ${a} and ${b} to compare` });
    return send(reply, fragment);
  });
}

/** `/evals` and `/evals/<run>` (issue 42): the evaluation runs the backend's blob store keeps, for signed-in reviewers. */
function registerEvalPages(
  app: FastifyInstance,
  ctx: PageContext,
  send: (reply: FastifyReply, body: SafeHtml, status?: number) => FastifyReply,
): void {
  app.get('/evals', async (request, reply) => {
    const reviewer = ctx.reviewerOf(request)?.name;
    if (!reviewer) return reply.redirect('/login', 303);
    return send(reply, evalListPage((await ctx.backend.evalRuns?.()) ?? [], reviewer));
  });

  app.get('/evals/:run', async (request, reply) => {
    const reviewer = ctx.reviewerOf(request)?.name;
    if (!reviewer) return reply.redirect('/login', 303);
    const { run } = request.params as { run: string };
    const record = await ctx.backend.evalRun?.(run).catch((error: unknown) => {
      if ((error as { code?: unknown }).code === 'not_found') return undefined;
      throw error;
    });
    if (!record)
      return send(reply, errorPage('Unknown evaluation', `No evaluation run is named ${run}.`, reviewer), 404);
    return send(reply, evalRunPage(record, reviewer));
  });
}

/** The workflow's page in the Temporal Web UI, from its base address. */
function webUiLink(base: string, namespace: string, detail: { decision: { workflowId: string } }): string {
  const root = base.replace(/\/+$/, '');
  return `${root}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(detail.decision.workflowId)}`;
}
