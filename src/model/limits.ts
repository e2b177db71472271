/**
 * Size and scale limits that keep a work item's history small and every workflow activation bounded
 * (docs/concepts.md "Payloads, history and limits"). Everything here is plain data and pure functions, shared by workflows and activities.
 */
import type { QualityFeedback } from './shapes';

/** Temporal terminates an execution whose history passes this many events. */
export const TEMPORAL_HISTORY_EVENT_LIMIT = 51_200;
/** Treadle refuses specs whose worst case passes this, leaving room for reviews, signals and upserts. */
export const HISTORY_EVENT_BUDGET = 40_000;
/** Temporal fails workflow tasks that hold more pending activities than this. */
export const TEMPORAL_PENDING_ACTIVITY_LIMIT = 2_000;
/** Stages of one item running at once unless the spec says `max_parallel`. */
export const DEFAULT_MAX_PARALLEL = 50;
/** The largest `max_parallel` accepted: with gates, each running stage may hold several activities. */
export const MAX_PARALLEL_LIMIT = 500;

/**
 * Artefacts, inputs, edits and configs whose JSON is larger go to the blob store (override:
 * `TREADLE_BLOB_THRESHOLD`); the workflow uses it to skip storing an edit that is small anyway.
 */
export const DEFAULT_BLOB_THRESHOLD_BYTES = 2 * 1024;

/**
 * A stage's `output_schema:` may be at most this many characters of JSON: a spec is untrusted input, the schema
 * rides in the prepared spec (the item's history) and in the `state` query, and it is compiled by every client.
 */
export const MAX_OUTPUT_SCHEMA_CHARS = 32 * 1024;

/**
 * Why `schema` cannot be an output schema before anything compiles it (not an object, or larger than
 * {@link MAX_OUTPUT_SCHEMA_CHARS}), or undefined. The one shape check of a spec's `output_schema:`, of the compile
 * check's size guard and of a schema an implementation registers.
 */
export function outputSchemaShapeProblem(schema: unknown): string | undefined {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    return 'must be a JSON Schema object (draft 2020-12)';
  if (JSON.stringify(schema).length > MAX_OUTPUT_SCHEMA_CHARS)
    return `must be at most ${MAX_OUTPUT_SCHEMA_CHARS} characters of JSON; keep the schema to what a reviewer's edit must hold`;
  return undefined;
}

/** One-line texts (summaries, messages, errors) kept in history and state are cut to this many characters. */
export const MAX_TEXT_CHARS = 500;
/** Longer errors are cut to this many characters. */
export const MAX_ERROR_CHARS = 2_000;
/** Feedback whose JSON is longer goes to the blob store; the history keeps a short form and the reference. */
export const MAX_INLINE_FEEDBACK_BYTES = 1_024;
/**
 * An activity that made more model calls than this stores their records in the blob store; its result (and
 * its failure, its heartbeats) carries their totals and the reference (docs/stages/agents.md "Call log, usage, budgets").
 */
export const MAX_INLINE_CALL_RECORDS = 4;
/** Error texts of call records that travel inline are cut to this many characters (the stored ones are whole). */
export const MAX_INLINE_CALL_ERROR_CHARS = 300;
/** Failed criteria kept in the short form of long feedback. */
const SHORT_FEEDBACK_CRITERIA = 3;

/**
 * The most of one text a person judging work is shown: a TDD node's diff, a failed loop's `progress.md`, an
 * artefact in the review inbox's detail. Whole texts stay in the blob store.
 */
export const REVIEW_TEXT_MAX_BYTES = 2 * 1024 * 1024;

/**
 * Where to cut UTF-8 `bytes` at byte `at` (clamped to them) without splitting a character. Keeping the head
 * (`bytes[0, cut)`), `at`, or the start of a character left without all its bytes; keeping the tail
 * (`bytes[cut, …)`), `at`, or past the continuation bytes there. `bytes` may itself be a cut-off part: a head is
 * judged by its own last character, not by the byte after `at`. The byte counterpart of {@link truncateText}.
 */
export function utf8Cut(bytes: Uint8Array, at: number, keep: 'head' | 'tail'): number {
  const continues = (i: number): boolean => ((bytes[i] ?? 0) & 0xc0) === 0x80;
  let cut = Math.min(Math.max(at, 0), bytes.length);
  if (keep === 'tail') {
    while (cut < bytes.length && continues(cut)) cut++;
    return cut;
  }
  let lead = cut - 1;
  while (lead > 0 && continues(lead)) lead--;
  const first = bytes[lead] ?? 0;
  const width = first >= 0xf0 ? 4 : first >= 0xe0 ? 3 : first >= 0xc0 ? 2 : 1;
  return lead + width > cut ? lead : cut;
}

/** `text` cut to `max` characters, with an ellipsis and the original length when cut. */
export function truncateText(text: string, max = MAX_TEXT_CHARS): string {
  if (text.length <= max) return text;
  const note = `… (${text.length} chars)`;
  return text.slice(0, Math.max(0, max - note.length)) + note;
}

/**
 * The short form of feedback too long for the history: summary and the first failed criteria, cut short,
 * pointing at the whole feedback stored under `ref`.
 */
export function shortFeedback(feedback: QualityFeedback, ref: string): QualityFeedback {
  const failed = feedback.failedCriteria.filter((c) => !c.passed);
  return {
    summary: truncateText(feedback.summary, 300),
    failedCriteria: failed.slice(0, SHORT_FEEDBACK_CRITERIA).map((c) => ({
      name: truncateText(c.name, 80),
      expected: truncateText(c.expected, 80),
      actual: truncateText(c.actual, 80),
      passed: false,
    })),
    ref,
  };
}

/**
 * Heartbeat timeout of TDD node calls and loop iterations (and their housekeeping activities): how long a worker
 * that died mid-step goes unnoticed before Temporal retries the step elsewhere. Their activities heartbeat every
 * 5 s whatever they wait on (agents, tools, test commands, git), and the SDK forwards a heartbeat at least every
 * 80% of this (24 s), so 30 s leaves a margin for a busy worker while a lost one costs ~30 s, not minutes.
 */
export const STEP_HEARTBEAT_TIMEOUT = '30s';

/** The longest note a reviewer's "request changes" may carry (4 KiB of text): it travels in the item's history. */
export const MAX_REVIEW_NOTE_CHARS = 4096;
