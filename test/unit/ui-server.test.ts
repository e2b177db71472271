/**
 * The inbox server's JSON API through fastify's inject, over a fake backend: authentication (bearer, session
 * cookie from login), CSRF refusals, security headers, and decide's outcomes (200 decided, 409 already decided,
 * 422 refused) with the reviewer taken from the identity, never from the body; a decision that went after the
 * index last looked answers 404 (JSON, or the HTML page's) and leaves the index.
 */
import { ANSWERS, decisionKey, type DecisionAnswer, type PendingDecision } from '../../src/model/decisions';
import { TreadleError } from '../../src/config/errors';
import { newToken, parseTokens } from '../../src/ui/auth';
import type { InboxBackend } from '../../src/ui/backend';
import { buildInboxApp, createInboxServer, SESSION_COOKIE } from '../../src/ui/server';

const HOST = '127.0.0.1:8234';
const alice = newToken('alice');
const decision = (id: string): PendingDecision => ({
  key: decisionKey(id, 'review', 'draft'),
  kind: 'review',
  workflowId: id,
  itemId: id,
  pipeline: 'docs',
  stage: 'draft',
  reason: 'escalated',
  message: 'check it',
  requestedAt: '2026-01-01T00:00:00.000Z',
  answers: ANSWERS.review,
});

function backend(): InboxBackend & { calls: [string, DecisionAnswer, string][] } {
  const calls: [string, DecisionAnswer, string][] = [];
  return {
    calls,
    list: async () => [decision('a'), decision('b'), decision('c')],
    changes: async () => [],
    detail: async (key) => ({ decision: decision(key), live: true }),
    checkEdit: async () => [{ path: '/title', message: 'must be string' }],
    cancel: async (itemId) => {
      throw new Error(`cancel refused: work item ${itemId} has already completed; there is nothing to cancel`);
    },
    fork: async () => Promise.reject(new Error('not used')),
    decide: async (key, answer, reviewer) => {
      calls.push([key, answer, reviewer]);
      if (key === decision('b').key) return { status: 'already_decided', by: 'bob' };
      if (key === decision('c').key) throw new Error('a reason is required to reject');
      return { status: 'decided', by: reviewer, outcome: 'approved' };
    },
  };
}

async function app(b = backend()) {
  const built = await buildInboxApp(
    { backend: b, auth: { tokens: parseTokens(alice.line) }, index: { deltaMs: 0, reconcileMs: 0 } },
    [HOST],
  );
  return { ...built, b };
}

const same = { host: HOST, origin: `http://${HOST}`, 'content-type': 'application/json' };
const bearer = { host: HOST, authorization: `Bearer ${alice.token}` };

