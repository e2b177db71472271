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
  type ContractCall,
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
import type { StageState } from '../../model/state';
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

/** Why the consuming stage fails: a list that cannot be validated, or a validator or reviser not registered. */
type ContractFailure = { ok: false; message: string };

/**
 * Runs every contract into `run.stage`. On success the stage's `validatedInputs` replace the producers'
 * artefacts for its attempts; a list that cannot be validated (not a list, missing or duplicate ids) is
 * the stage's failure, with every problem.
 */
export async function runContracts(
  run: ContractRun,
  contracts: readonly ContractSpec[],
): Promise<{ ok: true } | ContractFailure> {
  const mine = contracts.filter((c) => c.to === run.stage.name);
  if (mine.length === 0) return { ok: true };
  const st = run.state.stages[run.stage.name]!;
  const flags: QualityFlags = st.qualityFlags ?? { items_produced: 0, validation_rejections: 0, validation_retries: 0 };
  st.qualityFlags = flags;
  const validated: Record<string, Artefact> = { ...st.validatedInputs };
  for (const contract of mine) {
    const source = run.state.stages[contract.from]?.artefact;
    if (source === undefined) continue; // nothing produced (a skipped producer): nothing to validate
    const rounds = new ContractRounds(run, contract, st, flags);
    let v: ContractValidateResult;
    try {
      v = await rounds.validate('validate', { ...rounds.call, round: 0, contract, input: run.input, source });
    } catch (error) {
      const failure = rounds.validationThrew(error, 0);
      if (failure !== undefined) return failure;
      continue;
    }
    if (!v.ok) return rounds.failed(`the items cannot be validated: ${v.problems.join('; ')}`);
    flags.items_produced += v.produced;
    rounds.validated(0, v);
    let stateRef = v.stateRef;
    let rejected = v.rejected;
    let round = 0;
    while (rejected > 0 && round < contract.maxRetries) {
      round++;
      flags.validation_retries++;
      const { results, unknown } = await rounds.reviseRejected(round, stateRef, rejected);
      for (const r of results) rounds.addCalls(r.calls);
      if (unknown !== undefined) return rounds.failed(unknown);
      const revisions = results.map((r, index) => ({ index, revisedRef: r.ok ? r.revisedRef : null }));
      const revised = revisedRound(results);
      try {
        const again: ContractValidateInput = { ...rounds.call, round, stateRef, revisions };
        v = await rounds.validate(`validate ${revised.ok} revised`, again);
      } catch (error) {
        const failure = rounds.validationThrew(error, round);
        if (failure !== undefined) return failure;
        rejected = 0;
        break;
      }
      if (!v.ok) return rounds.failed(v.problems.join('; '));
      rounds.validated(round, v, revised);
      stateRef = v.stateRef;
      rejected = v.rejected;
    }
    const final = await rounds.finalize(round, stateRef);
    validated[contract.from] = final.artefact;
    rounds.finalized(round, final);
  }
  st.validatedInputs = validated;
  run.touch();
  return { ok: true };
}

/**
 * One contract's rounds into the consuming stage: its activities, named per round, and what each round
 * leaves behind (the stage's quality flags and contract usage, `InputValidation` events, the finalize call's
 * tally). The loop over rounds stays in {@link runContracts}, which awaits each call.
 */
class ContractRounds implements RoundLog {
  readonly from: string;
  readonly edge: string;
  readonly tally: string[] = [];
  /** What every call of the contract names; round 0 stores the contract and the input in the contract's state. */
  readonly call: ContractCall;

  constructor(
    readonly run: ContractRun,
    private readonly contract: ContractSpec,
    private readonly st: StageState,
    private readonly flags: QualityFlags,
  ) {
    const correlation = run.state.correlationId !== undefined ? { correlationId: run.state.correlationId } : {};
    this.call = { itemId: run.itemId, pipeline: run.pipeline, consumer: contract.to, ...correlation };
    this.from = contract.from;
    this.edge = `${contract.from} → ${contract.to}`;
  }

  /** The stage's failure, naming the edge. */
  failed(problem: string): ContractFailure {
    return { ok: false, message: `${this.edge}: ${problem}` };
  }

  /** Batches (or, in histories recorded before them, arrays of records): their totals only. */
  addCalls(calls: unknown): void {
    const usage = callBatchOf(calls)?.usage;
    if (usage && usage.calls > 0) this.st.contractUsage = addTotals(this.st.contractUsage, usage);
  }

  /** Not async: the validate activity's own promise. */
  validate(what: string, input: ContractValidateInput): Promise<ContractValidateResult> {
    return this.activities(input.round, what)[CONTRACT_VALIDATE_ACTIVITY](input);
  }

  /**
   * A validate call threw: a cancellation goes on, a validator the worker lacks is the stage's failure, and
   * anything else is the seed's conservative fallback (validation never blocks the pipeline): undefined.
   */
  validationThrew(error: unknown, round: number): ContractFailure | undefined {
    if (isCancellation(error)) throw error;
    const unknown = unknownImplementation(error);
    if (unknown !== undefined) return this.failed(unknown);
    const where = round === 0 ? this.edge : `${this.edge} round ${round}`;
    const accepted = round === 0 ? 'every item is accepted as produced' : 'the revised items are accepted';
    this.run.emit('InputValidation', `${where}: validation failed (${describeFailure(error)}); ${accepted}`, {
      stage: this.run.stage.name,
      details: { from: this.from, round, fallback: 'threw' },
    });
    if (round > 0) this.tally.push(`round ${round}: validation failed, the revised items are accepted`);
    return undefined;
  }

  /** A round validated: its calls, its rejections, its tally line and event. */
  validated(round: number, v: ValidatedRound, revised?: RevisedRound): void {
    this.addCalls(v.calls);
    this.flags.validation_rejections += v.rejectedNow;
    emitRound(this, round, v, revised);
  }

  /** Not async: {@link reviseAll}'s own promise, one revise call per rejected item. */
  reviseRejected(round: number, stateRef: string, count: number): ReturnType<typeof reviseAll> {
    return reviseAll({ ...this.call, round, stateRef }, count, (index) =>
      this.activities(round, `revise ${index + 1}/${count}`),
    );
  }

  /** Not async: the finalize activity's own promise; its summary holds the rounds' tally. */
  finalize(round: number, stateRef: string): Promise<ContractFinalizeResult> {
    const what = truncateText(`finalize (${this.tally.join('; ')})`, MAX_TALLY);
    return this.activities(round, what)[CONTRACT_FINALIZE_ACTIVITY]({ stateRef, retries: round });
  }

  /** The contract's final list: its `InputValidation` event. */
  finalized(round: number, final: ContractFinalizeResult): void {
    this.run.emit('InputValidation', `${this.edge}: ${final.summary}`, {
      stage: this.run.stage.name,
      details: { from: this.from, final: true, accepted: final.accepted, warned: final.warned, retries: round },
    });
  }

  private activities(round: number, what: string): ContractActivities {
    return contractActivities(this.run.stage.name, this.contract, round, what);
  }
}

/** A round's revise calls counted: usable revisions, unusable ones and the tokens those wasted. */
function revisedRound(results: readonly ContractReviseResult[]): RevisedRound {
  return {
    ok: results.filter((r) => r.ok).length,
    skipped: results.filter((r) => !r.ok).length,
    wasted: results.reduce((sum, r) => sum + (r.ok ? 0 : r.wastedTokens), 0),
  };
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
