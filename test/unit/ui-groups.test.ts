/**
 * Reviewer groups in the inbox: the tokens file's `groups=` field (and its errors), `*`, the proxy's groups
 * header, and their enforcement over fastify's inject and a fake backend: a decision addressed to groups is
 * answered (decide, edit check, batch) only by a member, whose group is passed on to be recorded; others get a
 * 403 naming the group and a read-only page; a change to the tokens file applies without signing in again;
 * `treadle dev`'s first reviewer is in every group.
 */
import { TreadleError } from '../../src/config/errors';
import { ANSWERS, decisionKey, type PendingDecision } from '../../src/model/decisions';
import {
  addToken,
  answeringGroup,
  groupsFromProxy,
  newToken,
  parseTokens,
  readTokensFile,
  TokensFileError,
} from '../../src/ui/auth';
import type { TreadleClient } from '../../src/client';
import type { ForkOptions } from '../../src/client/fork';
import type { InboxBackend } from '../../src/ui/backend';
import { serveInbox } from '../../src/ui/serve';
import { buildInboxApp, SESSION_COOKIE } from '../../src/ui/server';
import { TEST_IDS } from '../../src/ui/test-ids';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const HOST = '127.0.0.1:8234';
const HASH = 'a'.repeat(64);

describe('tokens file groups', () => {
  it('reads groups=a,b after the hash; no field is no group; * stands for every group', () => {
    const entries = parseTokens(
      `alice sha256:${HASH} groups=legal,leads\nbob sha256:${HASH}\ncarol sha256:${HASH}   groups=*`,
    );
    expect(entries.map((e) => [e.name, e.groups])).toEqual([
      ['alice', ['legal', 'leads']],
      ['bob', []],
      ['carol', ['*']],
    ]);
  });

  it('refuses a malformed groups field naming the file and line', () => {
    const bad = (field: string) => () => parseTokens(`# c\nalice sha256:${HASH} ${field}`, 'tokens');
    expect(bad('group=legal')).toThrow('tokens:2: expected "groups=<group>,…" after the hash');
    expect(bad('groups=legal,,leads')).toThrow('tokens:2: an empty group name (a stray comma?)');
    expect(bad('groups=le<gal')).toThrow('tokens:2: not a group name: "le<gal"');
    expect(bad('groups=legal extra')).toThrow(TokensFileError);
  });

  it('token add writes the groups it is given and refuses bad ones before writing', () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'treadle-groups-')), 'tokens');
    addToken(file, 'alice', ['legal', ' leads']);
    expect(() => addToken(file, 'bob', ['legal,'])).toThrow('--groups: an empty group name');
    expect(readTokensFile(file).map((e) => [e.name, e.groups])).toEqual([['alice', ['legal', 'leads']]]);
  });

  it('answers in the first required group a reviewer is in; no reviewers means anyone, unrecorded', () => {
    const alice = { name: 'alice', groups: ['leads'] };
    expect(answeringGroup(alice, undefined)).toBeUndefined();
    expect(answeringGroup(alice, 'legal')).toBe(false);
    expect(answeringGroup(alice, 'legal, leads')).toBe('leads');
    expect(answeringGroup({ name: 'root', groups: ['*'] }, 'legal,leads')).toBe('legal');
  });

  it("takes a trusted proxy's groups header, and nothing from a malformed one", () => {
    const proxy = { header: 'X-Forwarded-User', trustedAddresses: ['127.0.0.1'] };
    expect(groupsFromProxy(proxy, { 'x-treadle-groups': 'legal, leads' })).toEqual(['legal', 'leads']);
    expect(groupsFromProxy({ ...proxy, groupsHeader: 'X-Groups' }, { 'x-groups': 'ops' })).toEqual(['ops']);
    expect(groupsFromProxy(proxy, { 'x-treadle-groups': 'legal,<x>' })).toEqual([]);
    expect(groupsFromProxy(proxy, {})).toEqual([]);
  });
});

