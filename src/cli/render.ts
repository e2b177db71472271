/**
 * Text rendering for the CLI: the stage table, pending reviews and event lines.
 */
import { isOverdue } from '../model/decisions';
import type { LoopState } from '../kinds/loop/shapes';
import type { TddNodeState } from '../kinds/tdd/shapes';
import { describePriority, hasPriority, type ItemPriority } from '../model/priority';
import type { BlobRef, TreadleEvent } from '../model/shapes';
import type { HumanRequest, PendingReview, StageState, WorkItemState } from '../model/state';
import type { ApprovalRequest } from '../kinds/approval/shapes';
import { load } from './lazy-modules';

/**
 * Whether an artefact is a blob reference. `model/shapes` loads zod (~60 ms), which `treadle pipelines`
 * (a table, nothing else) should not pay for, so it is loaded here, on the first status rendered.
 */
function isBlobRef(value: unknown): value is BlobRef {
  return load.shapes().isBlobRef(value);
}

/** Widest a column other than the last may be: a longer cell (an 800-character failure) is cut. */
export const MAX_COLUMN = 60;
/** The width tables fit when the output is no terminal and COLUMNS is unset. */
const DEFAULT_WIDTH = 160;
/** The last column keeps at least this much, however narrow the terminal. */
const MIN_LAST_COLUMN = 30;

/** The width to fit: the terminal's, else COLUMNS, else {@link DEFAULT_WIDTH}. */
export function outputWidth(): number {
  return process.stdout.columns || Number(process.env.COLUMNS) || DEFAULT_WIDTH;
}

/** How many texts {@link fit} has cut in this process: a status that cut one says where the whole text is. */
let cuts = 0;

/** Text on one line of at most `max` characters, cut with an ellipsis. */
export function fit(text: string, max: number): string {
  const flat = text.replace(/\s*\n\s*/g, ' ');
  if (flat.length <= max) return flat;
  cuts++;
  return `${flat.slice(0, Math.max(0, max - 1))}…`;
}

/**
 * Pads cells into aligned columns, one line per row within `width`: cells of a column other than the last are
 * cut at {@link MAX_COLUMN}, and the last column at what the width leaves it. `--json` outputs have it all.
 */
