/**
 * Seed 002's Validate-Retry-Process in workflow code: before a consuming stage's first attempt, each
 * contract on an edge into it validates the producer's items (one batched call), has the producer revise the
 * rejected ones (one call per item, in parallel), re-validates only the revised ones, up to `max_retries`
 * rounds, and hands the stage the final list (accepted in order, then the warned items). The decisions
 * are the activities'; this only sequences them, records `InputValidation` events and `quality_flags`.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  isCancellation,
  proxyActivities,
  type ActivityOptions,
} from '@temporalio/workflow';
import {
  CONTRACT_FINALIZE_ACTIVITY,
  CONTRACT_REVISE_ACTIVITY,
  CONTRACT_VALIDATE_ACTIVITY,
} from '../../model/activity-types';
import {
  CONTRACT_REVISION_LANES,
  UNKNOWN_CONTRACT_IMPLEMENTATION,
  type ContractFinalizeInput,
  type ContractFinalizeResult,
  type ContractReviseInput,
  type ContractReviseResult,
  type ContractValidateInput,
  type ContractValidateResult,
  type QualityFlags,
} from './shapes';
import type { ContractSpec } from './spec';
import { truncateText } from '../../model/limits';
import type { Artefact, Json } from '../../model/shapes';
import { addTotals, callBatchOf } from '../../engine/usage';
import type { StageKindRun } from '../../workflow-kit/common';
import { describeFailure } from '../../workflow-kit/common';

interface ContractActivities {
  [CONTRACT_VALIDATE_ACTIVITY]: (input: ContractValidateInput) => Promise<ContractValidateResult>;
  [CONTRACT_REVISE_ACTIVITY]: (input: ContractReviseInput) => Promise<ContractReviseResult>;
  [CONTRACT_FINALIZE_ACTIVITY]: (input: ContractFinalizeInput) => Promise<ContractFinalizeResult>;
}
const CONTRACT_ACTIVITY_OPTIONS: ActivityOptions = {
  startToCloseTimeout: '30m',
  heartbeatTimeout: '2m',
  retry: { maximumAttempts: 3, nonRetryableErrorTypes: ['InvalidConfig', 'InvalidInput', 'UnknownAgent'] },
};

/** A summary's room for the rounds' counts (there are at most max_retries + 1 rounds). */
const MAX_TALLY = 600;

/**
 * The contract activities of one call, named `<stage> · contract <from>→<to> · round n · <what>` in the Web UI
 * and the audit (which reads the stage and round back from it), as stage attempts are `<stage> · attempt n/m`.
 * The summary is user metadata: replay does not compare it. A validate or revise call whose validator or
 * reviser the preparing worker lacks runs on the queue the prepare step named for it (`contract.queues`).
 */
function contractActivities(stage: string, contract: ContractSpec, round: number, what: string): ContractActivities {
  const summary = `${stage} · contract ${contract.from}→${contract.to} · round ${round} · ${what}`;
  const on = (type: keyof ContractActivities): ActivityOptions => {
    const taskQueue = contract.queues?.[type];
    return { ...CONTRACT_ACTIVITY_OPTIONS, summary, ...(taskQueue !== undefined ? { taskQueue } : {}) };
  };
  return {
    [CONTRACT_VALIDATE_ACTIVITY]: proxyActivities<ContractActivities>(on(CONTRACT_VALIDATE_ACTIVITY))[
      CONTRACT_VALIDATE_ACTIVITY
    ],
    [CONTRACT_REVISE_ACTIVITY]: proxyActivities<ContractActivities>(on(CONTRACT_REVISE_ACTIVITY))[
      CONTRACT_REVISE_ACTIVITY
    ],
    [CONTRACT_FINALIZE_ACTIVITY]: proxyActivities<ContractActivities>(on(CONTRACT_FINALIZE_ACTIVITY))[
      CONTRACT_FINALIZE_ACTIVITY
    ],
  };
}

/**
 * The message of a validate or revise call whose worker does not register the contract's validator or reviser
 * (it names the fix), else undefined: a deployment error fails the stage rather than accepting every item.
 */
function unknownImplementation(error: unknown): string | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  return cause instanceof ApplicationFailure && cause.type === UNKNOWN_CONTRACT_IMPLEMENTATION
    ? cause.message
    : undefined;
}

/** What the contracts of a consuming stage need of its work item. */
export type ContractRun = Pick<StageKindRun, 'itemId' | 'pipeline' | 'stage' | 'input' | 'state' | 'emit' | 'touch'>;

