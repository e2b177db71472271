/**
 * Checking review payloads without zod: this runs inside the workflow, where every imported module is
 * evaluated again for each execution, and zod's weight showed up as most of the engine's per-item CPU and
 * memory in the benchmarks. `test/unit/review-request.test.ts` holds it to the zod schema in shapes.ts.
 */
import { MAX_REVIEW_NOTE_CHARS } from './limits';
import type { Json, ReviewOutcome } from './shapes';

/** A well-formed review. */
export interface ParsedReview {
  stage: string;
  outcome: ReviewOutcome;
  reviewer: string;
}

const KINDS = ['approve', 'reject', 'approve_with_edits', 'request_changes'] as const;
const KEYS: Record<(typeof KINDS)[number], string[]> = {
  approve: ['kind', 'attempt', 'note'],
  reject: ['kind', 'reason', 'note'],
  approve_with_edits: ['kind', 'artefact', 'note'],
  request_changes: ['kind', 'note'],
};

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses a `review` signal / `resolveReview` update payload; the issues name the field and what was wrong. */
export function parseReviewRequest(
  payload: unknown,
): { ok: true; review: ParsedReview } | { ok: false; issues: string[] } {
  if (!isObject(payload)) return { ok: false, issues: [`review: expected an object, got ${describe(payload)}`] };
  const issues: string[] = [];
  const { stage, reviewer = 'anonymous', outcome } = payload;
  if (typeof stage !== 'string' || stage === '') issues.push(`stage: expected a stage name, got ${describe(stage)}`);
  if (typeof reviewer !== 'string' || reviewer === '')
    issues.push(`reviewer: expected a non-empty name, got ${describe(reviewer)}`);
  if (!isObject(outcome)) {
    issues.push(
      `outcome: expected an object such as {"kind":"approve"}, got ${outcome === undefined ? 'nothing' : describe(outcome)}`,
    );
    return { ok: false, issues };
  }
  const kind = outcome.kind as (typeof KINDS)[number];
  if (!KINDS.includes(kind)) {
    issues.push(`outcome.kind: expected one of ${KINDS.join(', ')}, got ${describe(outcome.kind)}`);
    return { ok: false, issues };
  }
  for (const key of Object.keys(outcome))
    if (!KEYS[kind].includes(key)) issues.push(`outcome: unknown key "${key}" for ${kind}`);
  if (outcome.note !== undefined && typeof outcome.note !== 'string')
    issues.push(`outcome.note: expected text, got ${describe(outcome.note)}`);
  if (
    kind === 'approve' &&
    outcome.attempt !== undefined &&
    !(Number.isInteger(outcome.attempt) && (outcome.attempt as number) >= 1)
  ) {
    issues.push(`outcome.attempt: expected a whole number >= 1, got ${describe(outcome.attempt)}`);
  }
  if (kind === 'reject' && (typeof outcome.reason !== 'string' || outcome.reason === ''))
    issues.push('outcome.reason: a rejection needs a reason');
  if (kind === 'approve_with_edits' && outcome.artefact === undefined)
    issues.push('outcome.artefact: approve_with_edits needs an artefact (the edited output)');
  if (kind === 'request_changes') {
    if (typeof outcome.note !== 'string' || outcome.note.trim() === '')
      issues.push('outcome.note: request_changes needs a note saying what to change');
    else if (outcome.note.length > MAX_REVIEW_NOTE_CHARS)
      issues.push(
        `outcome.note: ${outcome.note.length} characters is over the ${MAX_REVIEW_NOTE_CHARS} a note may have; shorten it`,
      );
  }
  if (issues.length > 0) return { ok: false, issues };
  const note = typeof outcome.note === 'string' ? { note: outcome.note } : {};
  const parsed: ReviewOutcome =
    kind === 'approve'
      ? { kind, ...(outcome.attempt !== undefined ? { attempt: outcome.attempt as number } : {}), ...note }
      : kind === 'reject'
        ? { kind, reason: outcome.reason as string, ...note }
        : kind === 'request_changes'
          ? { kind, note: outcome.note as string }
          : { kind, artefact: outcome.artefact as Json, ...note };
  return { ok: true, review: { stage: stage as string, outcome: parsed, reviewer: reviewer as string } };
}
