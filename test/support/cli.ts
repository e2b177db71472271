/** Running the built `treadle` command against a test harness, as users run it. */
import { execFile } from 'node:child_process';
import path from 'node:path';
import type { Harness } from './harness';

const BIN = path.join(__dirname, '..', '..', 'bin', 'treadle.js');

/** Exit code and output of one run. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `treadle …` with the harness's server, task queue and blob store; `env` adds or overrides variables. */
export function runTreadle(h: Harness, args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      {
        env: {
          ...process.env,
          TEMPORAL_ADDRESS: h.address,
          TREADLE_TASK_QUEUE: h.taskQueue,
          TREADLE_BLOB_DIR: h.blobs.dir,
          ...env,
        },
        timeout: 60_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
