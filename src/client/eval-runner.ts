/**
 * Runs an evaluation (`client.evals.run`, `treadle eval run`): every case of a dataset on every variant of a
 * pipeline, each an ordinary work item with the deterministic id `eval-<run>-<variant>-<case>`, tagged with the
 * run (`TreadleEvalRun`), at most `concurrency` in flight. Starts are idempotent by id, so running the same run
 * again resumes it: finished items are read, not run again. While items run, the decisions they wait on are
 * answered by the run's policy through the ordinary decision API, as reviewer `eval-policy`, so the audit shows
 * them. Each finished item becomes one {@link EvalCaseRecord}, read from its final state, and the run's record
 * goes to the blob store (./eval-store.ts), never into a workflow history.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { BlobStore } from '../storage/blob-store';
import type { KnownImplementations } from '../model/pipeline';
import type { DecisionAnswer, PendingDecision } from '../model/decisions';
import type { Json } from '../model/shapes';
import type { WorkItemState } from '../model/state';
import { applyOverrides, type SpecOverrides } from '../model/spec-overrides';
import {
  EVAL_NAME,
  EVAL_POLICIES,
  EVAL_POLICY_REVIEWER,
  evalItemId,
  summarizeVariant,
  type EvalCase,
  type EvalCaseRecord,
  type EvalPolicy,
  type EvalRunRecord,
  type EvalVariant,
} from '../model/evals';
import { validatePipeline } from '../kinds/pipeline';
import { inputHash } from '../model/hashing';
import { EVAL_MEMO_KEY, type EvalCaseTag } from './start';
import { TreadleError } from './errors';
import type { ClientParts } from './parts/context';
import type { EvalScorer } from './eval-scorers';
import { saveEvalRun } from './eval-store';

/** How often the policy looks for decisions its run's items wait on. */
const POLICY_POLL_MS = 500;
/** In flight when the caller names no concurrency. */
export const DEFAULT_EVAL_CONCURRENCY = 8;

/** What an evaluation runs. */
export interface EvalRunOptions {
  /** The run's id (letters, digits, `_ . -`); the same id resumes a run. Default: `<pipeline>-<time>-<random>`. */
  run?: string;
  /** The pipeline spec as written (snake_case, as a pipeline file holds it). */
  pipeline: unknown;
  /** At least one; a variant without overrides runs the spec as written. */
  variants: EvalVariant[];
  cases: EvalCase[];
  scorer: EvalScorer;
  /** How the items' human decisions are answered (default `approve`). */
  policy?: EvalPolicy;
  concurrency?: number;
  /** The stage whose artefact is scored (default the spec's last stage). */
  outputStage?: string;
  /** Called as each case finishes on a variant. */
  onResult?: (record: EvalCaseRecord, done: number, total: number) => void;
}

/** What the runner needs of the client. */
export interface EvalRunnerContext {
  parts: ClientParts;
  client: Client;
  blobs: BlobStore;
  known?: KnownImplementations;
}

/** One variant's spec, validated. */
interface PreparedVariant {
  variant: EvalVariant;
  spec: Json;
}

/**
 * Every variant's spec (overrides applied and validated), the pipeline's name and the output stage, or a
 * TreadleError `invalid_pipeline` listing every problem of every variant, before anything starts.
 */
