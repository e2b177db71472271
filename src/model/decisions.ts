/**
 * A decision a person owes, whatever asked for it (issue 27): one shape for the review inbox, `treadle
 * decisions`, and the CLI listings of reviews and approvals. Read from visibility (search attributes and memo)
 * in one listing, so no item is queried and no worker is needed to list them.
 *
 * The kinds: `review` (a gate escalated, was unsure, or the stage asks always or for itself), `budget` (the
 * token budget is spent), `approval` (seed 003's ADR-12 requests), `tdd` (seed 001's human step: Stuck,
 * clarification, Reject) and `loop` (seed 004: a failed loop stage waiting to be resumed or abandoned).
 *
 * No I/O and no zod here: the client, the CLI and the inbox server share it.
 */
import type { ReviewReason } from './state';

export type DecisionKind = 'review' | 'budget' | 'approval' | 'tdd' | 'loop' | 'human';
export const DECISION_KINDS: readonly DecisionKind[] = ['review', 'budget', 'approval', 'tdd', 'loop', 'human'];

/** Why a TDD node asks a person (seed 001's human step). */
export type TddHumanReason = 'clarification' | 'stuck' | 'review_rejected';

/** What a person can answer, by kind (see {@link ANSWERS}). */
export type DecisionAction =
  | 'approve' // review, budget, approval; tdd: continue (with an optional note as guidance)
  | 'approve_attempt' // review: approve an earlier attempt's output
  | 'reject' // review, budget, approval (reason required); tdd: abort the node
  | 'edit' // review, budget: approve with an edited artefact; tdd: answer with text
  | 'guidance' // tdd: a note the next step reads
  | 'resume' // loop
  | 'abandon' // loop (reason required)
  | 'respond' // human: the stage's output, supplied by a person (`artefact`)
  | 'request_changes'; // review, budget: one more attempt with the note (required) in its feedback; loop: resume with it

/** The answers each kind takes. */
export const ANSWERS: Readonly<Record<DecisionKind, readonly DecisionAction[]>> = {
  review: ['approve', 'approve_attempt', 'reject', 'edit', 'request_changes'],
  budget: ['approve', 'reject', 'edit', 'request_changes'],
  approval: ['approve', 'reject'],
  tdd: ['approve', 'guidance', 'edit', 'reject'],
  loop: ['resume', 'abandon', 'request_changes'],
  // A `human` stage: the person's output (checked against the stage's output_schema before it is sent), or
  // reject = fail the stage with a reason.
  human: ['respond', 'reject'],
};

/** One pending decision, as listed. */
export interface PendingDecision {
  /** Stable and URL-safe: see {@link decisionKey}. */
  key: string;
  kind: DecisionKind;
  /** The workflow that waits: the work item, or its TDD node or loop stage workflow. */
  workflowId: string;
  /** The work item it belongs to (the workflow itself for items; the item that started a node or loop when known). */
  itemId: string;
  /** The pipeline's name (`tdd` / `loop` for trees and loops started on their own). */
  pipeline: string;
  /** The stage (review, budget, loop), the TDD step (`scaffold`, `impl`, `tddReviewImpl`) or the approval step. */
  stage: string;
  /** Why it waits: a review's reason, a TDD node's human reason, `approval`, or `loop_failed`. */
  reason: ReviewReason | TddHumanReason | 'approval' | 'human';
  /** One readable line. */
  message: string;
  requestedAt: string;
  /** When the decision expires or escalates, if it does. */
  expiresAt?: string;
  /** When it is overdue (`review_sla`): past this, listings say so (see {@link isOverdue}). */
  dueAt?: string;
  /** Handed to `to` when it became overdue (`on_breach: { escalate_to }`), from the group it was for, if any. */
  escalated?: { to: string; from?: string; at: string };
  /** The attempt (review, budget) or iteration (loop) the decision is about. */
  attempt?: number;
  /** Attempts made so far (review, budget), when the workflow says. */
  attempts?: number;
  /** The reviewer group it is addressed to, when there is one. */
  reviewers?: string;
  /** Approval requests: what the action will do. */
  approval?: { id: string; actionType: string; summary: string; context: string | null; escalated?: boolean };
  /** A `human` stage: what the person is asked, and the gate's feedback on their previous answer. */
  human?: { instructions?: string; feedback?: string };
  /** What can be answered. */
  answers: readonly DecisionAction[];
  /** Listed from search attributes alone (a memo an older workflow did not write): details on opening it. */
  partial?: true;
}