/**
 * Runs every contract into `run.stage`. On success the stage's `validatedInputs` replace the producers'
 * artefacts for its attempts; a list that cannot be validated (not a list, missing or duplicate ids) is
 * the stage's failure, with every problem.
 */
export async function runContracts(
  run: ContractRun,
  contracts: readonly ContractSpec[],
): Promise<{ ok: true } | { ok: false; message: string }> {
  const mine = contracts.filter((c) => c.to === run.stage.name);
  if (mine.length === 0) return { ok: true };
  const st = run.state.stages[run.stage.name]!;
  const flags: QualityFlags = st.qualityFlags ?? { items_produced: 0, validation_rejections: 0, validation_retries: 0 };
  st.qualityFlags = flags;
  const validated: Record<string, Artefact> = { ...st.validatedInputs };
  // Batches (or, in histories recorded before them, arrays of records): their totals only.
  const addCalls = (calls: unknown): void => {
    const usage = callBatchOf(calls)?.usage;
    if (usage && usage.calls > 0) st.contractUsage = addTotals(st.contractUsage, usage);
  };
  for (const contract of mine) {
    const source = run.state.stages[contract.from]?.artefact;
    if (source === undefined) continue; // nothing produced (a skipped producer): nothing to validate
    const correlation = run.state.correlationId !== undefined ? { correlationId: run.state.correlationId } : {};
    // Round 0 stores the contract and the input in the contract's state; every later call names only the state.
    const call = { itemId: run.itemId, pipeline: run.pipeline, consumer: contract.to, ...correlation };
    const edge = `${contract.from} → ${contract.to}`;
    // Each round's counts, for the finalize call's summary: the Web UI shows the contract's rounds in one line.
    const tally: string[] = [];
    const rounds: RoundLog = { run, from: contract.from, edge, tally };
    const event = (round: number, v: ValidatedRound, revised?: RevisedRound): void =>
      emitRound(rounds, round, v, revised);

    const acts = (round: number, what: string): ContractActivities =>
      contractActivities(run.stage.name, contract, round, what);
    let v: ContractValidateResult;
    try {
      const first: ContractValidateInput = { ...call, round: 0, contract, input: run.input, source };
      v = await acts(0, 'validate')[CONTRACT_VALIDATE_ACTIVITY](first);
    } catch (error) {
      if (isCancellation(error)) throw error;
      const unknown = unknownImplementation(error);
      if (unknown !== undefined) return { ok: false, message: `${edge}: ${unknown}` };
      // The seed's conservative fallback: validation never blocks the pipeline.
      run.emit(
        'InputValidation',
        `${edge}: validation failed (${describeFailure(error)}); every item is accepted as produced`,
        { stage: run.stage.name, details: { from: contract.from, round: 0, fallback: 'threw' } },
      );
      continue;
    }
    if (!v.ok) return { ok: false, message: `${edge}: the items cannot be validated: ${v.problems.join('; ')}` };
    addCalls(v.calls);
    flags.items_produced += v.produced;
    flags.validation_rejections += v.rejectedNow;
    event(0, v);
    let stateRef = v.stateRef;
    let rejected = v.rejected;
    let round = 0;
    while (rejected > 0 && round < contract.maxRetries) {
      round++;
      flags.validation_retries++;
      const [thisRound, count] = [round, rejected];
      const reviseActs = (index: number): ContractActivities => acts(thisRound, `revise ${index + 1}/${count}`);
      const { results, unknown } = await reviseAll({ ...call, round, stateRef }, count, reviseActs);
      for (const r of results) addCalls(r.calls);
      if (unknown !== undefined) return { ok: false, message: `${edge}: ${unknown}` };
      const revisions = results.map((r, index) => ({ index, revisedRef: r.ok ? r.revisedRef : null }));
      const revised = {
        ok: results.filter((r) => r.ok).length,
        skipped: results.filter((r) => !r.ok).length,
        wasted: results.reduce((sum, r) => sum + (r.ok ? 0 : r.wastedTokens), 0),
      };
      try {
        const again: ContractValidateInput = { ...call, round, stateRef, revisions };
        v = await acts(round, `validate ${revised.ok} revised`)[CONTRACT_VALIDATE_ACTIVITY](again);
      } catch (error) {
        if (isCancellation(error)) throw error;
        const unknown = unknownImplementation(error);
        if (unknown !== undefined) return { ok: false, message: `${edge}: ${unknown}` };
        run.emit(
          'InputValidation',
          `${edge} round ${round}: validation failed (${describeFailure(error)}); the revised items are accepted`,
          { stage: run.stage.name, details: { from: contract.from, round, fallback: 'threw' } },
        );
        tally.push(`round ${round}: validation failed, the revised items are accepted`);
        rejected = 0;
        break;
      }
      if (!v.ok) return { ok: false, message: `${edge}: ${v.problems.join('; ')}` };
      addCalls(v.calls);
      flags.validation_rejections += v.rejectedNow;
      event(round, v, revised);
      stateRef = v.stateRef;
      rejected = v.rejected;
    }
    const finalize = acts(round, truncateText(`finalize (${tally.join('; ')})`, MAX_TALLY))[CONTRACT_FINALIZE_ACTIVITY];
    const final = await finalize({ stateRef, retries: round });
    validated[contract.from] = final.artefact;
    run.emit('InputValidation', `${edge}: ${final.summary}`, {
      stage: run.stage.name,
      details: { from: contract.from, final: true, accepted: final.accepted, warned: final.warned, retries: round },
    });
  }
  st.validatedInputs = validated;
  run.touch();
  return { ok: true };
}

