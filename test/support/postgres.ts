/**
 * A real PostgreSQL server for tests (the call log's shared backend): `initdb` into a temporary folder, then
 * `postgres` on a free port of 127.0.0.1 with its socket in that folder and fsync off. Started as the `postgres`
 * user when the tests run as root (PostgreSQL refuses root), spawned directly with that uid so teardown can
 * SIGTERM the server's own pid. Binaries from /usr/lib/postgresql/15/bin unless `PG_BIN` names another folder.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { freePort } from '../../src/server/dev-server';
import { eventually } from './harness';

/** A running test server. */
export interface TestPostgres {
  /** `postgres://treadle@127.0.0.1:<port>/<database>` for a database on this server. */
  url(database?: string): string;
  /** Creates an empty database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

const USER = 'treadle';

/** Starts a server; it is stopped and its folder removed by `stop()`. */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
  // In the system's tmp, not the test run's folder: that one is private to root, and postgres runs as its own user.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-postgres-'));
  const data = path.join(dir, 'data');
  const owner = process.getuid?.() === 0 ? postgresUser() : undefined;
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const as = owner ? { uid: owner.uid, gid: owner.gid } : {};

  const init = spawnSync(path.join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', USER, '--no-sync'], {
    ...as,
    encoding: 'utf8',
  });
  if (init.status !== 0)
    throw new Error(`initdb (${bin}; set PG_BIN to another folder) failed: ${init.error ?? ''}${init.stderr}`);

  const port = await freePort();
  const server: ChildProcess = spawn(
    path.join(bin, 'postgres'),
    ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'],
    { ...as, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  server.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const url = (database = 'postgres'): string => `postgres://${USER}@127.0.0.1:${port}/${database}`;
  const admin = async <T>(use: (client: Client) => Promise<T>): Promise<T> => {
    const client = new Client({ connectionString: url() });
    await client.connect();
    try {
      return await use(client);
    } finally {
      await client.end();
    }
  };
  await eventually(
    async () => {
      if (server.exitCode !== null) throw new Error(`postgres exited:\n${log}`);
      return admin(async (client) => (await client.query('SELECT 1')).rowCount === 1).catch(() => undefined);
    },
    30_000,
    'postgres accepting connections',
  );
  return {
    url,
    createDatabase: async (name) => {
      await admin((client) => client.query(`CREATE DATABASE "${name}"`));
      return url(name);
    },
    stop: async () => {
      if (server.exitCode === null) {
        const exited = new Promise((resolve) => server.once('exit', resolve));
        server.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The uid and gid of the `postgres` system user. */
function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string): number => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const user = { uid: id('-u'), gid: id('-g') };
  if (!Number.isInteger(user.uid) || user.uid === 0)
    throw new Error('running as root, PostgreSQL needs the "postgres" user to run as (install the postgresql package)');
  return user;
}
