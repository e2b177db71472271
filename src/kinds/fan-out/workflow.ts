/**
 * The `fan_out` stage kind from engine 5 on (FAN_OUT_WORKFLOW_ENGINE): a fan-out at any width, its histories
 * flat per element.
 *
 * The work item stores the list once, in pages (`treadle.fanOutStore`), and starts one `fanOut` workflow
 * (`<item>.<stage>.<attempt>`). That workflow starts each element as a child work item of a one-stage
 * pipeline (`<item>.<stage>.<attempt>.<index>`: its own history, status, gate and reviews in the Web UI), at
 * most `max_concurrent` at once, giving it its page and place instead of the element, so every element costs
 * its histories the same few bytes whatever it weighs. When a run's history passes 1 MB (or `elements_per_run`
 * elements), the run stops starting elements, waits for the running ones, stores its results as a page and
 * continues as new. The last run joins the pages into the artefact: every element's result in input order,
 * a failed one reported without losing the others (or failing the stage, with `on_item_failure: fail`).
 * From engine 6 a failed element fails its workflow; its result is read from the failure's details.
 *
 * The fan-out of engines 1 to 4 (every element a child of the work item itself) is in engine-1-4.ts.
 */
import {
  ApplicationFailure,
  continueAsNew,
  defineSignal,
  executeChild,
  getExternalWorkflowHandle,
  isCancellation,
  proxyActivities,
  proxyLocalActivities,
  workflowInfo,
} from '@temporalio/workflow';
import {
  FAN_OUT_COLLECT_ACTIVITY,
  FAN_OUT_ELEMENT_ACTIVITY,
  FAN_OUT_ELEMENTS_PER_REPORT,
  FAN_OUT_FAILURES_KEPT,
  FAN_OUT_PAGE_ELEMENTS,
  FAN_OUT_PROGRESS_REPORTS,
  FAN_OUT_RESULTS_ACTIVITY,
  FAN_OUT_RUN_HISTORY_BYTES,
  FAN_OUT_STORE_ACTIVITY,
  type FanOutElementInput,
  type FanOutElementRef,
  type FanOutInput,
  type FanOutItemResult,
  type FanOutPrepareInput,
  type FanOutProgressUpdate,
  type FanOutResult,
  type FanOutStoreResult,
} from './shapes';
import { truncateText } from '../../model/limits';
import type { Artefact, Json, UsageTotals } from '../../model/shapes';
import { addTotals } from '../../engine/usage';
import { WORK_ITEM_FAILED, type StageActivityResult, type WorkItemInput, type WorkItemResult } from '../../model/state';
import {
  describeFailure,
  failureWithUsage,
  resultOfFailure,
  usageBatch,
  type StageKindRun,
} from '../../workflow-kit/common';
import type { KindItemContext } from '../../workflow-kit/stage-kind';

/** Storing a list of a million elements takes a while; checking it is cheap and never worth retrying. */
const STORE_TIMEOUT = '30m';
const activities = proxyActivities<{
  [FAN_OUT_STORE_ACTIVITY]: (input: FanOutPrepareInput) => Promise<FanOutStoreResult>;
  [FAN_OUT_RESULTS_ACTIVITY]: (input: { results: FanOutItemResult[]; label: string }) => Promise<{ page: string }>;
  [FAN_OUT_COLLECT_ACTIVITY]: (input: {
    pages: string[];
    completed: number;
    failed: number;
    summary: string;
  }) => Promise<{ artefact: Artefact }>;
}>({ startToCloseTimeout: STORE_TIMEOUT, retry: { maximumAttempts: 5, nonRetryableErrorTypes: ['InvalidConfig'] } });
// A local activity: the element's own work item reads it from a page the worker most likely has cached.
const readElement = proxyLocalActivities<{
  [FAN_OUT_ELEMENT_ACTIVITY]: (input: FanOutElementInput) => Promise<{ input: Json }>;
}>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 5, nonRetryableErrorTypes: ['InvalidFanOutElement'] } })[
  FAN_OUT_ELEMENT_ACTIVITY
];

/**
 * A fan-out workflow tells its work item how far it is, so `treadle status` and the Web UI show progress. A
 * signal: the fan-out needs no answer, and spacing them out (at most {@link FAN_OUT_PROGRESS_REPORTS}) keeps
 * the work item's history flat.
 */
