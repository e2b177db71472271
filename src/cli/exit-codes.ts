/**
 * The exit codes (docs/cli.md#exit-codes), so scripts can branch on them: of a command that failed (2 when what
 * it was given cannot work, else 1), of the commands that report an outcome (`run|loop|tdd --wait`, `watch`,
 * `result`), and the commands a person runs when one of those stops at their turn.
 */
import type { HumanRequest, PendingReview } from '../model/state';
import type { ApprovalRequest } from '../kinds/approval/shapes';
import type { LoopState } from '../kinds/loop/shapes';

/** 0 completed, 1 failed, 2 a usage or configuration error, 3 waiting for a person, 4 cancelled (`treadle cancel`). */
export const EXIT = { completed: 0, failed: 1, usage: 2, waiting: 3, cancelled: 4 } as const;

/** The error codes of what a command was given and cannot use (an argument, a file, a spec, a setting): exit 2. */
const USAGE_CODES: ReadonlySet<string> = new Set(['usage', 'config', 'invalid_pipeline', 'invalid_input']);

/** Something a command was given that cannot work: an argument, a file it names or a spec in it (exit 2). */
export class UsageError extends Error {
  readonly code = 'usage';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'UsageError';
  }
}

/**
 * Reads what a command was given (its files, its input, the spec in them) before it starts anything: a
 * failure there is a {@link UsageError}, so a script can tell "you asked wrong" (2) apart from "the work failed" (1).
 */
export function given<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (exitCodeOfError(error) === EXIT.usage) throw error;
    throw new UsageError(error instanceof Error ? error.message : String(error), { cause: error });
  }
}

/** The exit code of a command that threw: 2 for what it was given or configured with, else 1. */
export function exitCodeOfError(error: unknown): number {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && USAGE_CODES.has(code) ? EXIT.usage : EXIT.failed;
}

/** What a finished watch knows of a work item or TDD node: its status and what a person owes it. */
export interface WatchedOutcome {
  status: string;
  pendingReviews?: PendingReview[];
  approvals?: ApprovalRequest[];
  humanRequests?: HumanRequest[];
}

/**
 * The exit code for a work item's or TDD node's status, or Temporal's status of a closed execution (`CANCELLED`):
 * a cancelled one is 4, a terminated one counts as failed.
 */
export function exitCodeOf(status: string): number {
  if (status === 'completed' || status === 'merged') return EXIT.completed;
  if (status === 'waiting_review' || status === 'waiting_approval') return EXIT.waiting;
  if (status === 'cancelled' || status === 'CANCELLED') return EXIT.cancelled;
  return EXIT.failed;
}

/** The commands that give the decisions an item waits for, one a line; empty when it waits for none. */
function decisionCommands(id: string, outcome: WatchedOutcome): string[] {
  const reviews = (outcome.pendingReviews ?? []).map(
    (r) => `treadle review ${id} ${r.stage} --approve   (or --reject <reason>; ${r.reason}: ${r.message})`,
  );
  const approvals = (outcome.approvals ?? [])
    .filter((r) => r.status === 'pending')
    .map((r) => `treadle approve ${r.id}   (or treadle approve reject ${r.id}; ${r.step})`);
  const human = (outcome.humanRequests ?? [])
    .filter((r) => r.status === 'pending')
    .map(
      (r) => `treadle respond ${id} ${r.stage} --output @output.json   (or --reject <reason>; attempt ${r.attempt})`,
    );
  return [...reviews, ...approvals, ...human];
}

/** What `--wait` says of a loop stage that failed and waits for `treadle resume`. */
function failedLoopMessage(id: string, loop: LoopState): string {
  const failure = loop.failure;
  const at = failure?.iteration ?? loop.iteration;
  const why = failure ? `: ${failure.error.message}` : '';
  return (
    `loop stage ${loop.stage} failed at iteration ${at}${why}; ` +
    `resume with \`treadle resume ${id} --stage ${loop.stage}\` or give up with \`treadle resume ${id} --stage ${loop.stage} --abandon\``
  );
}

/**
 * Ends a command that watched an item or tree: its exit code, and at a person's turn the commands that
 * give the decisions it waits for (stdout, after the status).
 */
export function exitWith(id: string, outcome: WatchedOutcome): void {
  const code = exitCodeOf(outcome.status);
  const commands = code === EXIT.waiting ? decisionCommands(id, outcome) : [];
  if (commands.length > 0)
    process.stdout.write(`\n${id} waits for a person:\n${commands.map((c) => `  ${c}`).join('\n')}\n`);
  process.exitCode = code;
}

/**
 * Ends a command that watched a work item: as {@link exitWith}, and when the watch stopped at a loop stage that
 * failed and waits for `treadle resume` (the item still runs), that is a person's turn too (3), said with the
 * commands.
 */
export function exitWithItem(id: string, item: WatchedOutcome, loops: { state: LoopState }[]): void {
  const failed = item.status === 'running' ? loops.find((l) => l.state.status === 'failed') : undefined;
  if (!failed) return exitWith(id, item);
  process.stdout.write(`\n${failedLoopMessage(id, failed.state)}\n`);
  process.exitCode = EXIT.waiting;
}
