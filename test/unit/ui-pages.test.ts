/**
 * The inbox's server-rendered pages, batch answers, event stream and session rules through fastify's inject
 * (and one real socket for the stream), over a fake backend: escaped hostile text, the page's test ids, the
 * forms each kind allows, refusals, and sessions that end after 12 h or when their token leaves the file.
 */
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ANSWERS,
  decisionKey,
  type DecisionDetail,
  type DecisionKind,
  type PendingDecision,
} from '../../src/model/decisions';
import {
  newToken,
  parseTokens,
  SESSION_TTL_MS,
  sessionReviewer,
  sessionValue,
  tokensFileSource,
} from '../../src/ui/auth';
import type { InboxBackend } from '../../src/ui/backend';
import { framesFor } from '../../src/ui/events';
import { buildInboxApp, SESSION_COOKIE } from '../../src/ui/server';
import { TEST_IDS } from '../../src/ui/test-ids';

const HOST = '127.0.0.1:8234';
const alice = newToken('alice');
const bob = newToken('bob');
const XSS = '<script>alert(1)</script><img src=x onerror=alert(2)>';

const decision = (id: string, kind: DecisionKind = 'review', message = 'check it'): PendingDecision => ({
  key: decisionKey(id, kind, 'draft'),
  kind,
  workflowId: id,
  itemId: id,
  pipeline: kind === 'loop' ? 'loop' : 'docs',
  stage: 'draft',
  reason: kind === 'loop' ? 'loop_failed' : 'escalated',
  message,
  requestedAt: `2026-01-01T00:00:0${id.length}.000Z`,
  answers: ANSWERS[kind],
});

const listed = [decision('a', 'review', XSS), decision('bb'), decision('ccc'), decision('loop1', 'loop')];

function detailOf(key: string): DecisionDetail {
  const d = listed.find((x) => x.key === key)!;
  return {
    decision: d,
    live: false,
    webUiUrl: 'javascript:alert(3)',
    stages: [{ name: 'draft', status: 'review', attempts: 2, summary: XSS }],
    capacityWaits: [
      { stage: 'edit', activityType: 'anthropic', line: `waiting for claude-sonnet-4-6: 8/8 calls in flight ${XSS}` },
    ],
    attempts: [
      {
        attempt: 1,
        startedAt: '2026-01-01T00:00:00Z',
        output: { mediaType: 'application/json', bytes: 10, content: { title: 'one', body: XSS } },
        verdict: {
          kind: 'rejected',
          score: 0.4,
          feedback: {
            summary: `too short ${XSS}`,
            failedCriteria: [
              { name: `tone ${XSS}`, expected: 'friendly', actual: 'curt', passed: false },
              { name: 'spelling', expected: 'no typos', actual: 'none', passed: true },
            ],
            guidance: { judge: 'say why it matters' },
          },
        },
        feedback: `too short ${XSS}`,
      },
      {
        attempt: 2,
        startedAt: '2026-01-01T00:01:00Z',
        output: { mediaType: 'text/markdown', bytes: 10, content: `# Two\n\n[x](javascript:alert(4)) ${XSS}` },
      },
    ],
    ...(d.kind === 'loop' ? { loop: { failure: { message: XSS }, iterations: [{ n: 3 }] } } : {}),
  };
}

function backend(): InboxBackend & { calls: [string, string, string][] } {
  const calls: [string, string, string][] = [];
  return {
    calls,
    list: async () => listed,
    changes: async () => [],
    detail: async (key) => detailOf(key),
    checkEdit: async () => [],
    cancel: async () => Promise.reject(new Error('not used')),
    fork: async () => Promise.reject(new Error('not used')),
    decide: async (key, answer, reviewer) => {
      calls.push([key, answer.action, reviewer]);
      if (key === decision('bb').key) return { status: 'already_decided', by: 'bob', outcome: 'approved' };
      if (key === decision('ccc').key) throw new Error('the stage is not waiting for a review');
      return { status: 'decided', by: reviewer, outcome: 'approved' };
    },
  };
}