describe('inbox server', () => {
  it('refuses without a way to identify reviewers', async () => {
    await expect(buildInboxApp({ backend: backend(), auth: {} }, [HOST])).rejects.toThrow('identify reviewers');
  });

  it('answers 401 without a token and lists with one, with security headers', async () => {
    const { app: server } = await app();
    expect((await server.inject({ url: '/api/decisions', headers: { host: HOST } })).statusCode).toBe(401);
    const res = await server.inject({ url: '/api/decisions?kind=review', headers: bearer });
    expect(res.statusCode).toBe(200);
    expect(res.json().counts.total).toBe(3);
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['content-security-policy']).not.toContain('unsafe-inline');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect((await server.inject({ url: '/api/decisions?kind=nope', headers: bearer })).statusCode).toBe(400);
    const badLimit = await server.inject({ url: '/api/decisions?limit=abc', headers: bearer });
    expect(badLimit.statusCode).toBe(400);
    expect(badLimit.json().message).toBe('limit must be a whole number of decisions, got "abc"');
    expect((await server.inject({ url: '/api/decisions?limit=2', headers: bearer })).json().decisions).toHaveLength(2);
    await server.close();
  });

  it('logs in by token into a signed HttpOnly SameSite=Strict cookie; a forged cookie is refused', async () => {
    const { app: server, b } = await app();
    const bad = await server.inject({ method: 'POST', url: '/login', headers: same, payload: { token: 'nope' } });
    expect(bad.statusCode).toBe(401);
    const login = await server.inject({
      method: 'POST',
      url: '/login',
      headers: same,
      payload: { token: alice.token },
    });
    const cookie = login.cookies.find((c) => c.name === SESSION_COOKIE)!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    const key = decision('a').key;
    const ok = await server.inject({
      method: 'POST',
      url: `/api/decisions/${key}`,
      headers: { ...same, cookie: `${SESSION_COOKIE}=${cookie.value}` },
      payload: { action: 'approve', reviewer: 'mallory', by: 'mallory' },
    });
    expect(ok.statusCode).toBe(200);
    expect(b.calls[0]).toEqual([key, { action: 'approve' }, 'alice']);
    const forged = await server.inject({
      url: '/api/decisions',
      headers: { host: HOST, cookie: `${SESSION_COOKIE}=mallory` },
    });
    expect(forged.statusCode).toBe(401);
    await server.close();
  });

  it('refuses cross-site and non-JSON decisions', async () => {
    const { app: server, b } = await app();
    const login = await server.inject({
      method: 'POST',
      url: '/login',
      headers: same,
      payload: { token: alice.token },
    });
    const cookie = `${SESSION_COOKIE}=${login.cookies[0]!.value}`;
    const url = `/api/decisions/${decision('a').key}`;
    const post = (headers: Record<string, string>, payload: string) =>
      server.inject({ method: 'POST', url, headers: { cookie, ...headers }, payload });
    const body = JSON.stringify({ action: 'approve' });
    expect((await post({ ...same, origin: 'http://evil.example' }, body)).statusCode).toBe(403);
    expect((await post({ host: HOST, 'content-type': 'application/json' }, body)).statusCode).toBe(403);
    expect((await post({ ...same, host: 'evil.example' }, body)).statusCode).toBe(403);
    expect((await post({ ...same, 'content-type': 'text/plain' }, body)).statusCode).toBe(415);
    expect(b.calls).toEqual([]);
    await server.close();
  });

  it('answers 409 when someone decided first, 422 on a refusal, and drops decided entries from the list', async () => {
    const { app: server, index } = await app();
    const post = (id: string, payload: object) =>
      server.inject({
        method: 'POST',
        url: `/api/decisions/${decision(id).key}`,
        headers: { ...bearer, 'content-type': 'application/json' },
        payload,
      });
    const decided = await post('a', { action: 'approve' });
    expect(decided.json()).toEqual({ status: 'decided', by: 'alice', outcome: 'approved' });
    const first = await post('b', { action: 'approve' });
    expect(first.statusCode).toBe(409);
    expect(first.json()).toMatchObject({ status: 'already_decided', by: 'bob' });
    const refused = await post('c', { action: 'reject' });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().message).toBe('a reason is required to reject');
    expect(index.query({}).decisions.map((d) => d.workflowId)).toEqual(['c']);
    await server.close();
  });

  it("answers a refused cancel with 422 and the item's reason, keeping the decision listed", async () => {
    const { app: server, index } = await app();
    const url = `/api/decisions/${decision('a').key}/cancel`;
    const refused = await server.inject({
      method: 'POST',
      url,
      headers: { ...bearer, 'content-type': 'application/json' },
      payload: { reason: 'late' },
    });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().message).toBe(
      'cancel refused: work item a has already completed; there is nothing to cancel',
    );
    expect(index.query({}).decisions.map((d) => d.workflowId)).toEqual(['a', 'b', 'c']);
    await server.close();
  });

  it('serves detail, schema checks and health', async () => {
    const { app: server } = await app();
    const key = decision('a').key;
    expect((await server.inject({ url: `/api/decisions/${key}`, headers: bearer })).json().live).toBe(true);
    expect((await server.inject({ url: '/api/decisions/nope', headers: bearer })).statusCode).toBe(404);
    const check = await server.inject({
      method: 'POST',
      url: `/api/decisions/${key}/check`,
      headers: { ...bearer, 'content-type': 'application/json' },
      payload: { artefact: {} },
    });
    expect(check.json()).toEqual({ errors: [{ path: '/title', message: 'must be string' }] });
    expect((await server.inject({ url: '/healthz', headers: bearer })).json()).toMatchObject({
      ok: true,
      decisions: 3,
    });
    await server.close();
  });

  it('answers only as its own hosts on every route (DNS rebinding), and keeps counts behind sign-in', async () => {
    const { app: server } = await app();
    const login = await server.inject({
      method: 'POST',
      url: '/login',
      headers: same,
      payload: { token: alice.token },
    });
    const cookie = `${SESSION_COOKIE}=${login.cookies[0]!.value}`;
    const key = encodeURIComponent(decision('a').key);
    const routes = ['/api/decisions', `/api/decisions/${key}`, '/', `/d/${key}`, `/d/${key}/diff?a=1&b=2`];
    for (const url of [...routes, '/login', '/assets/inbox.js', '/healthz']) {
      for (const auth of [{ cookie }, { authorization: `Bearer ${alice.token}` }]) {
        const res = await server.inject({ url, headers: { ...auth, host: 'evil.example' } });
        expect([url, res.statusCode]).toEqual([url, 403]);
        expect(res.body).not.toContain('"total"');
      }
    }
    expect((await server.inject({ url: '/api/decisions', headers: { host: HOST, cookie } })).statusCode).toBe(200);
    // Liveness for anyone who names the inbox's host; how many decisions wait only for a reviewer.
    const anonymous = await server.inject({ url: '/healthz', headers: { host: HOST } });
    expect(anonymous.statusCode).toBe(200);
    expect(anonymous.json()).toEqual({ ok: true });
    expect((await server.inject({ url: '/healthz', headers: { host: HOST, cookie } })).json()).toMatchObject({
      ok: true,
      decisions: 3,
    });
    await server.close();
  });

  it('answers 404 and drops the row when the backend says a listed decision just went (another reviewer)', async () => {
    const gone = (key: string) => new TreadleError(`no pending decision ${key}`, 'not_found');
    const b = backend();
    b.detail = async (key) => Promise.reject(gone(key));
    b.checkEdit = async (key) => Promise.reject(gone(key));
    const { app: server, index } = await app(b);
    const [a, bKey, c] = ['a', 'b', 'c'].map((id) => decision(id).key) as [string, string, string];

    const api = await server.inject({ url: `/api/decisions/${a}`, headers: bearer });
    expect(api.statusCode).toBe(404);
    expect(api.json()).toMatchObject({ error: 'not_found' });
    const page = await server.inject({ url: `/d/${bKey}`, headers: bearer });
    expect(page.statusCode).toBe(404);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.body).toContain('Not pending');
    const diff = await server.inject({ url: `/d/${c}/diff?a=1&b=2`, headers: bearer });
    expect(diff.statusCode).toBe(404);
    expect(index.size).toBe(0);
    const check = await server.inject({
      method: 'POST',
      url: `/api/decisions/${a}/check`,
      headers: { ...bearer, 'content-type': 'application/json' },
      payload: { artefact: {} },
    });
    expect(check.statusCode).toBe(404);
    await server.close();
  });
  it('on an IPv6 address answers the Host a browser sends, in brackets, and reports its address that way', async () => {
    const server = await createInboxServer({
      backend: backend(),
      auth: { tokens: parseTokens(alice.line) },
      index: { deltaMs: 0, reconcileMs: 0 },
      host: '::1',
      port: 0,
    });
    try {
      expect(server.url).toMatch(/^http:\/\/\[::1\]:\d+\/$/);
      const health = await fetch(new URL('healthz', server.url));
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ ok: true });
    } finally {
      await server.close();
    }
  });
});
