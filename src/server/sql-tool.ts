/** Runs Temporal's sql tool (temporal-sql-tool) against a local PostgreSQL, for src/server/cluster.ts. */
import { spawn } from 'node:child_process';

/** Where the tool connects. */
export interface SqlToolTarget {
  tool: string;
  port: number;
  user: string;
  database: string;
}

/** Runs one command (`create-database`, `setup-schema -v 0.0`, …); rejects with the tool's output when it fails. */
export function runSqlTool(target: SqlToolTarget, command: string[]): Promise<void> {
  const args = [
    '--plugin',
    'postgres12',
    '--ep',
    '127.0.0.1',
    '-p',
    String(target.port),
    '-u',
    target.user,
    '--db',
    target.database,
    ...command,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(target.tool, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve()
        : reject(
            new Error(
              `sql ${command.join(' ')} on ${target.database} failed (exit ${code}):\n${output.trim().split('\n').slice(-5).join('\n')}`,
            ),
          ),
    );
  });
}