export function prepareVariants(
  pipeline: unknown,
  variants: readonly EvalVariant[],
  known?: KnownImplementations,
  outputStage?: string,
): { name: string; outputStage: string; prepared: PreparedVariant[] } {
  const problems: string[] = [];
  const prepared: PreparedVariant[] = [];
  if (variants.length === 0) problems.push('an evaluation needs at least one variant');
  const names = new Set<string>();
  for (const variant of variants) {
    if (!EVAL_NAME.test(variant.name)) problems.push(`variant "${variant.name}": a name is 1 to 64 of [A-Za-z0-9_.-]`);
    if (names.has(variant.name)) problems.push(`variant "${variant.name}" is named twice`);
    names.add(variant.name);
    const applied = applyOverrides(pipeline, variant.overrides as SpecOverrides);
    if (!applied.ok) {
      problems.push(...applied.problems.map((p) => `variant ${variant.name}: ${p}`));
      continue;
    }
    const checked = validatePipeline(applied.spec, known);
    if (!checked.ok) problems.push(...checked.problems.map((p) => `variant ${variant.name}: ${p}`));
    else prepared.push({ variant, spec: applied.spec });
  }
  const stages = stageNames(pipeline);
  const output = outputStage ?? stages[stages.length - 1] ?? '';
  if (!stages.includes(output)) problems.push(`no stage named "${output}" to score (the stages: ${stages.join(', ')})`);
  if (problems.length > 0)
    throw new TreadleError(
      `the evaluation cannot start:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
      'invalid_pipeline',
      problems,
    );
  const name = (pipeline as { name?: unknown }).name;
  return { name: typeof name === 'string' ? name : '(unnamed)', outputStage: output, prepared };
}

function stageNames(pipeline: unknown): string[] {
  const stages = (pipeline as { stages?: unknown } | null)?.stages;
  if (!Array.isArray(stages)) return [];
  return stages.map((s) => (s as { name?: unknown } | null)?.name).filter((n): n is string => typeof n === 'string');
}

/** A fresh run id: the pipeline, the time to the second and a little randomness. */
export function newRunId(pipeline: string, now = new Date()): string {
  const time = now.toISOString().replace(/[-:]/g, '').slice(0, 15);
  return `${pipeline.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40)}-${time}-${randomBytes(2).toString('hex')}`;
}

/** Refuses a bad run id, concurrency, policy or an empty dataset: a TreadleError `invalid_input`. */
function checkRunOptions(run: string, concurrency: number, options: EvalRunOptions): void {
  const problem = !EVAL_NAME.test(run)
    ? `the run id "${run}" is not 1 to 64 of [A-Za-z0-9_.-]`
    : !Number.isInteger(concurrency) || concurrency < 1
      ? `the concurrency must be a whole number above 0, got ${concurrency}`
      : options.policy !== undefined && !EVAL_POLICIES.includes(options.policy)
        ? `the policy must be one of ${EVAL_POLICIES.join(', ')}, got ${String(options.policy)}`
        : options.cases.length === 0
          ? 'an evaluation needs at least one case'
          : undefined;
  if (problem !== undefined) throw new TreadleError(problem, 'invalid_input');
}

/** Runs an evaluation to its end and stores its record (see the module's comment). */
export async function runEvaluation(ctx: EvalRunnerContext, options: EvalRunOptions): Promise<EvalRunRecord> {
  const { name, outputStage, prepared } = prepareVariants(
    options.pipeline,
    options.variants,
    ctx.known,
    options.outputStage,
  );
  const run = options.run ?? newRunId(name);
  const concurrency = options.concurrency ?? DEFAULT_EVAL_CONCURRENCY;
  checkRunOptions(run, concurrency, options);
  const startedAt = new Date().toISOString();
  // The listing is narrowed to the variants' pipelines: a namespace may hold thousands of other decisions.
  const pipelines = [...new Set(prepared.map((p) => pipelineName(p.spec, name)))];
  const policy = new PolicyAnswers(ctx.parts, options.policy ?? 'approve', pipelines);
  const jobs = options.cases.flatMap((c) => prepared.map((p) => ({ c, p })));
  const results: EvalCaseRecord[] = [];
  const caseRun = new CaseRun(ctx, run, outputStage, options.scorer, policy);
  policy.start();
  try {
    let next = 0;
    let failed = false;
    const lane = async (): Promise<void> => {
      while (next < jobs.length && !failed) {
        const { c, p } = jobs[next++]!;
        const record = await caseRun.run(c, p).catch((error: unknown) => {
          failed = true;
          throw error;
        });
        results.push(record);
        options.onResult?.(record, results.length, jobs.length);
      }
    };
    // On a failure the other lanes finish the case they are on and take no other; the first failure is thrown.
    const lanes = await Promise.allSettled(Array.from({ length: Math.min(concurrency, jobs.length) }, lane));
    const failure = lanes.find((l): l is PromiseRejectedResult => l.status === 'rejected');
    if (failure) throw failure.reason;
  } finally {
    await policy.stop();
  }
  const order = new Map(jobs.map((j, i) => [evalItemId(run, j.p.variant.name, j.c.id), i]));
  results.sort((a, b) => order.get(a.itemId)! - order.get(b.itemId)!);
  const record: EvalRunRecord = {
    format: 1,
    run,
    pipeline: name,
    scorer: { name: options.scorer.name, passMark: options.scorer.passMark },
    policy: options.policy ?? 'approve',
    variants: prepared.map((p) => p.variant),
    startedAt,
    finishedAt: new Date().toISOString(),
    summaries: prepared.map((p) =>
      summarizeVariant(
        p.variant.name,
        results.filter((r) => r.variant === p.variant.name),
      ),
    ),
    results,
  };
  await saveEvalRun(ctx.blobs, record);
  return record;
}

/** One case on one variant: started (or found), waited for, read and scored. */
class CaseRun {
  constructor(
    private readonly ctx: EvalRunnerContext,
    private readonly runId: string,
    private readonly outputStage: string,
    private readonly scorer: EvalScorer,
    private readonly policy: PolicyAnswers,
  ) {}

  async run(c: EvalCase, p: PreparedVariant): Promise<EvalCaseRecord> {
    const { parts } = this.ctx;
    const id = evalItemId(this.runId, p.variant.name, c.id);
    const hash = inputHash({ spec: p.spec, input: c.input });
    const tag = { run: this.runId, variant: p.variant.name, caseId: c.id, hash };
    const started = await parts.items.start(p.spec, c.input, { id, evalRun: tag });
    if (started.existing) await this.sameCase(id, tag);
    this.policy.watch(id, c);
    try {
      // A failed item's result carries its state; a cancelled or terminated one rejects: either way it has ended.
      await parts.items.result(id).catch(() => undefined);
    } finally {
      this.policy.unwatch(id);
    }
    // Read patiently: a worker lost mid-run leaves the item's queries on its sticky queue for a few seconds.
    const state = await parts.items.servedState(id);
    const description = await this.ctx.client.workflow.getHandle(id).describe();
    const wallMs = (description.closeTime ?? new Date()).getTime() - description.startTime.getTime();
    const outcome: EvalCaseRecord['outcome'] =
      state.status === 'completed' ? 'completed' : state.status === 'cancelled' ? 'cancelled' : 'failed';
    const scored = await this.scoreOf(c, p.variant.name, state, outcome);
    const total = state.usage?.total;
    return {
      caseId: c.id,
      variant: p.variant.name,
      itemId: id,
      outcome,
      ...tally(state),
      escalations: Math.max(escalationsOf(state), this.policy.answeredFor(id)),
      tokens: { input: total?.inputTokens ?? 0, output: total?.outputTokens ?? 0 },
      costUsd: total ? total.estimatedCostUsd : 0,
      wallMs,
      ...scored,
      passed: outcome === 'completed' && scored.score !== null && scored.score >= this.scorer.passMark,
    };
  }

  /**
   * A rerun's item was made from the same spec and input; else the run cannot resume it (its record would mix two
   * settings): a TreadleError `invalid_input` saying so.
   */
  private async sameCase(id: string, tag: EvalCaseTag): Promise<void> {
    const memo = (await this.ctx.client.workflow.getHandle(id).describe()).memo?.[EVAL_MEMO_KEY] as
      EvalCaseTag | undefined;
    if (memo?.hash === tag.hash) return;
    throw new TreadleError(
      `evaluation ${tag.run} already ran case ${tag.caseId} on variant ${tag.variant} with another spec or input (item ${id}): give the changed run another --id`,
      'invalid_input',
    );
  }

  /** The scorer's score of the output; an item that did not complete has no output and scores 0. */
  private async scoreOf(
    c: EvalCase,
    variant: string,
    state: WorkItemState,
    outcome: EvalCaseRecord['outcome'],
  ): Promise<{ score: number | null; scoreError?: string }> {
    if (outcome !== 'completed') return { score: 0 };
    const output = await this.ctx.parts.items.readArtefact(state.stages[this.outputStage]?.artefact);
    try {
      const score = await this.scorer.score({
        id: c.id,
        variant,
        input: c.input,
        ...(c.expected !== undefined ? { expected: c.expected } : {}),
        output,
        outcome,
      });
      return { score };
    } catch (error) {
      return { score: null, scoreError: (error as Error).message };
    }
  }
}

/** Attempts and the gates' verdicts over every stage. */
function tally(state: WorkItemState): Pick<EvalCaseRecord, 'attempts' | 'verdicts'> {
  const verdicts = { passed: 0, rejected: 0, uncertain: 0 };
  let attempts = 0;
  for (const stage of Object.values(state.stages)) {
    attempts += stage.attempts.length;
    for (const attempt of stage.attempts) {
      if (attempt.verdict?.kind === 'accepted') verdicts.passed++;
      else if (attempt.verdict?.kind === 'rejected') verdicts.rejected++;
      else if (attempt.verdict?.kind === 'uncertain') verdicts.uncertain++;
    }
  }
  return { attempts, verdicts };
}

/** The human decisions an item's state records: stage reviews, approval requests and human steps. */
function escalationsOf(state: WorkItemState): number {
  const reviews = Object.values(state.stages).filter((s) => s.review !== undefined).length;
  const approvals = (state.approvals ?? []).filter((a) => a.status !== 'pending').length;
  const human = (state.humanRequests ?? []).filter((h) => h.status !== 'pending').length;
  return reviews + approvals + human;
}

/** The name a variant's spec as written gives its items (the base pipeline's when it sets none). */
function pipelineName(spec: Json, fallback: string): string {
  const name = (spec as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? name : fallback;
}

/** The answer the policy gives a decision of `kind`; undefined for `wait`. */
export function policyAnswer(policy: EvalPolicy, decision: PendingDecision, c: EvalCase): DecisionAnswer | undefined {
  const reason = 'the evaluation policy rejects';
  if (policy === 'wait') return undefined;
  if (decision.kind === 'loop')
    return policy === 'approve'
      ? { action: 'resume' }
      : { action: 'abandon', reason: 'the evaluation policy abandons' };
  if (decision.kind === 'human')
    return policy === 'approve' ? { action: 'respond', artefact: c.expected ?? null } : { action: 'reject', reason };
  return policy === 'approve' ? { action: 'approve' } : { action: 'reject', reason };
}

/** Answers the decisions the watched items wait on, by the policy, until stopped. */
class PolicyAnswers {
  private readonly watched = new Map<string, EvalCase>();
  private readonly answered = new Map<string, number>();
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly parts: ClientParts,
    private readonly policy: EvalPolicy,
    private readonly pipelines: readonly string[],
  ) {}

  watch(id: string, c: EvalCase): void {
    this.watched.set(id, c);
  }

  unwatch(id: string): void {
    this.watched.delete(id);
  }

  /** Decisions the policy made for an item in this process. */
  answeredFor(id: string): number {
    return this.answered.get(id) ?? 0;
  }

  start(): void {
    if (this.policy === 'wait') return;
    this.loop = this.poll();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  private async poll(): Promise<void> {
    while (!this.stopped) {
      if (this.watched.size > 0) await this.answerPending().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, POLICY_POLL_MS));
    }
  }

  private async answerPending(): Promise<void> {
    const pending = (
      await Promise.all(this.pipelines.map((pipeline) => this.parts.decisions.list({ pipeline })))
    ).flat();
    for (const decision of pending) {
      const c = this.watched.get(decision.itemId) ?? this.watched.get(decision.workflowId);
      const answer = c ? policyAnswer(this.policy, decision, c) : undefined;
      if (!answer) continue;
      // Visibility lags: a decision answered a moment ago may still be listed; deciding it again is `already_decided`.
      const outcome = await this.parts.decisions
        .decide(decision.key, answer, EVAL_POLICY_REVIEWER)
        .catch(() => undefined);
      if (outcome?.status === 'decided') this.answered.set(decision.itemId, this.answeredFor(decision.itemId) + 1);
    }
  }
}