export function table(header: string[], rows: string[][], width = outputWidth()): string {
  const natural = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const widths = natural.map((w, i) => Math.min(w, Math.max(header[i]!.length, MAX_COLUMN)));
  const last = Math.max(MIN_LAST_COLUMN, width - widths.slice(0, -1).reduce((sum, w) => sum + w + 2, 0));
  const cell = (c: string, i: number, n: number): string =>
    i === n - 1 ? fit(c, last) : fit(c, widths[i]!).padEnd(widths[i]!);
  const line = (cells: string[]) =>
    cells
      .map((c, i) => cell(c, i, cells.length))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

function lastVerdict(stage: StageState): string {
  const last = stage.attempts[stage.attempts.length - 1];
  if (!last) return '';
  if (last.error) return `error: ${last.error}`;
  if (last.timedOut) return last.feedback?.summary ?? 'timed out';
  if (!last.verdict) return '';
  if (last.verdict.kind === 'rejected') return `rejected: ${last.verdict.feedback.summary}`;
  if (last.verdict.kind === 'uncertain') return `uncertain: ${last.verdict.reason}`;
  return 'accepted';
}

function artefactCell(stage: StageState): string {
  if (stage.artefact === undefined) return '';
  if (isBlobRef(stage.artefact)) return `${stage.artefact.ref.slice(0, 19)}… (${stage.artefact.bytes} bytes)`;
  const text = JSON.stringify(stage.artefact);
  return text.length > 40 ? `${text.slice(0, 39)}…` : text;
}

/** A stage's status in seed 003's words: a stage running a second or later attempt is `retrying`. */
export function displayStatus(stage: StageState): string {
  return stage.status === 'running' && stage.attempts.length > 1 ? 'retrying' : stage.status;
}

/** A step that runs again at Temporal's level (its activity failed and is retried): what the server says. */
export interface ActivityRetry {
  activityType: string;
  attempt: number;
  lastFailure?: string;
}

/** A call of the item waiting for model capacity (`client.items.capacityWaits`): its stage when known, its line. */
export interface CapacityWaitLine {
  stage?: string;
  activityType: string;
  line: string;
}

/**
 * The readable status of a work item; `retries` are its activities on a second or later try, `waits` its calls
 * waiting for model capacity.
 */
export function renderStatus(
  state: WorkItemState,
  retries: ActivityRetry[] = [],
  priority: ItemPriority = {},
  waits: CapacityWaitLine[] = [],
): string {
  const rows = Object.entries(state.stages).map(([name, s]) => {
    const max = s.maxAttempts ?? 1;
    const progress = s.fanOut
      ? `${s.fanOut.completed + s.fanOut.failed}/${s.fanOut.total} elements done${s.fanOut.failed ? `, ${s.fanOut.failed} failed` : ''}`
      : '';
    // A fork's carried stage ran in its original, not here.
    const verdict = s.carriedFrom !== undefined ? `carried from ${s.carriedFrom}` : lastVerdict(s) || progress;
    return [name, displayStatus(s), `${s.attempts.length}/${max}`, verdict, artefactCell(s)];
  });
  const out = [`${state.id} · pipeline ${state.pipeline} · ${state.status}`];
  if (state.forkOf) out.push(`fork of ${state.forkOf.id}, run again from ${state.forkOf.from}`);
  // Only an item started with a priority or a fairness key says so: Temporal's defaults are every other item's.
  if (hasPriority(priority)) out.push(describePriority(priority));
  const width = outputWidth();
  const cutBefore = cuts;
  // A cancelled item says who cancelled it and why (engine 8), not an error.
  if (state.status === 'cancelled' && state.cancelledBy !== undefined)
    out.push(fit(`cancelled by ${state.cancelledBy}${state.cancelReason ? `: ${state.cancelReason}` : ''}`, width));
  else if (state.error) out.push(fit(`error: ${state.error}`, width));
  for (const problem of state.problems ?? []) out.push(fit(`  - ${problem}`, width));
  if (rows.length) out.push('', table(['STAGE', 'STATUS', 'ATTEMPTS', 'LAST VERDICT', 'ARTEFACT'], rows));
  if (waits.length) out.push('', ...waits.map((w) => `  ${w.stage ?? w.activityType}: ${w.line}`));
  if (state.pendingReviews.length) out.push('', renderPendingReviews(state.id, state.pendingReviews));
  const asked = (state.humanRequests ?? []).filter((r) => r.status === 'pending');
  if (asked.length) out.push('', renderHumanRequests(state.id, asked));
  if (state.approvals?.length) out.push('', renderApprovals(state.approvals));
  const flagged = Object.entries(state.stages).filter(([, s]) => s.qualityFlags);
  if (flagged.length) {
    out.push(
      '',
      'Input validation (quality contracts):',
      table(
        ['STAGE', 'ITEMS PRODUCED', 'REJECTIONS', 'RETRIES'],
        flagged.map(([name, s]) => [
          name,
          String(s.qualityFlags!.items_produced),
          String(s.qualityFlags!.validation_rejections),
          String(s.qualityFlags!.validation_retries),
        ]),
      ),
    );
  }
  if (retries.length) {
    const retry = (r: ActivityRetry): string =>
      `  ${r.activityType}: try ${r.attempt}${r.lastFailure ? `, last failure: ${r.lastFailure}` : ''}`;
    const retrying = retries.map((r) => fit(retry(r), width));
    out.push('', 'Retrying (Temporal activity retries):', ...retrying);
  }
  if (cuts > cutBefore) out.push('', `(long texts are cut to fit; treadle status ${state.id} --json has them whole)`);
  return out.join('\n');
}

/** An item's approval requests: pending first, each with what decides it. */
export function renderApprovals(requests: ApprovalRequest[]): string {
  const rank = (r: ApprovalRequest): number => (r.status === 'pending' ? 0 : 1);
  const sorted = requests.slice().sort((a, b) => rank(a) - rank(b));
  const rows = sorted.map((r) => [
    r.id,
    r.step,
    r.actionType,
    r.status + (r.escalated && r.status === 'pending' ? ` (escalated to ${r.reviewers})` : ''),
    r.decidedBy ?? '',
    r.error ? `action failed: ${r.error}` : r.summary,
  ]);
  const pending = sorted.filter((r) => r.status === 'pending');
  return [
    'Approval requests:',
    table(['ID', 'STEP', 'ACTION', 'STATUS', 'BY', 'WHAT'], rows),
    ...(pending.length
      ? [`  treadle approve <id> | treadle approve reject <id> --reason TEXT | treadle approve batch`]
      : []),
  ].join('\n');
}

/** Pending reviews of one item, with the commands that answer them. */
export function renderPendingReviews(id: string, reviews: PendingReview[]): string {
  const out = ['Waiting for review:'];
  for (const r of reviews) {
    out.push(fit(`  ${r.stage} (${r.reason}, attempt ${r.attempt}): ${r.message}`, outputWidth()));
    if (r.expiresAt) out.push(`    expires at ${r.expiresAt}`);
    if (r.dueAt) out.push(`    ${dueLine(r, Date.now())}`);
    out.push(`    treadle review ${id} ${r.stage} --approve | --reject REASON | --edit FILE`);
  }
  return out.join('\n');
}

/** A decision's deadline (`review_sla`) as a line: `due at …` or `overdue since …`, and who it was handed to. */
function dueLine(r: { dueAt?: string; escalated?: { to: string; from?: string } }, now: number): string {
  const late = isOverdue(r, now) ? 'overdue since' : 'due at';
  const handed = r.escalated
    ? `, handed to ${r.escalated.to}${r.escalated.from ? ` from ${r.escalated.from}` : ''}`
    : '';
  return `${late} ${r.dueAt}${handed}`;
}

/** Human stages waiting for a person's output (issue 40), with the command that gives it. */
export function renderHumanRequests(id: string, requests: readonly HumanRequest[]): string {
  const out = ["Waiting for a person's output:"];
  for (const r of requests) {
    const group = r.reviewers ? ` for ${r.reviewers}` : '';
    out.push(
      fit(`  ${r.stage} (attempt ${r.attempt}${group}): ${r.instructions ?? 'the stage output'}`, outputWidth()),
    );
    if (r.feedback) out.push(fit(`    the gate said: ${r.feedback}`, outputWidth()));
    if (r.dueAt) out.push(`    ${dueLine(r, Date.now())}`);
    out.push(`    treadle respond ${id} ${r.stage} --output @output.json | --reject REASON`);
  }
  return out.join('\n');
}

/** One event as a line: time, sequence, type, message. */
export function renderEvent(event: TreadleEvent): string {
  return `${event.at.slice(11, 23)}  #${String(event.seq).padStart(3)}  ${event.type.padEnd(20)} ${event.message}`;
}

/** A TDD node's status: phase, counters, memory, children and the latest exit of each graph node. */
export function renderTddStatus(state: TddNodeState): string {
  const lines = [
    `${state.nodePath}: ${state.status} (phase ${state.phase}, branch ${state.branch}, depth ${state.depth})`,
    `impl attempt ${state.counters.implAttempt}, review rounds ${state.counters.reviewRounds}, scaffold runs ${state.counters.scaffoldRuns}`,
    `covered criteria: ${state.memory.tdd.coveredCriteria.join(', ') || '-'}; passing tests: ${state.memory.impl.passedTests.length}`,
  ];
  const exits = Object.entries(state.exits);
  if (exits.length > 0)
    lines.push(
      '',
      table(
        ['NODE', 'EXIT', 'SUMMARY'],
        exits.map(([node, e]) => [node, e.exit, e.summary]),
      ),
    );
  if (state.children.length > 0)
    lines.push(
      '',
      table(
        ['CHILD', 'WORKFLOW', 'STATUS', 'MERGE'],
        state.children.map((c) => [c.id, c.workflowId, c.status, c.mergeCommit?.slice(0, 10) ?? c.error ?? '']),
      ),
    );
  if (state.human) lines.push('', `waiting for a human (${state.human.reason}): ${state.human.message}`);
  if (state.merge) lines.push('', `merged as ${state.merge.mergeCommit}`);
  if (state.error) lines.push('', `error: ${state.error}`);
  return lines.join('\n');
}

/** A loop stage's status (seed 004): iterations, decisions, the last iterations, a failure to resume. */
export function renderLoopStatus(workflowId: string, state: LoopState): string {
  const t = state.termination;
  const rule =
    t.type === 'judgment'
      ? `judgment, consensus ${t.consensus ?? 2} from iteration ${t.min_iterations ?? 1}`
      : t.type === 'queue'
        ? `queue (${t.queue?.provider ?? 'command'}${state.queuePending !== undefined ? `, ${state.queuePending} pending` : ''})`
        : 'fixed';
  const lines = [
    `loop ${state.stage} (${workflowId}): ${state.status}, iteration ${state.iteration} of at most ${state.maxIterations} (${rule})`,
    `decisions: ${state.decisions.continue} continue, ${state.decisions.stop} stop; consecutive stops ${state.consecutiveStops}; files in ${state.paths.stage_dir}`,
  ];
  if (state.recent.length > 0) {
    lines.push(
      '',
      table(
        ['ITERATION', 'DECISION', 'VERIFY', 'SUMMARY'],
        state.recent
          .slice(-10)
          .map((r) => [
            String(r.iteration),
            r.decision,
            r.verify ? (r.verify.passed ? 'passed' : 'FAILED') : '-',
            r.summary,
          ]),
      ),
    );
  }
  if (state.failure)
    lines.push(
      '',
      `failed at iteration ${state.failure.iteration}: ${state.failure.error.type}: ${state.failure.error.message}`,
      `resume with: treadle resume ${state.itemId} --stage ${state.stage}   (or --abandon)`,
    );
  if (state.stoppedBy) lines.push('', `stopped by ${state.stoppedBy.by}: ${state.stoppedBy.reason}`);
  return lines.join('\n');
}

/** What a decision's line adds when it repeated one already taken: the first one's answer, and nothing changed. */
export const alreadyRecorded = (repeated: boolean | undefined): string =>
  repeated ? ' (already recorded: sending the same decision again changed nothing)' : '';