export const fanOutProgressSignal = defineSignal<[FanOutProgressUpdate]>('fanOutProgress');

/** Sets the work item's handler of {@link fanOutProgressSignal} (the kind's `installHandlers`). */
export function handleFanOutProgress({ state, touch, setHandler }: KindItemContext): void {
  setHandler(fanOutProgressSignal, ({ stage, progress }) => {
    const shown = state.stages[stage]?.fanOut;
    // A late signal from a fan-out that has ended since is no news.
    if (shown === undefined || shown.completed + shown.failed > progress.completed + progress.failed) return;
    Object.assign(shown, progress);
    touch();
  });
}

/** The stored element a fan-out's child work item runs on, when it is one. */
export function fanOutElementOf(args: WorkItemInput): FanOutElementRef | undefined {
  return (args as WorkItemInput & Partial<FanOutElementInput>).element;
}

/** An element's payload, read out of its page (small elements themselves, larger ones by reference). */
export async function fanOutElementInput(element: FanOutElementRef): Promise<Json> {
  return (await readElement({ element })).input;
}

/**
 * One fan-out attempt of the work item (a `fan_out` stage, or a stage that returned seed 000's `fan_out`
 * outcome, given as `outcome`): stores the list, runs the `fanOut` workflow, reports its failures.
 */
export async function runFanOutWorkflow(
  run: StageKindRun,
  outcome?: Artefact,
  failAsWorkflow = true,
): Promise<StageActivityResult> {
  const { stage, emit } = run;
  const prepared = await activities[FAN_OUT_STORE_ACTIVITY]({
    itemId: run.itemId,
    pipeline: run.pipeline,
    stage: stage.name,
    config: outcome !== undefined ? null : (stage.with ?? null),
    upstream: run.upstream,
    input: run.input,
    ...(outcome !== undefined ? { outcome } : {}),
  });
  if (!prepared.ok)
    throw ApplicationFailure.nonRetryable(
      `${stage.name} cannot fan out (${prepared.problems.length} problem${prepared.problems.length === 1 ? '' : 's'}): ${prepared.problems.join('; ')}`,
      'InvalidFanOut',
    );
  const { total, maxConcurrent } = prepared;
  const progress = { total, running: 0, completed: 0, failed: 0 };
  run.state.stages[stage.name]!.fanOut = progress;
  emit(
    'FanOutStarted',
    `${stage.name} fans out over ${total} element${total === 1 ? '' : 's'} (at most ${maxConcurrent} at once)`,
    { stage: stage.name, attempt: run.attempt, details: { total, maxConcurrent } },
  );
  run.touch();

  let result: FanOutResult;
  try {
    result = await executeChild(fanOut, {
      workflowId: `${run.itemId}.${stage.name}.${run.attempt}`,
      args: [fanOutInput(run, prepared, failAsWorkflow)],
      staticSummary: `${stage.name}: fan-out over ${total} elements`,
    });
  } catch (error) {
    if (isCancellation(error)) throw error;
    throw ApplicationFailure.nonRetryable(
      `${stage.name}: the fan-out workflow failed: ${describeFailure(error)}`,
      'FanOutFailed',
    );
  }
  Object.assign(progress, { running: 0, completed: result.completed, failed: result.failed });
  const summary = reportFanOutResult(run, total, result);
  if (result.failed > 0 && prepared.onItemFailure === 'fail') {
    const listed = result.failures
      .slice(0, 5)
      .map((r) => `${r.index}: ${r.error}`)
      .join('; ');
    throw failureWithUsage(
      `${result.failed} of ${total} elements failed (on_item_failure: fail): ${listed}${result.failed > 5 ? '; …' : ''}`,
      'FanOutFailed',
      result.usage,
    );
  }
  return { outcome: 'completed', artefact: result.artefact, summary, previousLog: null, ...usageBatch(result.usage) };
}

