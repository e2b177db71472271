/**
 * When `startDevServer` declares a server ready, and when it gives up:
 * - a gRPC probe that failed before the server existed (the first run's probe before `go install`) does not
 *   delay readiness: the old readiness check shared that probe's subchannel, stuck in reconnect backoff;
 * - a server that is slow to start is waited for, with progress naming what is awaited and the log file;
 * - a server process that exits fails the start at once, quoting its log;
 * - a server that crashes while starting (a Go panic, exit code 2) is started again, once; the error of one that
 *   crashes twice quotes the panic's first line, not only the end of its stack trace;
 * - a server that stays alive but never answers is stopped at the deadline (TREADLE_SERVER_START_TIMEOUT),
 *   not left behind;
 * - a port that is already taken is reported before anything is started.
 */
import { isAlive } from '../support/processes';
import { Connection } from '@temporalio/client';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort, startDevServer, type DevServer } from '../../src/server/dev-server';
import { resolveTemporalCli } from '../../src/server/temporal-cli';
import { eventually } from '../support/harness';

const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? os.tmpdir(), 'readiness-'));
let realBinary: string;
const started: DevServer[] = [];

beforeAll(async () => {
  const { binary } = await resolveTemporalCli({ allowBuild: false });
  if (!binary) throw new Error('no Temporal CLI binary; the global setup should have found one');
  realBinary = binary.path;
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()));
});

/** Runs `fn` with one environment variable set, restoring it after. */
async function withEnv<T>(name: string, value: string, fn: () => Promise<T>): Promise<T> {
  const previous = process.env[name];
  process.env[name] = value;
  try {
    return await fn();
  } finally {
    if (previous === undefined) delete process.env[name];
    else process.env[name] = previous;
  }
}

/** Runs `fn` with `TEMPORAL_CLI` pointing at a shell script, so the resolver picks it. */
function withFakeCli<T>(name: string, script: string, fn: () => Promise<T>): Promise<T> {
  const file = path.join(dir, name);
  writeFileSync(file, `#!/bin/sh\n${script}\n`);
  chmodSync(file, 0o755);
  return withEnv('TEMPORAL_CLI', file, fn);
}