/** A person's answer to a pending decision. The reviewer's name is not part of it: the caller says who. */
export interface DecisionAnswer {
  action: DecisionAction;
  /** `approve_attempt`: which attempt's output. */
  attempt?: number;
  /** `reject` and `abandon`: why (required). */
  reason?: string;
  /** A note kept with the decision; for `guidance`, the guidance; for `request_changes`, what to change. */
  note?: string;
  /** `edit`: the edited artefact (review, budget), or the answer's text (tdd); `respond`: the stage's output. */
  artefact?: unknown;
}

/** What came of an answer. Someone else deciding first is an outcome, not an error. */
export type DecisionOutcome =
  | { status: 'decided'; by: string; outcome: string }
  | { status: 'already_decided'; by?: string; outcome?: string; at?: string };

/** Filters over pending decisions; every one optional, all of them must hold. */
export interface DecisionFilter {
  kinds?: readonly DecisionKind[];
  pipeline?: string;
  reviewers?: string;
  /** Requested at least this long ago, in milliseconds. */
  olderThanMs?: number;
  /** Text in the item id, stage or message (case-insensitive). */
  text?: string;
  /** Only decisions past their deadline (`review_sla`). */
  overdue?: boolean;
}

/**
 * The decision's key: `<workflowId>~<kind>~<stage or approval id>`, each part percent-encoded (so `~` in an id
 * cannot split it), then the whole made URL-safe.
 */
export function decisionKey(workflowId: string, kind: DecisionKind, subject: string): string {
  return [workflowId, kind, subject].map(encodeURIComponent).map(tildeSafe).join('~');
}

/** The parts of a {@link decisionKey}, or undefined for a string that is not one. */
export function parseDecisionKey(key: string): { workflowId: string; kind: DecisionKind; subject: string } | undefined {
  const parts = key.split('~');
  if (parts.length !== 3) return undefined;
  try {
    const [workflowId, kind, subject] = parts.map((p) => decodeURIComponent(p)) as [string, string, string];
    if (!workflowId || !subject || !(DECISION_KINDS as readonly string[]).includes(kind)) return undefined;
    return { workflowId, kind: kind as DecisionKind, subject };
  } catch {
    return undefined;
  }
}

/** encodeURIComponent leaves `~` alone; the key uses it as the separator. */
const tildeSafe = (part: string): string => part.replace(/~/g, '%7E');