/** The first run's input of the `fanOut` workflow, from the stored list's plan. */
function fanOutInput(
  run: StageKindRun,
  prepared: Extract<FanOutStoreResult, { ok: true }>,
  failAsWorkflow: boolean,
): FanOutInput {
  return {
    itemId: run.itemId,
    stage: run.stage.name,
    attempt: run.attempt,
    ...(run.state.correlationId !== undefined ? { correlationId: run.state.correlationId } : {}),
    pipeline: prepared.pipeline,
    pipelineName: prepared.pipelineName,
    childStage: prepared.childStage,
    total: prepared.total,
    pages: prepared.pages,
    maxConcurrent: prepared.maxConcurrent,
    ...(prepared.elementsPerRun !== undefined ? { elementsPerRun: prepared.elementsPerRun } : {}),
    next: 0,
    resultPages: [],
    completed: 0,
    failed: 0,
    failures: [],
    reported: 0,
    ...(failAsWorkflow ? { failAsWorkflow } : {}),
  };
}

/** The fan-out's events (its failures listed, then its end); returns the stage's summary. */
function reportFanOutResult(run: StageKindRun, total: number, result: FanOutResult): string {
  const { stage, emit } = run;
  for (const failure of result.failures) {
    emit('FanOutItemFailed', `${stage.name}: element ${failure.index} (${failure.id}) failed: ${failure.error}`, {
      stage: stage.name,
      details: { index: failure.index, id: failure.id },
    });
  }
  const unlisted = result.failed - result.failures.length;
  const summary = `${result.completed} of ${total} element${total === 1 ? '' : 's'} completed${result.failed > 0 ? `, ${result.failed} failed` : ''}`;
  emit(
    'FanOutCompleted',
    `${stage.name}: ${summary}${unlisted > 0 ? ` (${unlisted} failures not listed as events: every one is in the results)` : ''}`,
    {
      stage: stage.name,
      details: { completed: result.completed, failed: result.failed, runs: result.runs },
    },
  );
  return summary;
}

/**
 * The `fanOut` workflow: one run takes elements from `input.next` on, `maxConcurrent` lanes each starting the
 * next element's work item when its last one is done, until the list ends or the run's history is full; then
 * it stores the run's results as a page and continues as new (or, after the last element, joins the pages).
 */
export async function fanOut(input: FanOutInput): Promise<FanOutResult> {
  const lanes = new FanOutLanes(input);
  await lanes.run();
  const { first, next, completed, failed, usage, failures, reported } = lanes;
  const { page } = await activities[FAN_OUT_RESULTS_ACTIVITY]({
    results: lanes.results,
    label: `results ${first}-${next - 1} of ${input.stage} (${input.itemId})`,
  });
  const resultPages = [...input.resultPages, page];
  await Promise.all(lanes.signals);
  if (next < input.total) {
    return continueAsNew<typeof fanOut>({
      ...input,
      next,
      resultPages,
      completed,
      failed,
      ...(usage ? { usage } : {}),
      failures,
      reported,
    });
  }
  const summary = `${input.stage}: ${completed} of ${input.total} elements completed${failed > 0 ? `, ${failed} failed` : ''}`;
  const { artefact } = await activities[FAN_OUT_COLLECT_ACTIVITY]({ pages: resultPages, completed, failed, summary });
  return { artefact, completed, failed, ...(usage ? { usage } : {}), failures, runs: resultPages.length };
}

/** One run of the `fanOut` workflow: its lanes, its counters and its progress reports to the work item. */
class FanOutLanes {
  /** The first element this run starts. */
  readonly first: number;
  /** This run's results, in input order from {@link first}. */
  readonly results: FanOutItemResult[] = [];
  readonly failures: FanOutItemResult[];
  /** The progress signals sent, awaited before the run ends. */
  readonly signals: Promise<void>[] = [];
  next: number;
  completed: number;
  failed: number;
  reported: number;
  usage: UsageTotals | undefined;
  private running = 0;
  private resultBytes = 0;
  private readonly parent = workflowInfo().parent;
  // Each report is two events here and a workflow task in the work item: no more than a fiftieth of the
  // elements apart, and never fewer than a hundred elements apart.
  private readonly reportEvery: number;

  constructor(private readonly input: FanOutInput) {
    this.first = input.next;
    this.failures = [...input.failures];
    ({ next: this.next, completed: this.completed, failed: this.failed, reported: this.reported } = input);
    this.usage = input.usage;
    this.reportEvery = Math.max(FAN_OUT_ELEMENTS_PER_REPORT, Math.ceil(input.total / FAN_OUT_PROGRESS_REPORTS));
  }

  /** Runs the lanes until the list ends or the run is full. Not async: the caller awaits the lanes themselves. */
  run(): Promise<void[]> {
    const width = Math.min(this.input.maxConcurrent, this.input.total - this.first);
    return Promise.all(Array.from({ length: width }, () => this.lane()));
  }

