/**
 * A real PostgreSQL server for tests (the call log's shared backend): src/server/postgres.ts's server (`initdb`,
 * then `postgres` as the `postgres` user when the tests run as root) in a temporary folder, on a free port of
 * 127.0.0.1, with fsync off; `stop()` removes the folder.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { freePort } from '../../src/server/dev-server';
import { initPostgres } from '../../src/server/postgres';

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
  // In the system's tmp, not the test run's folder: that one is private to root, and postgres runs as its own user.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-postgres-'));
  const port = await freePort();
  const server = initPostgres({ dir, port, user: USER, settings: { fsync: 'off' } });
  await server.start();
  const url = (database = 'postgres'): string => `postgres://${USER}@127.0.0.1:${port}/${database}`;
  return {
    url,
    createDatabase: async (name) => {
      const client = new Client({ connectionString: url() });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name}"`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
