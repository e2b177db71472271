/**
 * The shapes every part of Treadle shares (DESIGN.md "Shapes everyone shares"): artefacts, quality
 * verdicts and feedback, attempt records, review outcomes, stage outputs and events. All are plain JSON so
 * they survive Temporal's JSON payload converter unchanged.
 */
import { z } from 'zod';
import { MAX_REVIEW_NOTE_CHARS } from './limits';

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export const JsonSchema: z.ZodType<Json> = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(JsonSchema), z.record(z.string(), JsonSchema)]),
);

/**
 * A Temporal task queue a spec names (`task_queue:` on the pipeline, a stage or a contract). Temporal allows
 * 1000 bytes; no spaces keeps it one word on every command line.
 */
export const TaskQueueName = z
  .string()
  .min(1, 'must name the task queue a worker polls')
  .max(200, 'must be at most 200 characters')
  .regex(/^\S+$/, 'must not contain spaces');

/** A reference to a payload in the content-addressed blob store; only this enters the history. */
export const BlobRefSchema = z
  .object({
    ref: z.string().regex(/^sha256:[0-9a-f]{64}$/, 'ref must be sha256:<64 hex digits>'),
    bytes: z.number().int().nonnegative(),
    mediaType: z.string(),
    summary: z.string(),
  })
  .strict();
export type BlobRef = z.infer<typeof BlobRefSchema>;

/**
 * True when an artefact is a blob reference rather than inline JSON. Most values asked about are inline, and
 * a failed zod parse builds its issues: a value without a `sha256:` ref is answered before the schema.
 */
export function isBlobRef(value: unknown): value is BlobRef {
  const ref = typeof value === 'object' && value !== null ? (value as { ref?: unknown }).ref : undefined;
  return typeof ref === 'string' && ref.startsWith('sha256:') && BlobRefSchema.safeParse(value).success;
}

/**
 * An artefact: inline JSON under the size threshold, else a {@link BlobRef}. Stage implementations always
 * see the resolved JSON; workflows only ever hold what is written here.
 */
export type Artefact = Json;

/** One criterion a quality gate checked. */
export const CriterionResultSchema = z.object({
  name: z.string().min(1),
  expected: z.string(),
  actual: z.string(),
  passed: z.boolean(),
});
export type CriterionResult = z.infer<typeof CriterionResultSchema>;

/** Structured feedback from a gate, threaded into the next attempt's context. */
export const QualityFeedbackSchema = z.object({
  summary: z.string(),
  failedCriteria: z.array(CriterionResultSchema).default([]),
  guidance: JsonSchema.optional(),
  /**
   * Set when a reviewer requested changes: who did; `guidance` is then their note, while `summary` and
   * `failedCriteria` keep the gate's last feedback (both reach the next attempt).
   */
  reviewer: z.string().optional(),
  /**
   * Set when the feedback was too long for the history: `sha256:<hex>` of the whole feedback in the blob
   * store, while `summary` and `failedCriteria` here are shortened. Activities hand implementations the whole.
   */
  ref: z
    .string()
    .regex(/^sha256:[0-9a-f]{64}$/)
    .optional(),
});
export type QualityFeedback = z.infer<typeof QualityFeedbackSchema>;

/** A gate's judgement of one attempt's output. */
export const QualityVerdictSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('accepted') }),
  z.object({ kind: z.literal('rejected'), feedback: QualityFeedbackSchema }),
  z.object({ kind: z.literal('uncertain'), reason: z.string().min(1) }),
]);
export type QualityVerdict = z.infer<typeof QualityVerdictSchema>;

/** One message of a conversation with an agent (kept by storage/conversation.ts, sent by agents/). */
export interface AgentMessage {
  role: 'user' | 'assistant';
  content: string;
}