/** What a validate call answered when it could validate. */
type ValidatedRound = Extract<ContractValidateResult, { ok: true }>;
/** A round's revisions: usable ones, unusable ones and the tokens those wasted. */
interface RevisedRound {
  ok: number;
  skipped: number;
  wasted: number;
}

/** Where a contract's rounds are recorded: the consuming stage's events, and the tally for its finalize call. */
interface RoundLog {
  run: ContractRun;
  /** The producing stage. */
  from: string;
  /** The edge's label, `from → to`. */
  edge: string;
  /** Each round's counts, for the finalize call's summary. */
  tally: string[];
}

/** One round of a contract: its line in the finalize call's tally, and its `InputValidation` event. */
function emitRound(
  { run, from, edge, tally }: RoundLog,
  round: number,
  v: ValidatedRound,
  revised?: RevisedRound,
): void {
  const counts = `${v.validated} validated, ${v.accepted} accepted, ${v.rejectedNow} rejected`;
  const fellBack = v.fallback ? ` (${v.fallback} fallback)` : '';
  tally.push(`round ${round}: ${revised ? `${revised.ok} revised, ` : ''}${counts}${fellBack}`);
  const fallback = v.fallback
    ? `; ${v.fallback === 'threw' ? 'the validator failed, so every item is accepted' : v.fallback === 'malformed' ? 'the answer was malformed, so every item is accepted' : 'items not mentioned are accepted'} (${v.fallbackDetail})`
    : '';
  const revisions = revised
    ? `${revised.ok} revised${revised.skipped > 0 ? `, ${revised.skipped} revision${revised.skipped === 1 ? '' : 's'} unusable (${revised.wasted} tokens wasted)` : ''}; `
    : '';
  run.emit(
    'InputValidation',
    `${edge} round ${round}: ${revisions}${v.validated} validated, ${v.accepted} accepted, ${v.rejectedNow} rejected${fallback}`,
    {
      stage: run.stage.name,
      details: {
        from,
        round,
        validated: v.validated,
        accepted: v.accepted,
        rejected: v.rejectedNow,
        stillRejected: v.rejected,
        tokens: v.tokens,
        ...(v.fallback ? { fallback: v.fallback } : {}),
        sample: v.sample as unknown as Json,
        ...(revised ? { revised: revised.ok, skipped: revised.skipped, wastedTokens: revised.wasted } : {}),
      },
    },
  );
  run.touch();
}

/**
 * One revision per rejected item, at most {@link CONTRACT_REVISION_LANES} at once; a revision that fails is a
 * skipped item. A reviser the worker does not register stops the round: `unknown` says so, naming the fix.
 */
async function reviseAll(
  base: Omit<ContractReviseInput, 'index'>,
  count: number,
  acts: (index: number) => ContractActivities,
): Promise<{ results: ContractReviseResult[]; unknown?: string }> {
  const results: ContractReviseResult[] = new Array<ContractReviseResult>(count);
  let next = 0;
  let unknown: string | undefined;
  const lane = async (): Promise<void> => {
    while (next < count && unknown === undefined) {
      const index = next++;
      try {
        results[index] = await acts(index)[CONTRACT_REVISE_ACTIVITY]({ ...base, index });
      } catch (error) {
        if (isCancellation(error)) throw error;
        unknown ??= unknownImplementation(error);
        results[index] = { ok: false, id: `#${index}`, error: describeFailure(error), wastedTokens: 0 };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONTRACT_REVISION_LANES, count) }, lane));
  // Revisions the stop left unasked have no result.
  const asked = results.filter((r): r is ContractReviseResult => r !== undefined);
  return unknown !== undefined ? { results: asked, unknown } : { results };
}
