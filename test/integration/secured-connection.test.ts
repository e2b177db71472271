/**
 * Treadle against a secured Temporal (issue 26 §1): nginx terminates TLS in front of the run's dev server,
 * one port wanting an API key, one a client certificate. A work item started by the CLI, run by a
 * `treadle worker` process and reviewed through the SDK completes through each; wrong settings fail fast
 * with one line naming the setting, for the CLI, the worker and `TreadleClient.connect()`, a refused
 * credential (a wrong key answered 403, none answered 401, a revoked client certificate) included.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TreadleClient } from '../../src/client';
import type { TreadleError } from '../../src/client/errors';
import { connectClient, temporalSettings } from '../../src/config/connection';
import { runCli, type CliRun } from '../support/cli';
import { testAddress } from '../support/harness';
import { startTlsProxy, type TlsProxy } from '../support/tls-proxy';
import { startTreadleWorker, type TreadleWorkerProcess } from '../support/worker-process';

let proxy: TlsProxy;
let dir: string;
const workers: TreadleWorkerProcess[] = [];

beforeAll(async () => {
  proxy = await startTlsProxy(testAddress());
  dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? '/tmp', 'secured-'));
  writeFileSync(
    path.join(dir, 'pipeline.yaml'),
    ['name: secured', 'stages:', '  - name: draft', '    run: scripted', '    review_policy: always', ''].join('\n'),
  );
}, 60_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await proxy?.stop();
});

/** The variables every process of one case shares: its own queue and blob store, no user temporal.toml. */
function baseEnv(queue: string): Record<string, string> {
  return {
    TREADLE_TASK_QUEUE: queue,
    TREADLE_BLOB_DIR: path.join(dir, `blobs-${queue}`),
    TEMPORAL_CONFIG_FILE: path.join(dir, 'no-such-temporal.toml'),
    TEMPORAL_ADDRESS: '',
  };
}

/**
 * `treadle …` with `env` over the test process's settings. A command still running after 60 s is killed and
 * its exit code is not 2, so a connection that hangs or retries fails the tests' exit-code checks.
 */
function treadle(args: string[], env: Record<string, string>): Promise<CliRun> {
  return runCli(args, { env: { ...process.env, ...env }, timeoutMs: 60_000 });
}

/**
 * Fail fast, checked without timing a process: `connectClient` given a connection deadline far beyond the
 * test's must still end with the diagnosis, so the answer came from the failure itself (or the early TLS
 * probe), never from waiting out a deadline.
 */
async function expectDiagnosedBeforeDeadline(env: Record<string, string>, names: string): Promise<void> {
  const deadlineMs = 10 * 60_000;
  const outcome = await connectClient(temporalSettings({ ...process.env, ...env }), {
    connectTimeout: deadlineMs,
  }).then(
    async (connection) => (await connection.close(), 'connected'),
    (error: unknown) => (error as Error).message,
  );
  expect(outcome).toEqual(expect.stringContaining(names));
}

/** Starts `treadle worker`, and once it is ready returns its "task queue … on …" line. */
async function startWorker(env: Record<string, string>): Promise<string> {
  const worker = await startTreadleWorker({ env: { ...process.env, ...env } });
  workers.push(worker);
  return /treadle worker: task queue .*/.exec(worker.log())![0];
}