/** One call in the LLM call log (seed 003 `llm_call_log`); never the prompt, only its hash. */
export const CallRecordSchema = z.object({
  /** `<item>/<stage>/<attempt>`: ties the call to its attempt. */
  correlationId: z.string(),
  provider: z.string(),
  model: z.string(),
  /** `sha256:<hex>` of the rendered prompt (model, system, messages, schema). */
  promptHash: z.string(),
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  cacheReadTokens: z.number().int().nonnegative(),
  latencyMs: z.number().nonnegative(),
  /** `throttled`: the provider pushed back (429 rate limit, 529 overloaded); the call waited and went again. */
  status: z.enum(['success', 'error', 'timeout', 'throttled']),
  error: z.string().optional(),
  /** ISO time the call started. */
  at: z.string(),
  /** The work item's correlation id (seed 003), linking the call to its run across the call log. */
  runCorrelationId: z.string().optional(),
});
export type CallRecord = z.infer<typeof CallRecordSchema>;

/** Totals over a set of calls. */
export const UsageTotalsSchema = z.object({
  calls: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  cacheReadTokens: z.number().int().nonnegative(),
  latencyMs: z.number().nonnegative(),
  /** Estimated from list prices per model; null when a model's price is unknown. */
  estimatedCostUsd: z.number().nullable(),
});
export type UsageTotals = z.infer<typeof UsageTotalsSchema>;

/** Call records kept in the blob store: a JSON array of `count` {@link CallRecord}s. */
export const StoredCallsSchema = z.object({ ref: z.string(), count: z.number().int().nonnegative() });
export type StoredCalls = z.infer<typeof StoredCallsSchema>;

/**
 * The model calls of one activity as they travel in history (its result, its failure or cancellation
 * details, its heartbeats): the totals always, and the records inline when there are at most
 * MAX_INLINE_CALL_RECORDS of them, else in the blob store, so that history never grows with the number of
 * calls. A heartbeat may carry both: the records stored so far, and the ones made since (`records`).
 * Histories recorded before batches carry a plain array of records instead (`callBatchOf` reads both).
 */
export interface CallBatch {
  usage: UsageTotals;
  records?: CallRecord[];
  stored?: StoredCalls;
  /** Records neither inline nor stored, because the blob store failed (they are in the totals and the call log). */
  omitted?: number;
}

/** What a stage implementation returns (seed 000 `StageOutput`). */
export const StageOutputSchema = z.object({
  outcome: z.enum(['completed', 'skipped', 'awaiting_review', 'fan_out']).default('completed'),
  artefact: JsonSchema.optional(),
  summary: z.string().optional(),
  /**
   * The stage's own verdict that its output is unusable (a model reply that broke the output schema, a
   * violated input contract): the attempt counts as rejected with this feedback, without calling the gate.
   */
  rejection: QualityFeedbackSchema.optional(),
});
export type StageOutput = z.infer<typeof StageOutputSchema>;

/** One attempt of one stage, as reviewers and gates see it. */
export const AttemptRecordSchema = z.object({
  attempt: z.number().int().min(1),
  startedAt: z.string(),
  completedAt: z.string().optional(),
  outputSummary: z.string().optional(),
  /** What the attempt produced: inline JSON or a blob reference. */
  artefact: JsonSchema.optional(),
  verdict: QualityVerdictSchema.optional(),
  /** The feedback this attempt's output earned (set when the verdict rejected it or it timed out). */
  feedback: QualityFeedbackSchema.optional(),
  /** A mechanical failure that ended the attempt after Temporal's activity retries gave up. */
  error: z.string().optional(),
  timedOut: z.boolean().optional(),
  /**
   * The model calls this attempt made (stage and gates), as the history carries them: `usage` totals them
   * all; the records are in `calls` when an activity made few, else in the blob store (`storedCalls`).
   */
  usage: UsageTotalsSchema.optional(),
  calls: z.array(CallRecordSchema).optional(),
  storedCalls: z.array(StoredCallsSchema).optional(),
});
export type AttemptRecord = z.infer<typeof AttemptRecordSchema>;

