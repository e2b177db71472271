/**
 * `treadle ui` as users run it (issue 27): it refuses to start when no reviewer can be identified (exit 2,
 * before connecting), serves the inbox over the real server with a token from `treadle ui token add`, lists a
 * pending review to that token's bearer, turns away a request without one, and stops cleanly on SIGTERM; on a
 * port already in use it exits 1 with one line naming the address and `--port`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from '../../src/kinds/builder';
import { decisionKey, type PendingDecision } from '../../src/model/decisions';
import { runTreadle, showRun, TREADLE_BIN } from '../support/cli';
import { eventually, startHarness, type Harness } from '../support/harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});

const PIPELINE = 'ui-command-i27';

it('refuses to start without a way to identify reviewers: exit 2, naming the tokens file and the proxy header', async () => {
  const home = mkdtempSync(path.join(tmpdir(), 'treadle-ui-'));
  const run = await runTreadle(h, ['ui', '--port', '0'], { TREADLE_HOME: home });
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 2, stderr: expect.stringContaining('ui token add') });
  expect(run.stderr).toContain(path.join(home, 'ui-tokens'));
  expect(run.stderr).toContain('TREADLE_UI_USER_HEADER');
});

it('token add prints a token once into a 0600 file, refuses the same name twice, and list shows names only', async () => {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'treadle-ui-')), 'tokens');
  const added = await runTreadle(h, ['ui', 'token', 'add', 'alice', '--tokens', file]);
  expect(added.code).toBe(0);
  const token = added.stdout.trim();
  expect(token).toMatch(/^\S{32,}$/);
  expect(added.stderr).toContain(`/login#token=${token}`);
  expect(statSync(file).mode & 0o777).toBe(0o600);
  const again = await runTreadle(h, ['ui', 'token', 'add', 'alice', '--tokens', file]);
  expect({ code: again.code, stderr: again.stderr }).toEqual({
    code: 2,
    stderr: expect.stringContaining('alice already has a token'),
  });
  const listed = await runTreadle(h, ['ui', 'token', 'list', '--tokens', file]);
  expect(listed.stdout).toBe('alice\n');
  expect(listed.stdout).not.toContain(token);
  const removed = await runTreadle(h, ['ui', 'token', 'remove', 'alice', '--tokens', file]);
  expect(removed.code).toBe(0);
  expect((await runTreadle(h, ['ui', 'token', 'list', '--tokens', file])).stdout).toContain('no reviewer tokens');
});

it('token add --groups writes the groups into the line, list shows them; a bad group is exit 2 and adds nothing', async () => {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'treadle-ui-')), 'tokens');
  const added = await runTreadle(h, ['ui', 'token', 'add', 'alice', '--groups', 'legal,leads', '--tokens', file]);
  expect(added.code).toBe(0);
  expect(added.stderr).toContain('Token for alice (groups legal, leads) added');
  expect(readFileSync(file, 'utf8')).toMatch(/^alice sha256:[0-9a-f]{64} groups=legal,leads\n$/);
  const bad = await runTreadle(h, ['ui', 'token', 'add', 'bob', '--groups', 'legal,,leads', '--tokens', file]);
  expect({ code: bad.code, stderr: bad.stderr }).toEqual({
    code: 2,
    stderr: expect.stringContaining('--groups: an empty group name (a stray comma?)'),
  });
  expect((await runTreadle(h, ['ui', 'token', 'list', '--tokens', file])).stdout).toBe('alice groups=legal,leads\n');
});

it('serves the inbox: a bearer token lists a pending review, no token is refused, SIGTERM stops it with exit 0', async () => {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'treadle-ui-')), 'tokens');
  const added = await runTreadle(h, ['ui', 'token', 'add', 'alice', '--tokens', file]);
  expect(added.code).toBe(0);
  const token = added.stdout.trim();
  const id = h.id();
  await h.client.start(pipeline(PIPELINE).stage('draft', 'scripted').reviewPolicy('draft', 'always'), null, { id });

  const child = spawn(process.execPath, [TREADLE_BIN, 'ui', '--port', '0', '--tokens', file], {
    env: { ...process.env, TEMPORAL_ADDRESS: h.address, TREADLE_TASK_QUEUE: h.taskQueue },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    const url = await eventually(
      async () => /Review inbox: (http:\/\/127\.0\.0\.1:[1-9]\d*\/)/.exec(stdout)?.[1],
      30_000,
      `the inbox's address on stdout (stderr so far: ${stderr})`,
    );
    const refused = await fetch(`${url}api/decisions`);
    expect(refused.status).toBe(401);
    const key = decisionKey(id, 'review', 'draft');
    const listed = await eventually(
      async () => {
        const response = await fetch(`${url}api/decisions?pipeline=${PIPELINE}`, {
          headers: { authorization: `Bearer ${token}` },
        });
        const body = (await response.json()) as { decisions: PendingDecision[] };
        return body.decisions.find((d) => d.key === key);
      },
      30_000,
      'the review in the inbox',
    );
    expect(listed).toMatchObject({ kind: 'review', itemId: id, stage: 'draft' });
  } finally {
    child.kill('SIGTERM');
  }
  expect(await exited).toBe(0);
  expect(stderr).not.toContain('Error');
}, 90_000);

it('a port already in use: exit 1 with one line naming the address and --port', async () => {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'treadle-ui-')), 'tokens');
  expect((await runTreadle(h, ['ui', 'token', 'add', 'alice', '--tokens', file])).code).toBe(0);
  const occupant = createServer();
  await new Promise<void>((resolve) => occupant.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = occupant.address() as AddressInfo;
    const run = await runTreadle(h, ['ui', '--port', String(port), '--tokens', file]);
    expect({ code: run.code, stderr: run.stderr }).toEqual({
      code: 1,
      stderr: `treadle: cannot serve the inbox on 127.0.0.1:${port}: the address is in use; choose another --port\n`,
    });
  } finally {
    await new Promise((resolve) => occupant.close(resolve));
  }
}, 60_000);

it('`treadle ui --help` names its flags', async () => {
  const run = await runTreadle(h, ['ui', '--help']);
  expect(run.code).toBe(0);
  for (const flag of ['--host', '--port', '--tokens', '--user-header', '--web-ui-url'])
    expect(run.stdout).toContain(flag);
  expect(showRun(run)).toContain('token');
});
