/**
 * A local PostgreSQL server in a folder of its own: `initdb` once, then `postgres` on a port of 127.0.0.1 with its
 * socket in that folder, started and stopped as often as a caller needs (the cluster's fault tests restart it
 * under a running Temporal server). Runs as the `postgres` system user when this process is root (PostgreSQL
 * refuses root), under the watchdog that stops it when this process ends, however it ends (src/server/watchdog.ts). Binaries from
 * /usr/lib/postgresql/15/bin unless `PG_BIN` names another folder. Uses the binaries only (no client library).
 */
import { spawnSync } from 'node:child_process';
import { chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startWatched, type WatchedProcess } from './watchdog';

/** Options for {@link initPostgres}. */
export interface PostgresOptions {
  /** An empty or missing folder; the data lives in `<dir>/data`, the socket and log beside it. */
  dir: string;
  port: number;
  /** The superuser `initdb` creates (trust authentication on 127.0.0.1). */
  user: string;
  /** `-c name=value` settings, e.g. `{ max_connections: '300' }`. */
  settings?: Record<string, string>;
}

/** A PostgreSQL server that can be started, stopped and killed. */
export interface PostgresServer {
  readonly port: number;
  readonly user: string;
  readonly logFile: string;
  /** Starts the server and resolves once it accepts connections (30 s at most). */
  start(): Promise<void>;
  /** Stops it: `fast` (SIGINT, the default) ends sessions and checkpoints; `immediate` (SIGQUIT) recovers at the next start. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  /** The server's process id while it runs. */
  pid(): number | undefined;
}

/** Runs `initdb` in `options.dir` and returns the (stopped) server. */
export function initPostgres(options: PostgresOptions): PostgresServer {
  const bin = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
  const data = path.join(options.dir, 'data');
  const logFile = path.join(options.dir, 'postgres.log');
  mkdirSync(options.dir, { recursive: true });
  const owner = process.getuid?.() === 0 ? postgresUser() : undefined;
  if (owner) chownSync(options.dir, owner.uid, owner.gid);
  const as = owner ? { uid: owner.uid, gid: owner.gid } : {};
  const init = spawnSync(path.join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', options.user, '--no-sync'], {
    ...as,
    encoding: 'utf8',
  });
  if (init.status !== 0)
    throw new Error(`initdb (${bin}; set PG_BIN to another folder) failed: ${init.error ?? ''}${init.stderr}`);
  const settings = { listen_addresses: '127.0.0.1', ...options.settings };
  const args = ['-D', data, '-p', String(options.port), '-k', options.dir];
  for (const [name, value] of Object.entries(settings)) args.push('-c', `${name}=${value}`);

  let server: WatchedProcess | undefined;
  const running = (): boolean => server !== undefined && server.exited() === undefined;
  return {
    port: options.port,
    user: options.user,
    logFile,
    pid: () => (running() ? server!.pid() : undefined),
    start: async () => {
      if (running()) return;
      // Under the watchdog, so it goes away with this process however that ends (src/server/watchdog.ts).
      writeFileSync(logFile, '', { flag: 'a' });
      if (owner) chownSync(logFile, owner.uid, owner.gid);
      server = startWatched({
        command: path.join(bin, 'postgres'),
        args,
        logFile,
        ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
        stopSignal: 'SIGINT',
      });
      await server.started;
      const deadline = Date.now() + 30_000;
      while (!accepting(bin, options.port)) {
        if (!running()) throw new Error(`postgres ${server.exited()} while starting:\n${tail(logFile)}`);
        if (Date.now() > deadline)
          throw new Error(`postgres did not accept connections within 30 s:\n${tail(logFile)}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    },
    stop: async (mode = 'fast') => {
      if (!running()) return;
      const pid = server!.pid();
      if (pid !== undefined) process.kill(pid, mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
      await server!.stop();
    },
  };
}

/** True when the server on 127.0.0.1:port accepts connections (`pg_isready`). */
function accepting(bin: string, port: number): boolean {
  return spawnSync(path.join(bin, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port)]).status === 0;
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-15).join('\n');
  } catch {
    return '(no log)';
  }
}

/** The uid and gid of the `postgres` system user. */
export function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string): number => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const user = { uid: id('-u'), gid: id('-g') };
  if (!Number.isInteger(user.uid) || user.uid === 0)
    throw new Error('running as root, PostgreSQL needs the "postgres" user to run as (install the postgresql package)');
  return user;
}