/** A human's decision on a stage waiting for review (seed 000 `ReviewOutcome`). */
export const ReviewOutcomeSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('approve'),
      /** Which attempt's output to approve; defaults to the latest attempt that produced output. */
      attempt: z.number().int().min(1).optional(),
      note: z.string().optional(),
    })
    .strict(),
  z
    .object({
      kind: z.literal('reject'),
      reason: z.string().min(1, 'a rejection needs a reason'),
      note: z.string().optional(),
    })
    .strict(),
  z
    .object({
      kind: z.literal('approve_with_edits'),
      // Arrives through a JSON payload, so anything defined is JSON.
      artefact: z
        .unknown()
        .refine((v) => v !== undefined, 'approve_with_edits needs an artefact (the edited output)')
        .transform((v) => v as Json),
      note: z.string().optional(),
    })
    .strict(),
  z
    .object({
      kind: z.literal('request_changes'),
      /** What the next attempt should change; it reaches that attempt's feedback as `guidance`. */
      note: z
        .string()
        .refine((v) => v.trim() !== '', 'request_changes needs a note saying what to change')
        .refine(
          (v) => v.length <= MAX_REVIEW_NOTE_CHARS,
          `a note may have at most ${MAX_REVIEW_NOTE_CHARS} characters`,
        ),
    })
    .strict(),
]);
export type ReviewOutcome = z.infer<typeof ReviewOutcomeSchema>;

/** The payload of the `review` signal and the `resolveReview` update. */
export const ReviewRequestSchema = z.object({
  stage: z.string().min(1),
  outcome: ReviewOutcomeSchema,
  reviewer: z.string().min(1).default('anonymous'),
});
export type ReviewRequest = z.input<typeof ReviewRequestSchema>;

/** Every event a work item emits; each carries item id, stage, attempt, a sequence number and workflow time. */
export const EVENT_TYPES = [
  'ItemStarted',
  'StageStarted',
  'StageCompleted',
  'StageFailed',
  'StageSkipped',
  'QualityCheckPassed',
  'QualityCheckFailed',
  'QualityCheckUncertain',
  'AttemptTimedOut',
  'RetryScheduled',
  'RetryAttempt',
  'Escalated',
  'ReviewRequested',
  'ReviewResolved',
  'ReviewExpired',
  'ReviewOverdue',
  'ReviewInputRejected',
  'ItemCompleted',
  'ItemFailed',
  // TDD nodes (seed 001)
  'NodeExit',
  'NodeRouted',
  'ChildStarted',
  'ChildSettled',
  'MergeRequested',
  'MergeGranted',
  'SiblingMerged',
  'WorkRefused',
  // Approval requests (seed 003)
  'ApprovalRequested',
  'ApprovalEscalated',
  'ApprovalDecided',
  'ApprovalExpired',
  'ApprovalExecuted',
  'ApprovalInputRejected',
  // Fan-outs (seed 000 FanOut, seed 003 fan_out)
  'FanOutStarted',
  'FanOutItemFailed',
  'FanOutCompleted',
  // Loop stages (seed 004)
  'LoopStarted',
  'LoopCompleted',
  // Quality contracts (seed 002)
  'InputValidation',
  // Human stages (issue 40)
  'HumanRequested',
  'HumanResponded',
  // Forks (issue 42)
  'ItemForked',
  'StageCarried',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** One entry of the event stream. `details` carries the type-specific fields (feedback summary, reason, ...). */
export const TreadleEventSchema = z.object({
  seq: z.number().int().min(1),
  type: z.enum(EVENT_TYPES),
  itemId: z.string(),
  stage: z.string().optional(),
  attempt: z.number().int().optional(),
  maxAttempts: z.number().int().optional(),
  /** Workflow time, ISO 8601. */
  at: z.string(),
  /** One human-readable line. */
  message: z.string(),
  details: z.record(z.string(), JsonSchema).optional(),
});
export type TreadleEvent = z.infer<typeof TreadleEventSchema>;