/** A listener that accepts and drops every connection, counting them: each is one gRPC connection attempt. */
async function droppingListener(port: number): Promise<{ attempts: () => number; close: () => Promise<void> }> {
  let attempts = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    attempts += 1;
    sockets.add(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    attempts: () => attempts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

it('is not delayed by a gRPC probe that failed before the server existed', async () => {
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const listener = await droppingListener(port);
  // The probe the old `treadle dev` made before building the CLI: default options, failing. Its channel
  // keeps reconnecting the process-wide subchannel for this address with exponential backoff
  // (1 s, 1.6 s, 2.6 s, ... each +-20%). `Connection.connect` is `lazy` + `ensureConnected`; lazy keeps a
  // handle so the test can close it at the end.
  const early = Connection.lazy({ address, connectTimeout: 1_000 });
  await expect(early.ensureConnected()).rejects.toThrow('Failed to connect before the deadline');
  try {
    // After the 7th attempt (~26 s in) the next one is at least 13 s away (16.8 s nominal).
    await eventually(async () => (listener.attempts() >= 7 ? true : undefined), 60_000, 'the 7th reconnection attempt');
    await listener.close();
    const before = Date.now();
    started.push(
      await startDevServer({
        port,
        dbFile: path.join(dir, 'after-probe.sqlite'),
        headless: true,
        allowDownload: false,
        progress: () => undefined,
      }),
    );
    const readyMs = Date.now() - before;
    // A fresh process sees the server in about a second; so must we (it took 35-60 s and more before).
    expect(readyMs).toBeLessThan(8_000);
    // The hazard is still there for connections that share the subchannel: this is the old readiness
    // probe, and it fails although the server answers.
    await expect(Connection.connect({ address, connectTimeout: 1_000 })).rejects.toThrow(
      'Failed to connect before the deadline',
    );
  } finally {
    await early.close();
    await listener.close().catch(() => undefined);
  }
}, 120_000);

it('waits for a server that is slow to start, saying what it waits for and where the log is', async () => {
  const port = await freePort();
  const dbFile = path.join(dir, 'slow.sqlite');
  const messages: string[] = [];
  const server = await withFakeCli('slow-temporal', `sleep 7\nexec "${realBinary}" "$@"`, () =>
    startDevServer({ port, dbFile, headless: true, allowDownload: false, progress: (m) => messages.push(m) }),
  );
  started.push(server);
  expect(server.address).toBe(`127.0.0.1:${port}`);
  const waiting = messages.filter((m) => m.startsWith('Waiting for the Temporal dev server'));
  expect(waiting.length).toBeGreaterThan(0);
  expect(waiting[0]).toMatch(
    new RegExp(
      `^Waiting for the Temporal dev server \\(pid ${server.pid}\\) to answer on 127\\.0\\.0\\.1:${port}: \\d+s so far, giving up after 300s \\(last: nothing listens on 127\\.0\\.0\\.1:${port} yet\\); its log: ${dbFile}\\.log$`,
    ),
  );
}, 60_000);

it('fails at once, quoting its log, when the server process exits', async () => {
  const port = await freePort();
  const before = Date.now();
  const failure = await withFakeCli('exiting-temporal', 'echo "Error: unknown flag: --bogus" >&2\nexit 3', () =>
    startDevServer({
      port,
      dbFile: path.join(dir, 'exits.sqlite'),
      headless: true,
      allowDownload: false,
      progress: () => undefined,
    }).then(
      () => undefined,
      (error: Error) => error,
    ),
  );
  expect(Date.now() - before).toBeLessThan(10_000);
  expect(failure?.message).toMatch(
    /^the Temporal dev server \(\S+exiting-temporal, from TEMPORAL_CLI\) did not start on 127\.0\.0\.1:\d+: the server process exited with code 3 before it answered\n/,
  );
  expect(failure?.message).toContain('Error: unknown flag: --bogus');
  expect(failure?.message).toContain(`(full log: ${path.join(dir, 'exits.sqlite.log')})`);
}, 30_000);

/** A Go panic as the CLI prints it: the reason, then a stack trace longer than an error message's tail. */
const PANIC = [
  'echo "panic: failed assigning ephemeral port: failed to assign a free port: accept: too many open files" >&2',
  'echo "" >&2',
  'echo "goroutine 1 [running]:" >&2',
  'for i in 1 2 3 4 5 6 7 8; do echo "main.frame$i()" >&2; echo "	/src/frame$i.go:$i +0x1$i" >&2; done',
  'exit 2',
].join('\n');

it('starts a server that crashed while starting again, once, and says so', async () => {
  const port = await freePort();
  const runs = path.join(dir, 'crash-once.runs');
  const messages: string[] = [];
  const server = await withFakeCli(
    'crash-once-temporal',
    `echo run >> "${runs}"\nif [ "$(wc -l < "${runs}")" -eq 1 ]; then\n${PANIC}\nfi\nexec "${realBinary}" "$@"`,
    () =>
      startDevServer({
        port,
        dbFile: path.join(dir, 'crash-once.sqlite'),
        headless: true,
        allowDownload: false,
        progress: (m) => messages.push(m),
      }),
  );
  started.push(server);
  expect(readFileSync(runs, 'utf8').trim().split('\n')).toHaveLength(2);
  expect(messages).toContain(
    'The Temporal dev server crashed while starting (panic: failed assigning ephemeral port: failed to assign a free port: accept: too many open files); starting it again',
  );
  expect(server.address).toBe(`127.0.0.1:${port}`);
}, 60_000);

it('gives up on a server that crashes twice, quoting the panic and the end of its trace', async () => {
  const runs = path.join(dir, 'crash-always.runs');
  const failure = await withFakeCli('crash-always-temporal', `echo run >> "${runs}"\n${PANIC}`, async () =>
    startDevServer({
      port: await freePort(),
      dbFile: path.join(dir, 'crash-always.sqlite'),
      headless: true,
      allowDownload: false,
      progress: () => undefined,
    }).then(
      () => undefined,
      (error: Error) => error,
    ),
  );
  expect(readFileSync(runs, 'utf8').trim().split('\n')).toHaveLength(2);
  expect(failure?.message).toMatch(
    /did not start on 127\.0\.0\.1:\d+: the server process exited with code 2 before it answered\n {4}panic: failed assigning ephemeral port: .*too many open files\n {4}\.\.\.\n(?: {4}.*\n){3} {4}\t\/src\/frame8\.go:8 \+0x18\n/,
  );
}, 30_000);

it('stops a server that is alive but never answers once TREADLE_SERVER_START_TIMEOUT passes', async () => {
  const port = await freePort();
  const pidFile = path.join(dir, 'mute.pid');
  const failure = await withEnv('TREADLE_SERVER_START_TIMEOUT', '3', () =>
    withFakeCli('mute-temporal', `echo $$ > "${pidFile}"\nexec sleep 600`, () =>
      startDevServer({
        port,
        dbFile: path.join(dir, 'mute.sqlite'),
        headless: true,
        allowDownload: false,
        progress: () => undefined,
      }).then(
        () => undefined,
        (error: Error) => error,
      ),
    ),
  );
  expect(failure?.message).toMatch(
    new RegExp(
      `did not start on 127\\.0\\.0\\.1:${port}: no answer within 3s although the process is alive \\(last: nothing listens on 127\\.0\\.0\\.1:${port} yet\\); raise TREADLE_SERVER_START_TIMEOUT \\(seconds\\) if this machine is slow`,
    ),
  );
  const pid = Number(readFileSync(pidFile, 'utf8'));
  expect(isAlive(pid)).toBe(false);
}, 30_000);

it('reports a port that another process holds before starting anything', async () => {
  const port = await freePort();
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));
  try {
    await expect(
      startDevServer({
        port,
        dbFile: path.join(dir, 'taken.sqlite'),
        headless: true,
        allowDownload: false,
        progress: () => undefined,
      }),
    ).rejects.toThrow(
      `cannot start a Temporal dev server on 127.0.0.1:${port}: another process already listens there (stop it, or choose another port)`,
    );
  } finally {
    await new Promise<void>((resolve) => holder.close(() => resolve()));
  }
});