let tokens = parseTokens(`${alice.line}\n${bob.line}`);
async function app(b = backend()) {
  const built = await buildInboxApp(
    { backend: b, auth: { tokens: () => tokens }, index: { deltaMs: 0, reconcileMs: 0 } },
    [HOST],
  );
  return { ...built, b };
}
beforeEach(() => {
  tokens = parseTokens(`${alice.line}\n${bob.line}`);
});

const bearer = { host: HOST, authorization: `Bearer ${alice.token}` };
const json = { host: HOST, origin: `http://${HOST}`, 'content-type': 'application/json' };
const testId = (id: string) => `data-testid="${id}"`;
/** Executable markup: a script element other than the page's own, an event-handler attribute, a script link. */
const NO_MARKUP =
  /<script(?![^>]*src="\/assets\/inbox\.js")|<[^>]*\son\w+\s*=|<[^>]*\shref\s*=\s*["']?\s*(javascript|data):/i;

/** Signs alice in through POST /login and returns the session cookie it set. */
async function signIn(server: Awaited<ReturnType<typeof app>>['app']) {
  const login = await server.inject({ method: 'POST', url: '/login', headers: json, payload: { token: alice.token } });
  return login.cookies.find((c) => c.name === SESSION_COOKIE)!;
}

describe('inbox pages', () => {
  it('sends a visitor without a session to the login page, which has the token form and no inline script', async () => {
    const { app: server } = await app();
    const home = await server.inject({ url: '/', headers: { host: HOST } });
    expect(home.statusCode).toBe(303);
    expect(home.headers.location).toBe('/login');
    const login = await server.inject({ url: '/login', headers: { host: HOST } });
    expect(login.body).toContain(testId(TEST_IDS.loginToken));
    expect(login.body).toContain(testId(TEST_IDS.loginSubmit));
    expect(login.body.match(/<script/g)).toHaveLength(1);
    expect(login.headers['content-security-policy']).toContain("script-src 'self'");
    await server.close();
  });

  it('lists the first page with counts, filters and escaped text', async () => {
    const { app: server } = await app();
    const res = await server.inject({ url: '/', headers: bearer });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.body.match(new RegExp(testId(TEST_IDS.decisionRow), 'g'))).toHaveLength(4);
    for (const id of [TEST_IDS.decisionCount, TEST_IDS.filterKind, TEST_IDS.filterPipeline, TEST_IDS.filterText])
      expect(res.body).toContain(testId(id));
    expect(res.body).toContain('4 pending');
    expect(res.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(res.body).not.toMatch(NO_MARKUP);
    expect(res.body).not.toContain(testId(TEST_IDS.emptyState));
    await server.close();
  });

  it('shows the empty state with counts under other filters, and refuses a bad filter', async () => {
    const { app: server } = await app();
    const res = await server.inject({ url: '/?kind=approval', headers: bearer });
    expect(res.body).toContain(testId(TEST_IDS.emptyState));
    expect(res.body).toContain('Nothing waits for you');
    expect(res.body).toContain('4 pending under other filters');
    const loops = await server.inject({ url: '/?kind=loop&q=loop1', headers: bearer });
    expect(loops.body.match(new RegExp(testId(TEST_IDS.decisionRow), 'g'))).toHaveLength(1);
    const bad = await server.inject({ url: '/?kind=%3Cscript%3E', headers: bearer });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain('&quot;&lt;script&gt;&quot;');
    expect((await server.inject({ url: '/?after=nonsense', headers: bearer })).statusCode).toBe(400);
    await server.close();
  });

  it('filters by reviewer group and by how long a decision has waited, each choice with its count', async () => {
    const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
    const aged = [
      { ...decision('fresh'), requestedAt: ago(5 * 60_000), reviewers: 'legal' },
      { ...decision('hour2'), requestedAt: ago(2 * 3_600_000), reviewers: 'legal' },
      { ...decision('days2'), requestedAt: ago(2 * 86_400_000), reviewers: 'editors' },
    ];
    const { app: server } = await app({ ...backend(), list: async () => aged });
    const all = await server.inject({ url: '/', headers: bearer });
    expect(all.body).toContain(testId(TEST_IDS.filterReviewers));
    expect(all.body).toContain(testId(TEST_IDS.filterAge));
    expect(all.body).toContain('>editors (1)</option>');
    expect(all.body).toContain('>legal (2)</option>');
    expect(all.body).toMatch(/>\s*over 15m \(2\)\s*<\/option>/);
    expect(all.body).toMatch(/>\s*over 1d \(1\)\s*<\/option>/);
    const legalHour = await server.inject({ url: '/?reviewers=legal&age=1h', headers: bearer });
    expect(legalHour.body.match(new RegExp(testId(TEST_IDS.decisionRow), 'g'))).toHaveLength(1);
    expect(legalHour.body).toContain('hour2');
    expect(legalHour.body).toMatch(/value="1h"\s+selected/);
    const api = await server.inject({ url: '/api/decisions?age=90m', headers: bearer });
    expect(api.json().decisions.map((d: PendingDecision) => d.itemId)).toEqual(['days2', 'hour2']);
    expect(api.json().counts.byAge).toEqual({ '15m': 2, '1h': 2, '4h': 1, '1d': 1 });
    const bad = await server.inject({ url: '/api/decisions?age=soon', headers: bearer });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toBe(
      'age is how long a decision has waited, in minutes, hours or days (15m, 2h, 1d), or overdue, got "soon"',
    );
    expect((await server.inject({ url: '/?age=1w', headers: bearer })).statusCode).toBe(400);
    await server.close();
  });

  it('renders a review detail: stages, attempts, inert artefacts, diff picker, the answers a review takes', async () => {
    const { app: server } = await app();
    const res = await server.inject({ url: `/d/${encodeURIComponent(listed[0]!.key)}`, headers: bearer });
    expect(res.statusCode).toBe(200);
    // A running stage's call waiting for model capacity, escaped (the line is server data).
    expect(res.body).toContain(
      '<strong>edit</strong>: waiting for claude-sonnet-4-6: 8/8 calls in flight &lt;script&gt;',
    );
    for (const id of [
      TEST_IDS.capacityWaits,
      TEST_IDS.stageTable,
      TEST_IDS.attempt,
      TEST_IDS.artefact,
      TEST_IDS.diffA,
      TEST_IDS.diffB,
      TEST_IDS.diffShow,
      TEST_IDS.actionApprove,
      TEST_IDS.actionApproveAttempt,
      TEST_IDS.actionReject,
      TEST_IDS.rejectReason,
      TEST_IDS.actionEdit,
      TEST_IDS.editor,
      TEST_IDS.editorSubmit,
    ])
      expect(res.body).toContain(testId(id));
    expect(res.body).not.toContain(testId(TEST_IDS.actionResume));
    expect(res.body).not.toMatch(NO_MARKUP);
    expect(res.body).toContain('score 0.4');
    // The verdict reads as text (outcome, summary, each failed criterion, guidance); its JSON one click away.
    const verdict = res.body.slice(res.body.indexOf(testId(TEST_IDS.verdict)));
    expect(verdict).toMatch(/Rejected/);
    expect(verdict).toContain('too short &lt;script&gt;');
    expect(verdict.match(new RegExp(testId(TEST_IDS.criterion), 'g'))).toHaveLength(1);
    expect(verdict).toMatch(/<strong>tone &lt;script&gt;[^<]*<\/strong>: expected “friendly”, got “curt”/);
    expect(verdict).toContain('say why it matters');
    expect(verdict).toMatch(/<details class="raw-json">\s*<summary class="sub">JSON<\/summary>/);
    expect(res.body).toContain('No worker answered');
    // A Web UI address that is not http(s) does not become a link target.
    expect(res.body).toMatch(new RegExp(`href="#"[^>]*${testId(TEST_IDS.webUiLink)}`));
    await server.close();
  });

  it('offers a failed loop only resume and abandon, and 404s a decision that is not pending', async () => {
    const { app: server } = await app();
    const res = await server.inject({
      url: `/d/${encodeURIComponent(decision('loop1', 'loop').key)}`,
      headers: bearer,
    });
    expect(res.body).toContain(testId(TEST_IDS.actionResume));
    expect(res.body).toContain(testId(TEST_IDS.actionAbandon));
    expect(res.body).not.toContain(testId(TEST_IDS.actionApprove));
    expect(res.body).not.toContain(testId(TEST_IDS.actionEdit));
    expect(res.body).toContain('Loop failure');
    expect(res.body).not.toMatch(NO_MARKUP);
    const gone = await server.inject({ url: `/d/${encodeURIComponent(decision('zz').key)}`, headers: bearer });
    expect(gone.statusCode).toBe(404);
    expect(gone.body).toContain('not pending');
    await server.close();
  });

  it('serves the diff fragment between two attempts, escaped', async () => {
    const { app: server } = await app();
    const url = `/d/${encodeURIComponent(listed[0]!.key)}/diff`;
    const res = await server.inject({ url: `${url}?a=1&b=2`, headers: bearer });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain(testId(TEST_IDS.diffView));
    expect(res.body).toContain('diff-add');
    expect(res.body).not.toMatch(NO_MARKUP);
    expect((await server.inject({ url: `${url}?a=1&b=9`, headers: bearer })).statusCode).toBe(400);
    expect((await server.inject({ url: `${url}?a=1&b=2`, headers: { host: HOST } })).statusCode).toBe(401);
    await server.close();
  });

  it('serves only its two assets, revalidated (no-cache) where pages are no-store', async () => {
    const { app: server } = await app();
    const js = await server.inject({ url: '/assets/inbox.js', headers: { host: HOST } });
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toContain('text/javascript');
    expect(js.body).toContain('EventSource');
    expect(js.headers['cache-control']).toBe('no-cache');
    const get = (url: string) => server.inject({ url, headers: { host: HOST } });
    expect((await get('/login')).headers['cache-control']).toBe('no-store');
    expect((await get('/assets/inbox.css')).headers['content-type']).toContain('text/css');
    expect((await get('/assets/..%2Fserver.ts')).statusCode).toBe(404);
    expect((await get('/assets/constructor')).statusCode).toBe(404);
    await server.close();
  });
});

describe('batch answers', () => {
  it('answers each key as the signed-in reviewer, with per-key outcomes', async () => {
    const { app: server, b, index } = await app();
    const keys = [listed[0]!.key, decision('bb').key, decision('ccc').key];
    const res = await server.inject({
      method: 'POST',
      url: '/api/batch',
      headers: { ...json, authorization: `Bearer ${bob.token}` },
      payload: { keys, action: 'approve', reviewer: 'mallory' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().outcomes).toEqual([
      { key: keys[0], status: 'decided', by: 'bob', outcome: 'approved' },
      { key: keys[1], status: 'already_decided', by: 'bob', outcome: 'approved' },
      { key: keys[2], status: 'refused', message: 'the stage is not waiting for a review' },
    ]);
    expect(b.calls.every(([, , reviewer]) => reviewer === 'bob')).toBe(true);
    expect(index.get(keys[0]!)).toBeUndefined();
    expect(index.get(keys[2]!)).toBeDefined();
    await server.close();
  });

  it('refuses a rejection without a reason, a bad body, and a cross-site batch', async () => {
    const { app: server, b } = await app();
    const post = (headers: Record<string, string>, payload: object) =>
      server.inject({ method: 'POST', url: '/api/batch', headers: { ...headers, ...bearer }, payload });
    const keys = [listed[0]!.key];
    expect((await post(json, { keys, action: 'reject' })).statusCode).toBe(422);
    expect((await post(json, { keys: [], action: 'approve' })).statusCode).toBe(422);
    expect((await post(json, { keys, action: 'edit' })).statusCode).toBe(422);
    expect((await post({ ...json, 'content-type': 'text/plain' }, { keys, action: 'approve' })).statusCode).toBe(415);
    const login = await server.inject({
      method: 'POST',
      url: '/login',
      headers: json,
      payload: { token: alice.token },
    });
    const cookie = `${SESSION_COOKIE}=${login.cookies[0]!.value}`;
    const crossSite = await server.inject({
      method: 'POST',
      url: '/api/batch',
      headers: { ...json, origin: 'http://evil.example', cookie },
      payload: { keys, action: 'approve' },
    });
    expect(crossSite.statusCode).toBe(403);
    expect(b.calls).toEqual([]);
    await server.close();
  });
});

describe('sessions', () => {
  it('end after 12 hours and when the reviewer has no token any more', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    const value = sessionValue('alice', alice.token, now);
    expect(sessionReviewer(value, tokens, now)).toBe('alice');
    expect(sessionReviewer(value, tokens, now + SESSION_TTL_MS)).toBeUndefined();
    expect(sessionReviewer(value, parseTokens(bob.line), now)).toBeUndefined();
    expect(sessionReviewer('alice', tokens, now)).toBeUndefined();
    // The format before sessions named their token: signed in with a token that may since have been replaced.
    expect(sessionReviewer(`alice|${now + SESSION_TTL_MS}`, tokens, now)).toBeUndefined();
  });

  it('end when the reviewer’s token is replaced (a leaked token rotated by token remove + token add)', async () => {
    const { app: server } = await app();
    const cookie = await signIn(server);
    const headers = { host: HOST, cookie: `${SESSION_COOKIE}=${cookie.value}` };
    expect((await server.inject({ url: '/api/decisions', headers })).statusCode).toBe(200);
    const rotated = newToken('alice');
    tokens = parseTokens(`${rotated.line}\n${bob.line}`);
    expect((await server.inject({ url: '/api/decisions', headers })).statusCode).toBe(401);
    const again = { host: HOST, authorization: `Bearer ${rotated.token}` };
    expect((await server.inject({ url: '/api/decisions', headers: again })).statusCode).toBe(200);
    await server.close();
  });

  it('end on the server at sign-out: the same cookie, sent again, is refused; a new sign-in works', async () => {
    const { app: server } = await app();
    const cookie = await signIn(server);
    const headers = { host: HOST, cookie: `${SESSION_COOKIE}=${cookie.value}` };
    expect((await server.inject({ url: '/api/decisions', headers })).statusCode).toBe(200);
    const out = await server.inject({ method: 'POST', url: '/logout', headers: { ...json, ...headers }, payload: {} });
    expect(out.statusCode).toBe(200);
    expect((await server.inject({ url: '/api/decisions', headers })).statusCode).toBe(401);
    expect((await server.inject({ url: '/', headers })).statusCode).toBe(303);
    const again = await signIn(server);
    const fresh = { host: HOST, cookie: `${SESSION_COOKIE}=${again.value}` };
    expect((await server.inject({ url: '/api/decisions', headers: fresh })).statusCode).toBe(200);
    await server.close();
  });

  it('a logged-in session stops working once its token leaves the tokens list', async () => {
    const { app: server } = await app();
    const cookie = await signIn(server);
    expect(cookie.maxAge).toBe(SESSION_TTL_MS / 1000);
    const headers = { host: HOST, cookie: `${SESSION_COOKIE}=${cookie.value}` };
    expect((await server.inject({ url: '/api/decisions', headers })).statusCode).toBe(200);
    tokens = parseTokens(bob.line);
    expect((await server.inject({ url: '/api/decisions', headers })).statusCode).toBe(401);
    expect((await server.inject({ url: '/', headers })).statusCode).toBe(303);
    await server.close();
  });

  it('re-reads a changed tokens file, and yields no tokens when it became unusable', () => {
    const dir = mkdtempSync(join(tmpdir(), 'treadle-ui-tokens-'));
    const file = join(dir, 'tokens');
    writeFileSync(file, `${alice.line}\n`, { mode: 0o600 });
    const errors: unknown[] = [];
    const source = tokensFileSource(file, (e) => errors.push(e));
    expect(source().map((t) => t.name)).toEqual(['alice']);
    writeFileSync(file, `# alice left\n${bob.line}\n`);
    expect(source().map((t) => t.name)).toEqual(['bob']);
    chmodSync(file, 0o644);
    expect(source()).toEqual([]);
    expect(String(errors[0])).toContain('chmod 600');
  });
});

describe('event stream', () => {
  it('renders added rows escaped, removed keys and counts as SSE frames, once per change', async () => {
    const { app: server, index } = await app();
    const event = { version: 7, added: [decision('new', 'review', XSS)], removed: ['k1'] };
    const frames = framesFor(index, event, Date.now());
    // Every subscriber hears the same event: the second client gets the frames already built.
    expect(framesFor(index, event, Date.now() + 86_400_000)).toBe(frames);
    expect(frames).toContain('id: 7\nevent: added\ndata: {');
    expect(frames).toContain('event: removed\ndata: {"keys":["k1"]}');
    expect(frames).toContain('event: counts\ndata: {"total":4');
    const added = JSON.parse(/event: added\ndata: (.*)\n/.exec(frames)![1]!);
    expect(added.rows[0].html).toContain('&lt;script&gt;');
    expect(added.rows[0].html).not.toMatch(NO_MARKUP);
    await server.close();
  });

  it('streams over a socket: 401 without a session, reset for a stale Last-Event-ID, removals, and ended when the token goes', async () => {
    const { app: server, index } = await app();
    await server.listen({ host: '127.0.0.1', port: 0 });
    const { port } = server.server.address() as { port: number };
    const open = (headers: Record<string, string>) =>
      new Promise<{ status: number; read: () => Promise<string>; ended: () => boolean; close: () => void }>(
        (resolve, reject) => {
          const req = httpRequest({ host: '127.0.0.1', port, path: '/api/events', headers }, (res) => {
            let buffer = '';
            const waiters: (() => void)[] = [];
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => {
              buffer += chunk;
              waiters.splice(0).forEach((w) => w());
            });
            const read = () =>
              new Promise<string>((done) => {
                const take = () => {
                  const out = buffer;
                  buffer = '';
                  done(out);
                };
                if (buffer) take();
                else waiters.push(take);
              });
            resolve({ status: res.statusCode!, read, ended: () => res.complete, close: () => req.destroy() });
          });
          req.on('error', reject);
          req.end();
        },
      );
    const auth = { host: HOST, authorization: `Bearer ${alice.token}` };
    const refused = await open({ host: HOST });
    expect(refused.status).toBe(401);
    refused.close();
    const stale = await open({ ...auth, 'last-event-id': '999' });
    expect(await stale.read()).toContain('event: reset');
    stale.close();
    const live = await open(auth);
    expect(live.status).toBe(200);
    expect(await live.read()).toContain(`id: ${index.version}`);
    index.remove(listed[1]!.key);
    const next = await live.read();
    expect(next).toContain(`event: removed\ndata: {"keys":["${listed[1]!.key}"]}`);
    // alice's token leaves the list: her open stream says so and ends, before any further change is sent.
    tokens = parseTokens(bob.line);
    const ended = await live.read();
    expect(ended).toContain('event: ended');
    expect(ended).toContain('Your session ended');
    index.remove(listed[2]!.key);
    await new Promise((r) => setTimeout(r, 100));
    expect(live.ended()).toBe(true);
    live.close();
    await server.close();
  });
});