/** CLI start → worker runs the stage → SDK client approves → the item completes; all through the proxy. */
async function completeThrough(env: Record<string, string>, id: string): Promise<void> {
  const started = await treadle(['run', '--file', path.join(dir, 'pipeline.yaml'), '--input', '{}', '--id', id], env);
  expect({ code: started.code, stderr: started.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
  expect(started.stdout).toContain(id);
  const client = await TreadleClient.connect({ temporal: temporalSettings({ ...process.env, ...env }) });
  try {
    const deadline = Date.now() + 60_000;
    while (!(await client.getState(id)).pendingReviews.some((r) => r.stage === 'draft')) {
      if (Date.now() > deadline) throw new Error(`${id}: draft never waited for review`);
      await new Promise((r) => setTimeout(r, 200));
    }
    await client.approve(id, 'draft', { reviewer: 'tls-test' });
    expect((await client.result(id)).status).toBe('completed');
  } finally {
    await client.close();
  }
}

it('TLS with an API key: started by the CLI, run by treadle worker, reviewed through the SDK', async () => {
  const env = {
    ...baseEnv('secured-key'),
    TEMPORAL_ADDRESS: proxy.apiKeyAddress,
    TEMPORAL_API_KEY: proxy.apiKey,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: proxy.certs.ca,
  };
  const ready = await startWorker(env);
  expect(ready).toBe(
    `treadle worker: task queue secured-key on ${proxy.apiKeyAddress}, namespace default (TLS, API key)`,
  );
  await completeThrough(env, `secured-key-${Date.now()}`);
}, 120_000);

it('mTLS from a temporal.toml profile: started by the CLI, run by treadle worker, reviewed through the SDK', async () => {
  const toml = path.join(dir, 'temporal.toml');
  writeFileSync(
    toml,
    [
      '[profile.secure]',
      `address = "${proxy.mtlsAddress}"`,
      '[profile.secure.tls]',
      `server_ca_cert_path = "${proxy.certs.ca}"`,
      `client_cert_path = "${proxy.certs.clientCert}"`,
      `client_key_path = "${proxy.certs.clientKey}"`,
      '',
    ].join('\n'),
  );
  const env = { ...baseEnv('secured-mtls'), TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'secure' };
  const ready = await startWorker(env);
  expect(ready).toBe(
    `treadle worker: task queue secured-mtls on ${proxy.mtlsAddress}, namespace default (profile secure, mTLS)`,
  );
  await completeThrough(env, `secured-mtls-${Date.now()}`);
}, 120_000);

/**
 * The settings fail fast, in one line naming the setting, for `treadle status`, `treadle worker` (exit 2 both)
 * and `TreadleClient.connect()` (a TreadleError `config`).
 */
async function expectSettingNamed(what: string, settings: Record<string, string>, names: string): Promise<void> {
  const env = { ...baseEnv('secured-wrong'), ...settings };
  for (const args of [['status', 'any-id'], ['worker']]) {
    const run = await treadle(args, env);
    const lines = run.stderr.split('\n').filter(Boolean);
    expect({ what, args, code: run.code, lines: lines.length }).toEqual({ what, args, code: 2, lines: 1 });
    expect({ what, args, line: lines[0] }).toEqual({ what, args, line: expect.stringContaining(names) });
    expect({ what, args, line: lines[0] }).toEqual({
      what,
      args,
      line: expect.stringMatching(/^treadle( worker)?: cannot connect to the Temporal server at /),
    });
  }
  await expectDiagnosedBeforeDeadline(env, names);
  const refused = await TreadleClient.connect({ temporal: temporalSettings({ ...process.env, ...env }) }).then(
    async (client) => (await client.close(), undefined),
    (error: unknown) => error as TreadleError,
  );
  expect({ what, name: refused?.name, code: refused?.code, message: refused?.message }).toEqual({
    what,
    name: 'TreadleError',
    code: 'config',
    message: expect.stringContaining(names),
  });
}

it('wrong settings fail fast, in one line naming the setting, for the CLI, the worker and the SDK', async () => {
  const key = () => ({ TEMPORAL_ADDRESS: proxy.apiKeyAddress, TEMPORAL_API_KEY: proxy.apiKey });
  const cases: Array<[string, Record<string, string>, string]> = [
    [
      'a wrong CA',
      { ...key(), TEMPORAL_TLS_SERVER_CA_CERT_PATH: proxy.certs.wrongCa },
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
    ],
    ['no CA for a private one', { ...key() }, 'TEMPORAL_TLS_SERVER_CA_CERT_PATH'],
    [
      'a missing client certificate',
      { TEMPORAL_ADDRESS: proxy.mtlsAddress, TEMPORAL_TLS_SERVER_CA_CERT_PATH: proxy.certs.ca },
      'TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH',
    ],
    [
      'a server name the certificate does not list',
      { ...key(), TEMPORAL_TLS_SERVER_CA_CERT_PATH: proxy.certs.ca, TEMPORAL_TLS_SERVER_NAME: 'temporal.example.com' },
      'TEMPORAL_TLS_SERVER_NAME',
    ],
    ['plaintext to a TLS endpoint', { TEMPORAL_ADDRESS: proxy.apiKeyAddress }, 'it expects TLS: set TEMPORAL_TLS=true'],
  ];
  for (const [what, settings, names] of cases) await expectSettingNamed(what, settings, names);
}, 240_000);

describe('a refused credential is a setting to fix, not an unreachable server (issue 37 §2)', () => {
  /** The API-key port with the CA that signed its certificate. */
  const secured = () => ({ TEMPORAL_ADDRESS: proxy.apiKeyAddress, TEMPORAL_TLS_SERVER_CA_CERT_PATH: proxy.certs.ca });
  const cases: Array<[string, () => Record<string, string>, string]> = [
    [
      'a wrong API key, answered 403',
      () => ({ ...secured(), TEMPORAL_API_KEY: 'wrong-key' }),
      "it refused the API key (403 Forbidden): check TEMPORAL_API_KEY (or the profile's api_key)",
    ],
    [
      'no API key, answered 401',
      () => ({ ...secured(), TEMPORAL_TLS: 'true' }),
      "it asks for an API key (401 Unauthorized): set TEMPORAL_API_KEY (or the profile's api_key)",
    ],
    [
      'a revoked client certificate',
      () => ({
        TEMPORAL_ADDRESS: proxy.mtlsAddress,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH: proxy.certs.ca,
        TEMPORAL_TLS_CLIENT_CERT_PATH: proxy.certs.revokedCert,
        TEMPORAL_TLS_CLIENT_KEY_PATH: proxy.certs.revokedKey,
      }),
      'it refused the client certificate (400 Bad Request: revoked, expired or not signed by a CA it trusts): check TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH',
    ],
  ];
  it.each(cases)('%s', (what, settings, names) => expectSettingNamed(what, settings(), names), 60_000);
});

it('a credential refused after the connection check is a setting to fix too (issue 37 §2)', async () => {
  const env = {
    ...baseEnv('secured-denied'),
    TEMPORAL_ADDRESS: proxy.deniedAddress,
    TEMPORAL_API_KEY: proxy.apiKey,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: proxy.certs.ca,
  };
  const refusal = `cannot use the Temporal server at ${proxy.deniedAddress}: it refused the API key (PERMISSION_DENIED: Request unauthorized.): check TEMPORAL_API_KEY (or the profile's api_key); it must grant access to namespace default`;
  for (const args of [
    ['status', 'any-id'],
    ['reviews'],
    ['run', '--file', path.join(dir, 'pipeline.yaml'), '--input', '{}'],
  ]) {
    const run = await treadle(args, env);
    expect({ args, code: run.code, stderr: run.stderr }).toEqual({ args, code: 2, stderr: `treadle: ${refusal}\n` });
  }
  // The worker connects, says it could not check the search attributes, then stops at its first namespace call.
  const worker = await treadle(['worker'], env);
  const lines = worker.stderr.split('\n').filter(Boolean);
  expect({ code: worker.code, last: lines.at(-1) }).toEqual({ code: 2, last: `treadle: ${refusal}` });
  const client = await TreadleClient.connect({ temporal: temporalSettings({ ...process.env, ...env }) });
  try {
    for (const call of [() => client.getState('any-id'), () => client.listPendingDecisions()]) {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e as TreadleError,
      );
      expect({ name: error?.name, code: error?.code, message: error?.message }).toEqual({
        name: 'TreadleError',
        code: 'config',
        message: refusal,
      });
    }
  } finally {
    await client.close();
  }
}, 120_000);
