/**
 * A dev server lives exactly as long as the process that started it:
 * - that process SIGKILLed, or crashing natively (abort), takes the server with it: process gone, port free;
 * - `stop()` stops it gracefully and frees the port;
 * - it runs in its own process group, so a Ctrl-C in the terminal reaches only Treadle, which stops its
 *   worker before the server;
 * - it runs SQLite in WAL mode with synchronous=NORMAL unless TREADLE_SQLITE_PRAGMAS says otherwise, and serves
 *   its metrics when asked.
 * The parent processes run the build (lib/), as the CLI does.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort, startDevServer, type DevServer } from '../../src/server/dev-server';
import { eventually } from '../support/harness';

const ROOT = path.join(__dirname, '..', '..');
const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? os.tmpdir(), 'lifetime-'));
const parents = new Set<ChildProcess>();
const servers: DevServer[] = [];

afterEach(async () => {
  for (const parent of parents) if (parent.exitCode === null && parent.signalCode === null) parent.kill('SIGKILL');
  parents.clear();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

/** True when no process has this id (a zombie counts as gone: it holds no port and no file). */
function gone(pid: number): boolean {
  const ps = spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' });
  return ps.status !== 0 || ps.stdout.trim().startsWith('Z');
}

/** The full command line of a process. */
function commandLine(pid: number): string {
  return spawnSync('ps', ['-ww', '-o', 'args=', '-p', String(pid)], { encoding: 'utf8' }).stdout;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** Starts a Node process that starts a dev server and then waits; resolves with the server's pid and port. */
async function parentWithServer(
  name: string,
  then: string,
): Promise<{ parent: ChildProcess; pid: number; port: number }> {
  const port = await freePort();
  const script = `
    const { startDevServer } = require(${JSON.stringify(path.join(ROOT, 'lib', 'server', 'dev-server.js'))});
    startDevServer({ port: ${port}, dbFile: ${JSON.stringify(path.join(dir, `${name}.sqlite`))}, headless: true, allowDownload: false, progress: () => {} })
      .then((server) => { process.stdout.write(JSON.stringify({ pid: server.pid }) + '\\n'); ${then} })
      .catch((error) => { process.stderr.write(error.message + '\\n'); process.exit(1); });`;
  const parent = spawn(process.execPath, ['-e', script], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  parents.add(parent);
  let stdout = '';
  let stderr = '';
  parent.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  parent.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const { pid } = await eventually(
    async () => {
      if (parent.exitCode !== null) throw new Error(`the parent exited with ${parent.exitCode}: ${stderr}`);
      const line = stdout.split('\n')[0];
      return line ? (JSON.parse(line) as { pid: number }) : undefined;
    },
    60_000,
    'the parent to start its server',
  );
  return { parent, pid, port };
}

it.each([
  ['SIGKILLed', 'sigkill', ''],
  // Aborts when told to (not after a fixed delay): on a loaded machine a timer could fire before the checks below.
  ['crashing natively (abort)', 'abort', "process.on('SIGUSR2', () => process.abort());"],
])(
  'takes the server with it when the parent is %s',
  async (_how, name, then) => {
    const { parent, pid, port } = await parentWithServer(name, then);
    expect(gone(pid)).toBe(false);
    expect(await portFree(port)).toBe(false);
    const ended = new Promise<NodeJS.Signals | null>((resolve) =>
      parent.once('exit', (_code, signal) => resolve(signal)),
    );
    parent.kill(name === 'sigkill' ? 'SIGKILL' : 'SIGUSR2');
    expect(await ended).toBe(name === 'sigkill' ? 'SIGKILL' : 'SIGABRT');
    const after = Date.now();
    await eventually(
      async () => (gone(pid) && (await portFree(port)) ? true : undefined),
      15_000,
      `server ${pid} to go and port ${port} to be free`,
    );
    // The server gets SIGTERM (a clean SQLite shutdown, ~2-3 s), SIGKILL only after 10 s.
    expect(Date.now() - after).toBeLessThan(10_000);
  },
  90_000,
);

it('stops gracefully on stop(), runs in its own process group, and frees the port', async () => {
  const port = await freePort();
  const server = await startDevServer({
    port,
    dbFile: path.join(dir, 'stop.sqlite'),
    headless: true,
    allowDownload: false,
    progress: () => undefined,
  });
  servers.push(server);
  const pid = server.pid!;
  const pgid = spawnSync('ps', ['-o', 'pgid=', '-p', String(pid)], { encoding: 'utf8' }).stdout.trim();
  const ours = spawnSync('ps', ['-o', 'pgid=', '-p', String(process.pid)], { encoding: 'utf8' }).stdout.trim();
  expect(pgid).not.toBe('');
  expect(pgid).not.toBe(ours);
  expect(spawnSync('ps', ['-o', 'comm=', '-p', String(pid)], { encoding: 'utf8' }).stdout.trim()).toBe('temporal');
  await server.stop();
  expect(gone(pid)).toBe(true);
  expect(await portFree(port)).toBe(true);
}, 60_000);

it('runs SQLite in WAL mode with synchronous=NORMAL, and TREADLE_SQLITE_PRAGMAS overrides pragma by pragma (and serves metrics with metricsPort)', async () => {
  const previous = process.env.TREADLE_SQLITE_PRAGMAS;
  try {
    delete process.env.TREADLE_SQLITE_PRAGMAS;
    const dbFile = path.join(dir, 'pragmas.sqlite');
    const server = await startDevServer({
      port: await freePort(),
      dbFile,
      headless: true,
      allowDownload: false,
      progress: () => undefined,
    });
    servers.push(server);
    expect(server.sqlitePragmas).toEqual({ journal_mode: 'WAL', synchronous: 'NORMAL' });
    expect(commandLine(server.pid!)).toContain('--sqlite-pragma journal_mode=WAL --sqlite-pragma synchronous=NORMAL');
    // WAL is really on: SQLite keeps the write-ahead log next to the database.
    await eventually(async () => (existsSync(`${dbFile}-wal`) ? true : undefined), 10_000, 'the -wal file');

    process.env.TREADLE_SQLITE_PRAGMAS = 'synchronous=FULL';
    // This one also serves its Prometheus metrics (the benchmark counts persistence operations with them).
    const metricsPort = await freePort();
    const full = await startDevServer({
      port: await freePort(),
      dbFile: path.join(dir, 'full.sqlite'),
      headless: true,
      allowDownload: false,
      metricsPort,
      progress: () => undefined,
    });
    servers.push(full);
    expect(full.sqlitePragmas).toEqual({ journal_mode: 'WAL', synchronous: 'FULL' });
    expect(commandLine(full.pid!)).toContain('--sqlite-pragma journal_mode=WAL --sqlite-pragma synchronous=FULL');
    expect(full.metricsUrl).toBe(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(server.metricsUrl).toBeUndefined();
    const metrics = await (await fetch(full.metricsUrl!)).text();
    expect(metrics).toMatch(/^persistence_requests(_total)?\{[^}]*operation="[A-Za-z]+"/m);
  } finally {
    if (previous === undefined) delete process.env.TREADLE_SQLITE_PRAGMAS;
    else process.env.TREADLE_SQLITE_PRAGMAS = previous;
  }
}, 60_000);
