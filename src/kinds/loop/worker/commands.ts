/**
 * The commands a loop runs on the worker: each iteration's `verify` commands and a queue loop's emptiness
 * check. Every one must be on the worker's allow-list (`TREADLE_LOOP_COMMANDS`) and runs without a shell.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { readQueueOutput, type QueueReading } from '../termination';
import type { IterationRecord } from '../spec';
import type { StoredPlan } from './run-folder';
import { truncateText } from '../../../model/limits';
import { checkCommand, commandList, PASSED_ENV, runTestCommand } from '../../../activities/test-command';

/** JSON list of argv prefixes `verify` and queue commands may use; default none. */
export const LOOP_COMMANDS_ENV = 'TREADLE_LOOP_COMMANDS';
/** The seed's beads queue, when a queue loop names no provider. */
export const DEFAULT_QUEUE_COMMAND = 'bd ready --count';
/** A verify or queue command is killed after this long. */
const COMMAND_TIMEOUT_MS = 120_000;
/** What verify.log and the output snapshot may hold in the history: nothing; what a summary line shows of a command. */
const MAX_VERIFY_SUMMARY = 300;

/** Where and with what an iteration's verify commands run. */
export interface VerifyRun {
  plan: StoredPlan;
  workspace: string;
  /** The iteration's folder (absolute), which receives `verify.log`. */
  iterAbs: string;
  /** The iteration's file paths the commands may name (`output`, `progress`, `status`, `CTX`). */
  vars: Record<string, string>;
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
}

/** Runs the plan's verify commands in the workspace, writing `verify.log` to the iteration's folder. */
export async function runVerify({
  plan,
  workspace,
  iterAbs,
  vars,
  env,
  signal,
}: VerifyRun): Promise<IterationRecord['verify']> {
  const allowed = commandList(env, LOOP_COMMANDS_ENV, []);
  const log: string[] = [];
  const failed: string[] = [];
  for (const command of plan.verify) {
    const argv = argvOf(
      substitute(command, {
        SESSION: plan.session,
        OUTPUT: vars.output!,
        PROGRESS: vars.progress!,
        STATUS: vars.status!,
        CTX: vars.CTX!,
      }),
    );
    const refused = checkCommand(argv, allowed, {
      what: 'verify command',
      env: LOOP_COMMANDS_ENV,
      args: 'relative file paths',
    });
    if (refused) {
      log.push(`$ ${argv.join(' ')}\n${refused}\n`);
      failed.push(`${argv.join(' ')} (not allowed)`);
      continue;
    }
    try {
      const run = await runTestCommand({ cwd: workspace, command: argv, timeoutMs: COMMAND_TIMEOUT_MS, signal });
      log.push(
        `$ ${argv.join(' ')}\n${run.output}${run.output.endsWith('\n') || run.output === '' ? '' : '\n'}(exit ${run.exitCode ?? run.signal}${run.timedOut ? ', timed out' : ''})\n`,
      );
      if (!run.passed)
        failed.push(`${argv.join(' ')} (exit ${run.exitCode ?? run.signal}${run.timedOut ? ', timed out' : ''})`);
    } catch (error) {
      if (signal.aborted) throw error;
      log.push(`$ ${argv.join(' ')}\n${(error as Error).message}\n`);
      failed.push(`${argv.join(' ')} (could not start)`);
    }
  }
  await writeFile(path.join(iterAbs, 'verify.log'), log.join('\n'));
  const summary =
    failed.length === 0
      ? `${plan.verify.length} command${plan.verify.length === 1 ? '' : 's'} passed`
      : failed.join('; ');
  return { ran: true, passed: failed.length === 0, summary: truncateText(summary, MAX_VERIFY_SUMMARY) };
}

/** Asks a command-based queue how many items it has left (a signal-fed queue is not checked here). */
export async function checkQueue(plan: StoredPlan, env: NodeJS.ProcessEnv, workspace: string): Promise<QueueReading> {
  const queue = plan.termination.queue;
  if (queue?.provider === 'signal') return { kind: 'failed', error: 'a signal-fed queue is not checked by command' };
  const argv = argvOf(queue?.provider === 'command' ? queue.command : DEFAULT_QUEUE_COMMAND);
  const refused = checkCommand(argv, commandList(env, LOOP_COMMANDS_ENV, []), {
    what: 'queue command',
    env: LOOP_COMMANDS_ENV,
    args: 'relative file paths',
  });
  if (refused) return { kind: 'failed', error: refused };
  return new Promise((resolve) => {
    const passed = Object.fromEntries(PASSED_ENV.flatMap((k) => (env[k] !== undefined ? [[k, env[k]]] : [])));
    execFile(
      argv[0]!,
      argv.slice(1),
      { cwd: workspace, env: passed, timeout: COMMAND_TIMEOUT_MS, maxBuffer: 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error)
          resolve({ kind: 'failed', error: truncateText(`${argv.join(' ')}: ${stderr.trim() || error.message}`, 500) });
        else resolve(readQueueOutput(stdout));
      },
    );
  });
}

/** `${NAME}` replaced for the names given; anything else is left as written. */
export function substitute(text: string, variables: Record<string, string>): string {
  return text.replace(/\$\{([A-Z_]+)\}/g, (whole, name: string) => variables[name] ?? whole);
}

/** A command line as argv: split on whitespace, with "double" or 'single' quotes keeping spaces (no shell). */
export function argvOf(command: string): string[] {
  const argv: string[] = [];
  const pattern = /"([^"]*)"|'([^']*)'|(\S+)/g;
  for (let m = pattern.exec(command); m !== null; m = pattern.exec(command)) argv.push(m[1] ?? m[2] ?? m[3]!);
  return argv;
}
