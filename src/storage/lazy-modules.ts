/**
 * What storage loads on first use (docs/architecture.md "Lazy loading"):
 * - the call log backends, when a log is opened: the configuration, read at every CLI start, uses
 *   ./open-call-log.ts's checks, and the backends load node:crypto (+25 ms on `treadle --help`, measured);
 * - their drivers, with the first log opened, so that `require('treadle')` loads neither (pg is an optional peer
 *   dependency, through `loadOptional`; better-sqlite3 is a native module);
 * - the activity context, which the CLI's `treadle calls` never needs (~50 modules);
 * - the schemas (zod), which a client that only lists or reads state never needs (issue 26 §5).
 */
import type Database from 'better-sqlite3';
import type * as Pg from 'pg';
import type * as ActivityModule from '@temporalio/activity';
import type * as ShapesModule from '../model/shapes';
import type * as PostgresCallLogModule from './postgres-call-log';
import type * as SqliteCallLogModule from './sqlite-call-log';

/**
 * Each module, required the first time it is asked for (`require` caches it).
 * @internal Left out of the published declarations (tsconfig.build.json `stripInternal`), which must name no
 * optional package; the table is no API.
 */
export const load = {
  pg: (): typeof Pg => require('pg'),
  betterSqlite3: (): typeof Database => require('better-sqlite3'),
  activity: (): typeof ActivityModule => require('@temporalio/activity'),
  shapes: (): typeof ShapesModule => require('../model/shapes'),
  postgresCallLog: (): typeof PostgresCallLogModule => require('./postgres-call-log'),
  sqliteCallLog: (): typeof SqliteCallLogModule => require('./sqlite-call-log'),
};