describe('groups enforced by the inbox server', () => {
  const alice = newToken('alice', ['legal']);
  const bob = newToken('bob', ['leads']);
  const decision = (id: string, reviewers?: string): PendingDecision => ({
    key: decisionKey(id, 'review', 'draft'),
    kind: 'review',
    workflowId: id,
    itemId: id,
    pipeline: 'docs',
    stage: 'draft',
    reason: 'escalated',
    message: 'check it',
    requestedAt: '2026-01-01T00:00:00.000Z',
    ...(reviewers ? { reviewers } : {}),
    answers: ANSWERS.review,
  });
  const pending = [decision('legal-1', 'legal'), decision('open-1'), decision('legal-2', 'legal')];
  const keyOf = (id: string) => pending.find((d) => d.workflowId === id)!.key;

  let tokens = parseTokens(`${alice.line}\n${bob.line}`);
  function backend(): InboxBackend & {
    calls: [string, string, string | undefined][];
    cancels: [string, string, string | undefined][];
    forks: [string, ForkOptions][];
  } {
    const calls: [string, string, string | undefined][] = [];
    const cancels: [string, string, string | undefined][] = [];
    const forks: [string, ForkOptions][] = [];
    return {
      calls,
      cancels,
      forks,
      fork: async (itemId, options) => {
        forks.push([itemId, options]);
        if (options.from === 'nope') throw new Error(`cannot fork ${itemId}:\n  - no stage named "nope"`);
        return {
          id: `${itemId}-fork-1`,
          runId: 'r',
          pipeline: 'p',
          existing: false,
          of: itemId,
          from: options.from,
          carried: ['a'],
          rerun: [options.from],
          taskQueue: 'q',
        };
      },
      cancel: async (itemId, by, reason) => {
        cancels.push([itemId, by, reason]);
        return { id: itemId, by, ...(reason ? { reason } : {}), recorded: true, closed: true };
      },
      list: async () => pending,
      changes: async () => [],
      detail: async (key) => ({ decision: pending.find((d) => d.key === key)!, live: true }),
      checkEdit: async () => [],
      decide: async (key, _answer, reviewer, group) => {
        calls.push([key, reviewer, group]);
        return { status: 'decided', by: reviewer, outcome: 'approved' };
      },
    };
  }
  async function app() {
    const b = backend();
    const built = await buildInboxApp(
      { backend: b, auth: { tokens: () => tokens }, index: { deltaMs: 0, reconcileMs: 0 } },
      [HOST],
    );
    return { server: built.app, b };
  }
  const as = (token: string) => ({
    host: HOST,
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
  });
  beforeEach(() => {
    tokens = parseTokens(`${alice.line}\n${bob.line}`);
  });

  it('refuses a non-member with 403 naming the group; a member decides in it; no reviewers: anyone', async () => {
    const { server, b } = await app();
    const post = (token: string, id: string, action = 'approve') =>
      server.inject({ method: 'POST', url: `/api/decisions/${keyOf(id)}`, headers: as(token), payload: { action } });
    const refused = await post(bob.token, 'legal-1');
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({
      error: 'forbidden',
      message: 'only members of legal can answer this decision; bob is in leads',
      groups: ['legal'],
    });
    const check = await server.inject({
      method: 'POST',
      url: `/api/decisions/${keyOf('legal-1')}/check`,
      headers: as(bob.token),
      payload: { artefact: {} },
    });
    expect(check.statusCode).toBe(403);
    expect(b.calls).toEqual([]);
    expect((await post(alice.token, 'legal-1')).statusCode).toBe(200);
    expect((await post(bob.token, 'open-1')).statusCode).toBe(200);
    expect(b.calls).toEqual([
      [keyOf('legal-1'), 'alice', 'legal'],
      [keyOf('open-1'), 'bob', undefined],
    ]);
    await server.close();
  });

  it("cancels a decision's item as the signed-in reviewer; 403 outside its groups, 404 when not pending, 422 for a bad reason", async () => {
    const { server, b } = await app();
    const cancel = (token: string, key: string, payload: Record<string, unknown> = {}) =>
      server.inject({ method: 'POST', url: `/api/decisions/${key}/cancel`, headers: as(token), payload });
    const refused = await cancel(bob.token, keyOf('legal-1'), { reason: 'not mine' });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ error: 'forbidden', groups: ['legal'] });
    expect((await cancel(alice.token, decisionKey('nowhere', 'review', 'draft'))).statusCode).toBe(404);
    const bad = await cancel(alice.token, keyOf('legal-1'), { reason: 'x'.repeat(1_001) });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().message).toBe('reason must be text of at most 1000 characters');
    expect(b.cancels).toEqual([]);
    const done = await cancel(alice.token, keyOf('legal-1'), { reason: '  a duplicate  ' });
    expect(done.statusCode).toBe(200);
    expect(done.json()).toEqual({ id: 'legal-1', by: 'alice', reason: 'a duplicate', recorded: true, closed: true });
    expect((await cancel(bob.token, keyOf('open-1'))).statusCode).toBe(200);
    expect(b.cancels).toEqual([
      ['legal-1', 'alice', 'a duplicate'],
      ['open-1', 'bob', undefined],
    ]);
    // Its decision has left the inbox's index: a second cancel from it is 404.
    expect((await cancel(alice.token, keyOf('legal-1'))).statusCode).toBe(404);
    await server.close();
  });

  it("forks a decision's item with settings as YAML; 403 outside its groups, 404 when not pending, 422 for bad settings or a refused fork", async () => {
    const { server, b } = await app();
    const fork = (token: string, key: string, payload: Record<string, unknown>) =>
      server.inject({ method: 'POST', url: `/api/decisions/${key}/fork`, headers: as(token), payload });
    expect((await fork(bob.token, keyOf('legal-1'), { from: 'draft' })).statusCode).toBe(403);
    expect((await fork(alice.token, decisionKey('nowhere', 'review', 'draft'), { from: 'draft' })).statusCode).toBe(
      404,
    );
    const refusals = [
      [{}, 'name the stage to fork from'],
      [{ from: 'draft', settings: 'stages: [' }, /^the settings are not YAML or JSON: /],
      [
        { from: 'draft', settings: '- a list' },
        'the settings must be an object: pipeline keys, and stages: { <name>: { … } }',
      ],
      [
        { from: 'draft', settings: 'x'.repeat(20_001) },
        'settings must be YAML or JSON text of at most 20000 characters',
      ],
    ] as const;
    for (const [payload, message] of refusals) {
      const res = await fork(alice.token, keyOf('legal-1'), payload);
      expect(res.statusCode).toBe(422);
      expect(res.json().message).toMatch(message);
    }
    expect(b.forks).toEqual([]);
    const done = await fork(alice.token, keyOf('legal-1'), {
      from: ' draft ',
      settings: 'stages:\n  draft:\n    with: { model: m2 }\n',
    });
    expect(done.statusCode).toBe(200);
    expect(done.json()).toMatchObject({ id: 'legal-1-fork-1', carried: ['a'], rerun: ['draft'] });
    expect(b.forks).toEqual([
      ['legal-1', { from: 'draft', overrides: { stages: { draft: { with: { model: 'm2' } } } } }],
    ]);
    const refused = await fork(alice.token, keyOf('legal-1'), { from: 'nope' });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().message).toContain('no stage named "nope"');
    await server.close();
  });

  it('refuses an answer when whom the decision is for cannot be told (a failed lookup): 503, never "anyone\'s"', async () => {
    const { server, b } = await app();
    // Not in the index yet, and its workflow cannot be asked now.
    const ghost = decisionKey('ghost-1', 'review', 'draft');
    b.detail = async () => {
      throw new TreadleError('the worker did not answer in time', 'unreachable');
    };
    const res = await server.inject({
      method: 'POST',
      url: `/api/decisions/${ghost}`,
      headers: as(bob.token),
      payload: { action: 'approve' },
    });
    expect({ status: res.statusCode, body: res.json() }).toEqual({
      status: 503,
      body: {
        error: 'unavailable',
        message: `cannot tell whom decision ${ghost} is addressed to now: the worker did not answer in time`,
      },
    });
    const batch = await server.inject({
      method: 'POST',
      url: '/api/batch',
      headers: as(bob.token),
      payload: { keys: [ghost], action: 'approve' },
    });
    expect(batch.json().outcomes).toEqual([
      { key: ghost, status: 'refused', message: expect.stringContaining('cannot tell whom') },
    ]);
    expect(b.calls).toEqual([]);
    await server.close();
  });

  it('a batch answers the decisions a reviewer may and refuses the others, saying why', async () => {
    const { server, b } = await app();
    const res = await server.inject({
      method: 'POST',
      url: '/api/batch',
      headers: as(bob.token),
      payload: { keys: [keyOf('legal-2'), keyOf('open-1')], action: 'approve' },
    });
    expect(res.json().outcomes).toEqual([
      {
        key: keyOf('legal-2'),
        status: 'refused',
        message: 'only members of legal can answer this decision; bob is in leads',
      },
      { key: keyOf('open-1'), status: 'decided', by: 'bob', outcome: 'approved' },
    ]);
    expect(b.calls).toEqual([[keyOf('open-1'), 'bob', undefined]]);
    await server.close();
  });

  it('shows a non-member the page read-only, saying why; a group change applies without signing in again', async () => {
    const { server } = await app();
    const login = await server.inject({
      method: 'POST',
      url: '/login',
      headers: { host: HOST, origin: `http://${HOST}`, 'content-type': 'application/json' },
      payload: { token: bob.token },
    });
    const cookie = `${SESSION_COOKIE}=${login.cookies.find((c) => c.name === SESSION_COOKIE)!.value}`;
    const page = async () =>
      (await server.inject({ url: `/d/${keyOf('legal-1')}`, headers: { host: HOST, cookie } })).body;
    const before = await page();
    expect(before).toContain(`data-testid="${TEST_IDS.readOnly}"`);
    expect(before).toContain('Only members of legal can answer this decision; you are in leads.');
    expect(before).not.toContain(`data-testid="${TEST_IDS.actionApprove}"`);
    // The same line, its groups edited: bob's session goes on, now in legal.
    tokens = parseTokens(`${alice.line}\n${bob.line.replace('groups=leads', 'groups=leads,legal')}`);
    const after = await page();
    expect(after).not.toContain(`data-testid="${TEST_IDS.readOnly}"`);
    expect(after).toContain(`data-testid="${TEST_IDS.actionApprove}"`);
    await server.close();
  });

  it("takes a trusted proxy's reviewer and groups from its headers", async () => {
    const b = backend();
    const { app: server } = await buildInboxApp(
      {
        backend: b,
        auth: { proxy: { header: 'X-Forwarded-User', trustedAddresses: ['127.0.0.1'] } },
        index: { deltaMs: 0, reconcileMs: 0 },
      },
      [HOST],
    );
    const post = (groups: string) =>
      server.inject({
        method: 'POST',
        url: `/api/decisions/${keyOf('legal-1')}`,
        remoteAddress: '127.0.0.1',
        headers: {
          host: HOST,
          origin: `http://${HOST}`,
          'content-type': 'application/json',
          'x-forwarded-user': 'carol',
          'x-treadle-groups': groups,
        },
        payload: { action: 'approve' },
      });
    expect((await post('ops')).statusCode).toBe(403);
    expect((await post('ops,legal')).statusCode).toBe(200);
    expect(b.calls).toEqual([[keyOf('legal-1'), 'carol', 'legal']]);
    await server.close();
  });
});

describe('the first reviewer of treadle dev', () => {
  it('gets a token in every group, so decisions addressed to a group are theirs to answer', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'treadle-dev-groups-'));
    // Only what serveInbox reads of a client: the listings (empty) and the namespace for Web UI links.
    const client = {
      listPendingDecisions: async () => [],
      listDecisionChanges: async () => [],
      client: { options: { namespace: 'default' } },
    } as unknown as TreadleClient;
    const inbox = await serveInbox(client, {
      port: 0,
      settings: { tokensFile: path.join(dir, 'ui-tokens'), trustedProxies: [], allowedHosts: [] },
      firstReviewer: 'dana',
    });
    await inbox.close();
    expect(readTokensFile(inbox.tokensFile).map((e) => [e.name, e.groups])).toEqual([['dana', ['*']]]);
  });
});