  private async lane(): Promise<void> {
    // Every run starts at least one element, so a run that finds itself full at once still makes progress.
    while (this.next < this.input.total && (this.next === this.first || !this.full()))
      await this.runElement(this.next++);
  }

  /**
   * Whether the run should start no more elements: by count when the stage sets one, else when its history
   * would be full once the running elements are done and the results page is stored (its input holds every
   * result).
   */
  private full(): boolean {
    const { input, first, next, running, resultBytes } = this;
    const info = workflowInfo();
    if (input.elementsPerRun !== undefined && next - first >= input.elementsPerRun) return true;
    const done = Math.max(1, next - first - running);
    const projected = info.historySize + resultBytes + (running * (info.historySize + resultBytes)) / done;
    return projected > FAN_OUT_RUN_HISTORY_BYTES || info.continueAsNewSuggested;
  }

  /** Runs element `index` as a child work item and counts its result. */
  private async runElement(index: number): Promise<void> {
    const { input } = this;
    const id = `${input.itemId}.${input.stage}.${input.attempt}.${index}`;
    let result: FanOutItemResult;
    this.running++;
    try {
      const child = await executeChild<(args: WorkItemInput) => Promise<WorkItemResult>>('workItem', {
        workflowId: id,
        args: [elementArgs(input, index, id)],
        staticSummary: `${input.stage} element ${index + 1}/${input.total}`,
      }).catch((error: unknown) => resultOfFailure<WorkItemResult>(error, WORK_ITEM_FAILED) ?? Promise.reject(error));
      if (child.usage) this.usage = addTotals(this.usage, child.usage);
      result = elementResult(input, index, id, child);
    } catch (error) {
      if (isCancellation(error)) throw error;
      result = { index, id, status: 'failed', error: truncateText(describeFailure(error), 500) };
    }
    this.running--;
    this.count(index, result);
  }

  /** Keeps an element's result, counts it, and reports progress every {@link reportEvery} elements. */
  private count(index: number, result: FanOutItemResult): void {
    this.results[index - this.first] = result;
    this.resultBytes += JSON.stringify(result).length;
    if (result.status === 'completed') this.completed++;
    else {
      this.failed++;
      if (this.failures.length < FAN_OUT_FAILURES_KEPT) this.failures.push(result);
    }
    if (this.completed + this.failed - this.reported >= this.reportEvery) this.report();
  }

  /** Tells the work item how far the fan-out is ({@link fanOutProgressSignal}). */
  private report(): void {
    const { input, parent, running, completed, failed } = this;
    this.reported = completed + failed;
    if (parent === undefined) return;
    const update: FanOutProgressUpdate = {
      stage: input.stage,
      attempt: input.attempt,
      progress: { total: input.total, running, completed, failed },
    };
    // The work item may have ended (cancelled): its progress is no one's business then.
    this.signals.push(
      getExternalWorkflowHandle(parent.workflowId, parent.runId)
        .signal(fanOutProgressSignal, update)
        .catch(() => undefined),
    );
  }
}

/** The input of element `index`'s work item: its page and place, not the element itself. */
function elementArgs(input: FanOutInput, index: number, id: string): WorkItemInput & FanOutElementInput {
  const element: FanOutElementRef = {
    page: input.pages[Math.floor(index / FAN_OUT_PAGE_ELEMENTS)]!,
    offset: index % FAN_OUT_PAGE_ELEMENTS,
  };
  return {
    pipeline: input.pipeline,
    pipelineName: input.pipelineName,
    itemId: id,
    ...(input.correlationId !== undefined ? { correlationId: input.correlationId } : {}),
    element,
    ...(input.failAsWorkflow ? { failAsWorkflow: true } : {}),
  };
}

/** An element's result from its work item's: its stage's artefact, or why it failed. */
function elementResult(input: FanOutInput, index: number, id: string, child: WorkItemResult): FanOutItemResult {
  if (child.status !== 'completed') {
    const error = child.stageErrors?.[input.childStage] ?? child.error ?? 'failed';
    return { index, id, status: 'failed', error: truncateText(error, 500) };
  }
  const artefact = child.artefacts[input.childStage];
  return { index, id, status: 'completed', ...(artefact !== undefined ? { artefact } : {}) };
}