const AGE_UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** An age such as `15m`, `2h` or `1d` in milliseconds (the inbox's `age` filter, `treadle decisions --older-than`). */
export function parseAge(age: string): number | undefined {
  const match = /^(\d{1,6})([mhd])$/.exec(age);
  return match ? Number(match[1]) * AGE_UNIT_MS[match[2] as keyof typeof AGE_UNIT_MS] : undefined;
}

/** Whether `decision` passes `filter` at time `now` (ms since the epoch). */
export function matchesFilter(decision: PendingDecision, filter: DecisionFilter, now: number): boolean {
  if (filter.kinds && filter.kinds.length > 0 && !filter.kinds.includes(decision.kind)) return false;
  if (filter.pipeline !== undefined && decision.pipeline !== filter.pipeline) return false;
  if (filter.reviewers !== undefined && decision.reviewers !== filter.reviewers) return false;
  if (filter.olderThanMs !== undefined && now - Date.parse(decision.requestedAt) < filter.olderThanMs) return false;
  if (filter.overdue === true && !isOverdue(decision, now)) return false;
  if (filter.text !== undefined && filter.text !== '') {
    const needle = filter.text.toLowerCase();
    const hay = `${decision.itemId}\n${decision.workflowId}\n${decision.stage}\n${decision.message}`.toLowerCase();
    if (!hay.includes(needle)) return false;
  }
  return true;
}

/** Whether `decision` is past its deadline at time `now` (ms since the epoch); one without a deadline never is. */
export function isOverdue(decision: Pick<PendingDecision, 'dueAt'>, now: number): boolean {
  return decision.dueAt !== undefined && Date.parse(decision.dueAt) <= now;
}

/**
 * How long a decision has waited, in the largest whole unit (`3d`, `5h`, `12m`, `40s`): the inbox's age column
 * and `treadle decisions`' WAITING.
 */
export function waitingFor(requestedAt: string, now: number): string {
  const seconds = Math.max(0, Math.floor((now - Date.parse(requestedAt)) / 1000));
  if (seconds >= 86_400) return `${Math.floor(seconds / 86_400)}d`;
  if (seconds >= 3_600) return `${Math.floor(seconds / 3_600)}h`;
  if (seconds >= 60) return `${Math.floor(seconds / 60)}m`;
  return `${seconds}s`;
}

/** Oldest request first; ties by key, so the order is the same everywhere. */
export function byRequestTime(a: PendingDecision, b: PendingDecision): number {
  return a.requestedAt < b.requestedAt
    ? -1
    : a.requestedAt > b.requestedAt
      ? 1
      : a.key < b.key
        ? -1
        : a.key > b.key
          ? 1
          : 0;
}

/**
 * An artefact as a reviewer reads it: its content resolved from the blob store when it was offloaded, cut at
 * `limitBytes` (the page offers the rest raw). `mediaType` says how to show it: `text/markdown`,
 * `application/json`, `text/x-diff`, `text/plain`.
 */
export interface ArtefactView {
  mediaType: string;
  /** The whole artefact's size. */
  bytes: number;
  /** JSON for `application/json`, else text. */
  content: unknown;
  truncated?: true;
  /** The blob reference when it was offloaded (the page links the raw bytes by it). */
  ref?: string;
}

/** One attempt as a reviewer judges it. */
export interface AttemptView {
  attempt: number;
  startedAt: string;
  completedAt?: string;
  output?: ArtefactView;
  /** The gate's verdict: passed, score, criteria, feedback (as the engine records it). */
  verdict?: unknown;
  feedback?: unknown;
  error?: string;
  timedOut?: boolean;
}

/** What the detail view shows for one pending decision (`TreadleClient.decisionDetail`). */
export interface DecisionDetail {
  decision: PendingDecision;
  /** The work item's stage table, when the decision belongs to one. */
  stages?: { name: string; status: string; attempts: number; summary?: string }[];
  /**
   * The item's calls waiting for model capacity now, each with its stage when known (one stage running) and its
   * line: "waiting for claude-sonnet-4-6: 8/8 calls in flight, 41k/60k tokens this minute (since 14:02:10 UTC)".
   */
  capacityWaits?: { stage?: string; activityType: string; line: string }[];
  /** review and budget: every attempt of the stage under review, oldest first. */
  attempts?: AttemptView[];
  /** review, budget, tdd `edit`, human `respond`: the JSON Schema the artefact must satisfy; absent: any JSON. */
  outputSchema?: unknown;
  /** approval: the action's payload and the request as the item keeps it. */
  approval?: { payload: ArtefactView; request: unknown };
  /** tdd: the node's question, its branch diff and its last test output, when recorded. */
  tdd?: { question: string; diff?: ArtefactView; testOutput?: ArtefactView };
  /** loop: why it failed, `progress.md` when recorded, and the last iterations. */
  loop?: { failure: unknown; progress?: ArtefactView; iterations: unknown[] };
  /** human: what the person is asked and the gate's verdicts on their earlier answers. */
  human?: { instructions?: string; feedback?: string; attempt: number };
  /** The workflow's history in the Temporal Web UI, when its address is known. */
  webUiUrl?: string;
  /** False when no worker answered: the detail is what visibility and the history say. */
  live: boolean;
}

/**
 * The argument of a decision message as its history records it, whichever the kind: a review's update or signal
 * (`stage`, `reviewer`, `outcome`) or an approval decision (`id`, `decision`, `by`, `reason`). Read back by the
 * audit and by the client's already-decided answer, so every field is optional.
 */
export interface RecordedDecisionArg {
  stage?: string;
  reviewer?: string;
  outcome?: { kind?: string; reason?: string };
  id?: string;
  decision?: string;
  by?: string;
  reason?: string;
  /** The reviewer group the decision was made in (inbox answers to decisions addressed to groups). */
  group?: string;
}

/**
 * The groups a decision addressed to `reviewers` may be answered by: none (anyone may) when it names no group;
 * a comma-separated `reviewers` names several, any one of which suffices.
 */
export function requiredGroups(reviewers: string | undefined): string[] {
  return (reviewers ?? '')
    .split(',')
    .map((g) => g.trim())
    .filter((g) => g !== '');
}
