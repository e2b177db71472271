/**
 * The contract activities (seed 002's Validate-Retry-Process), run by the work item before a consuming
 * stage's first attempt:
 *
 * - `treadle.contractValidate`: round 0 reads the producer's list and checks every item has a unique id,
 *   then asks the validator about all items in **one** call; later rounds apply the round's revisions and
 *   re-validate **only** the revised items. The seed's conservative fallbacks: a validator that throws
 *   accepts everything, a malformed answer accepts everything, items it does not mention are accepted.
 * - `treadle.contractRevise`: one call of the producer's reviser for one rejected item, with the reason;
 *   a reply that does not parse skips the item (it stays rejected) and reports the tokens it wasted.
 * - `treadle.contractFinalize`: accepted items in their original order, then the still-rejected ones with
 *   `validation_warnings: ["Rejected after N retries: <reason>"]`, put back where the list was in the
 *   producer's artefact: that artefact is what the consumer receives.
 *
 * The items and their verdicts live in the blob store (a state blob per round); the history carries counts
 * and references, whatever the list's size. Every validation and revision call lands in the call log.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { getPath, readItems, setPath } from '../items';
import { llmReviser, llmValidator } from './llm';
import {
  unrecognisedAnswer,
  UnparsableRevision,
  type ContractContext,
  type ContractReviser,
  type ContractValidation,
  type ContractValidator,
} from './validators';
import { recordingAgent } from '../../../agents';
import { defaultAgentName, type AgentProviders } from '../../../agents/providers';
import {
  CONTRACT_FINALIZE_ACTIVITY,
  CONTRACT_REVISE_ACTIVITY,
  CONTRACT_VALIDATE_ACTIVITY,
} from '../../../model/activity-types';
import {
  LLM_CONTRACT_IMPLEMENTATION,
  UNKNOWN_CONTRACT_IMPLEMENTATION,
  type ContractCall,
  type ContractFinalizeInput,
  type ContractFinalizeResult,
  type ContractReviseInput,
  type ContractReviseResult,
  type ContractSpec,
  type ContractValidateInput,
  type ContractValidateResult,
} from '../spec';
import { truncateText } from '../../../model/limits';
import { isBlobRef, type Json } from '../../../model/shapes';
import { offloadArtefact, readJson, resolveArtefact, storeJson, type BlobStore } from '../../../storage/blob-store';
import { callLogWriter, type CallLog } from '../../../storage/call-log';
import { ConversationStore } from '../../../storage/conversation';
import { callsOf, supervise, type Supervision } from '../../../activities/supervision';

/** What the contract activities are given by the worker. */
export interface ContractActivityDependencies {
  blobs: BlobStore;
  agents: AgentProviders;
  callLog?: CallLog;
  validators?: Record<string, ContractValidator>;
  revisers?: Record<string, ContractReviser>;
  blobThresholdBytes: number;
}

/** The contract's items and verdicts after a round (a blob): later rounds and revisions read it all from here. */
interface ContractState {
  contract: ContractSpec;
  /** The work item's input as it came (a reference when large). */
  input: Json;
  /** The producer's artefact as it came (a reference when large). */
  source: Json;
  ids: string[];
  /** Current version of each item (revised ones replaced), in the original order. */
  items: Json[];
  verdicts: ('accepted' | 'rejected')[];
  reasons: (string | null)[];
  /** Indexes of the items rejected in the last round, in order: what the next round revises. */
  rejected: number[];
}

/** Rejections an event names; the state holds all of them. */
const SAMPLE = 5;
const MAX_REASON = 500;

/** The contract activities, registered under their `CONTRACT_*_ACTIVITY` names. */
export function createContractActivities(deps: ContractActivityDependencies) {
  const validators: Record<string, ContractValidator> = {
    [LLM_CONTRACT_IMPLEMENTATION]: llmValidator,
    ...deps.validators,
  };
  const revisers: Record<string, ContractReviser> = { [LLM_CONTRACT_IMPLEMENTATION]: llmReviser, ...deps.revisers };
  const where = (call: ContractCall, kind: 'validate' | 'revise') =>
    callLogWriter(deps.callLog, { pipeline: call.pipeline, stage: `${call.consumer}.${kind}` });
  // The work item's input, resolved once per worker for all the rounds and revisions that read it.
  const inputs = new Map<string, Json>();
  const resolveInput = async (input: Json): Promise<Json> => {
    if (!isBlobRef(input)) return input;
    const cached = inputs.get(input.ref);
    if (cached !== undefined) return cached;
    const resolved = (await resolveArtefact(input, deps.blobs)) ?? null;
    if (inputs.size >= 20) inputs.clear();
    inputs.set(input.ref, resolved);
    return resolved;
  };
  return {
    [CONTRACT_VALIDATE_ACTIVITY]: async (input: ContractValidateInput): Promise<ContractValidateResult> =>
      supervise((s) => validate(input, { deps, validators, resolveInput, s }), {
        blobs: deps.blobs,
        onCalls: where(input, 'validate'),
      }),
    [CONTRACT_REVISE_ACTIVITY]: async (input: ContractReviseInput): Promise<ContractReviseResult> =>
      supervise((s) => revise(input, { deps, revisers, resolveInput, s }), {
        blobs: deps.blobs,
        onCalls: where(input, 'revise'),
      }),
    [CONTRACT_FINALIZE_ACTIVITY]: async (input: ContractFinalizeInput): Promise<ContractFinalizeResult> =>
      finalize(input, deps),
  };
}

/** What a validator or reviser call needs of its activity: the call, the contract, the round, the item's input (resolved). */
interface CallSetting {
  call: ContractCall;
  contract: ContractSpec;
  round: number;
  input: Json;
}

function contextFor(
  at: CallSetting,
  kind: 'validate' | 'revise',
  key: string,
  { deps, s }: Pick<CallTools, 'deps' | 's'>,
): ContractContext {
  const { call, contract, round, input } = at;
  const ref = kind === 'validate' ? contract.validate : contract.revise;
  const configured = (ref.with as { agent?: unknown } | undefined)?.agent;
  return {
    itemId: call.itemId,
    pipeline: call.pipeline,
    contract,
    round,
    config: ref.with,
    input,
    signal: s.signal,
    agent: (provider) => {
      const name = provider ?? (typeof configured === 'string' ? configured : defaultAgentName());
      const factory = deps.agents[name];
      if (!factory)
        throw ApplicationFailure.nonRetryable(
          `unknown agent provider "${name}" (available: ${Object.keys(deps.agents).join(', ')})`,
          'UnknownAgent',
        );
      // Scripted replies: `<consumer>.validate` (reply n for round n-1), `<consumer>.revise.<item id>` (reply n for round n).
      return recordingAgent(
        factory({
          itemId: call.itemId,
          stage: key,
          attempt: kind === 'validate' ? round + 1 : round,
          input,
          config: ref.with,
        }),
        {
          calls: s.calls,
          conversations: new ConversationStore(deps.blobs),
          ...(call.correlationId !== undefined ? { runCorrelationId: call.correlationId } : {}),
        },
      );
    },
  };
}

/** How a round fell back to accepting (the seed's conservative fallbacks), for its event to flag. */
/**
 * What a validate or revise call works with besides its input: the worker's dependencies, the work item
 * input's resolver (cached per worker) and the activity's supervision.
 */
interface CallTools {
  deps: ContractActivityDependencies;
  resolveInput: (input: Json) => Promise<Json>;
  s: Supervision;
}

interface RoundFallback {
  kind: 'threw' | 'malformed' | 'partial';
  detail: string;
}

async function validate(
  input: ContractValidateInput,
  tools: CallTools & { validators: Record<string, ContractValidator> },
): Promise<ContractValidateResult> {
  const { deps, s } = tools;
  const opened = await openRound(input, deps.blobs);
  if (!opened.ok) return { ok: false, problems: opened.problems };
  const { state, toValidate } = opened;
  const { contract } = state;
  let fallback: RoundFallback | undefined;
  let newlyRejected: number[] = [];
  if (toValidate.length > 0) {
    // Empty input makes no call; otherwise one call for every item of the round.
    const asked = await askValidator(input, state, toValidate, tools);
    ({ fallback, newlyRejected } = recordVerdicts(state, toValidate, asked));
  }
  newlyRejected.sort((a, b) => a - b);
  state.rejected = [...state.rejected, ...newlyRejected].sort((a, b) => a - b);
  const stateRef = await storeJson(
    deps.blobs,
    state,
    `contract ${contract.from} → ${contract.to}, round ${input.round}`,
  );
  return {
    ok: true,
    stateRef,
    validated: toValidate.length,
    produced: state.items.length,
    accepted: toValidate.length - newlyRejected.length,
    rejectedNow: newlyRejected.length,
    rejected: state.rejected.length,
    ...(fallback ? { fallback: fallback.kind, fallbackDetail: fallback.detail } : {}),
    sample: newlyRejected
      .slice(0, SAMPLE)
      .map((at) => ({ id: truncateText(state.ids[at]!, 100), reason: truncateText(state.reasons[at] ?? '', 200) })),
    tokens: tokensOf(s),
    ...(await callsOf(s)),
  };
}

/**
 * The round's state and the items it validates: round 0 reads the producer's list (all of it); later rounds
 * apply the revisions to the last state and validate only the revised items.
 */
async function openRound(
  input: ContractValidateInput,
  blobs: BlobStore,
): Promise<{ ok: true; state: ContractState; toValidate: number[] } | { ok: false; problems: string[] }> {
  let state: ContractState;
  let toValidate: number[];
  if ('source' in input) {
    const source = (await resolveArtefact(input.source, blobs)) ?? null;
    const read = readItems(source, input.contract);
    if (!read.ok) return { ok: false, problems: read.problems };
    state = {
      contract: input.contract,
      input: input.input,
      source: input.source,
      ids: read.ids,
      items: read.items,
      verdicts: read.items.map(() => 'accepted'),
      reasons: read.items.map(() => null),
      rejected: [],
    };
    toValidate = read.items.map((_, i) => i);
  } else {
    state = await readJson<ContractState>(blobs, input.stateRef);
    toValidate = [];
    for (const revision of input.revisions) {
      const at = state.rejected[revision.index];
      if (at === undefined || revision.revisedRef === null) continue;
      const revised = await readJson<Json>(blobs, revision.revisedRef);
      state.items[at] = revised;
      toValidate.push(at);
    }
    // Items whose revision failed stay rejected with their reason, and are revised again next round.
    const unrevised = state.rejected.filter((at) => !toValidate.includes(at));
    state.rejected = unrevised;
  }
  return { ok: true, state, toValidate };
}

/** One call of the contract's validator for the round's items; a throw or an unreadable answer is a fallback. */
async function askValidator(
  input: ContractValidateInput,
  state: ContractState,
  toValidate: number[],
  tools: CallTools & { validators: Record<string, ContractValidator> },
): Promise<{ answer: ContractValidation | undefined; fallback: RoundFallback | undefined }> {
  const { validators, resolveInput, s } = tools;
  const { contract } = state;
  let fallback: RoundFallback | undefined;
  const validator = validators[contract.validate.run];
  if (!validator) throw unknownImplementation('validator', contract.validate.run, Object.keys(validators));
  let answer: ContractValidation | undefined;
  try {
    const setting = { call: input, contract, round: input.round, input: await resolveInput(state.input) };
    answer = await validator({
      ...contextFor(setting, 'validate', `${contract.to}.validate`, tools),
      items: toValidate.map((i) => ({ id: state.ids[i]!, item: state.items[i]! })),
    });
  } catch (error) {
    if (error instanceof CancelledFailure || s.signal.aborted) throw error;
    fallback = {
      kind: 'threw',
      detail: truncateText(error instanceof Error ? error.message : String(error), MAX_REASON),
    };
  }
  // A validator of the user's own may answer anything: a shape the engine does not know is a flagged
  // fallback like a malformed llm reply, never a silent "everything accepted".
  const unrecognised = answer !== undefined ? unrecognisedAnswer(answer) : undefined;
  if (unrecognised !== undefined) {
    fallback = { kind: 'malformed', detail: truncateText(unrecognised, MAX_REASON) };
    answer = undefined;
  }
  if (answer?.malformed !== undefined)
    fallback = { kind: 'malformed', detail: truncateText(answer.malformed, MAX_REASON) };
  return { answer, fallback };
}

/**
 * Applies the validator's answer to the round's items (rejections with their reasons, the rest accepted) and
 * returns the newly rejected ones, with the fallback the answer calls for (ids it does not name, partial answers).
 */
function recordVerdicts(
  state: ContractState,
  toValidate: number[],
  asked: { answer: ContractValidation | undefined; fallback: RoundFallback | undefined },
): { newlyRejected: number[]; fallback: RoundFallback | undefined } {
  const { answer } = asked;
  let { fallback } = asked;
  const newlyRejected: number[] = [];
  const byId = new Map(toValidate.map((i) => [state.ids[i]!, i]));
  if (answer && answer.malformed === undefined) {
    const mentioned = new Set<string>();
    const unknown: string[] = [];
    for (const r of answer.rejected) {
      const id = String(r.id);
      const at = byId.get(id);
      if (at === undefined) unknown.push(id);
      if (at === undefined || mentioned.has(id)) continue;
      mentioned.add(id);
      state.verdicts[at] = 'rejected';
      state.reasons[at] = truncateText(r.reason || 'rejected without a reason', MAX_REASON);
      newlyRejected.push(at);
    }
    for (const id of (answer.accepted ?? []).map(String)) if (byId.has(id)) mentioned.add(id);
    if (mentioned.size < toValidate.length && answer.accepted !== undefined) {
      fallback = {
        kind: 'partial',
        detail: `${toValidate.length - mentioned.size} of ${toValidate.length} items not mentioned: accepted`,
      };
    }
    if (unknown.length > 0) {
      const quoted = unknown.slice(0, 5).map((id) => JSON.stringify(id));
      const ids = `${quoted.join(', ')}${unknown.length > 5 ? ', …' : ''}`;
      const named = `rejections name ids no item of this round has (${ids})`;
      const detail = fallback ? `${fallback.detail}; ${named}` : `${named}: items not rejected are accepted`;
      fallback = { kind: 'partial', detail };
    }
  }
  for (const at of toValidate) {
    if (!newlyRejected.includes(at)) {
      state.verdicts[at] = 'accepted';
      state.reasons[at] = null;
    }
  }
  return { newlyRejected, fallback };
}

async function revise(
  input: ContractReviseInput,
  tools: CallTools & { revisers: Record<string, ContractReviser> },
): Promise<ContractReviseResult> {
  const { deps, revisers, resolveInput, s } = tools;
  const state = await readJson<ContractState>(deps.blobs, input.stateRef);
  const { contract } = state;
  const at = state.rejected[input.index];
  if (at === undefined)
    throw ApplicationFailure.nonRetryable(`no rejected item ${input.index} in the contract's state`, 'InvalidInput');
  const id = state.ids[at]!;
  const reviser = revisers[contract.revise.run];
  if (!reviser) throw unknownImplementation('reviser', contract.revise.run, Object.keys(revisers));
  let revised: Json;
  try {
    const setting = { call: input, contract, round: input.round, input: await resolveInput(state.input) };
    revised = await reviser({
      ...contextFor(setting, 'revise', `${contract.to}.revise.${id}`, tools),
      id,
      item: state.items[at]!,
      reason: state.reasons[at] ?? '',
    });
  } catch (error) {
    if (error instanceof UnparsableRevision) {
      const wasted = tokensOf(s);
      Context.current().log.warn('contract revision skipped: its reply is not an item', {
        contract: `${contract.from} → ${contract.to}`,
        item: id,
        wastedTokens: wasted,
        error: error.message,
      });
      return {
        ok: false,
        id: truncateText(id, 100),
        error: truncateText(error.message, MAX_REASON),
        wastedTokens: wasted,
        ...(await callsOf(s)),
      };
    }
    throw error;
  }
  if (revised === null || typeof revised !== 'object' || Array.isArray(revised)) {
    return {
      ok: false,
      id: truncateText(id, 100),
      error: 'the revision is not an object',
      wastedTokens: tokensOf(s),
      ...(await callsOf(s)),
    };
  }
  // A revision keeps the item's identity: the id field is the original's, whatever the reply says.
  const kept = setPath(revised, contract.itemId, getPath(state.items[at]!, contract.itemId) ?? id);
  return {
    ok: true,
    id: truncateText(id, 100),
    revisedRef: await storeJson(deps.blobs, kept, `revision of ${id}`),
    tokens: tokensOf(s),
    ...(await callsOf(s)),
  };
}

/**
 * A validator or reviser this worker does not register: the workers of this queue must register it, or the
 * contract must name the queue whose workers do. Not retried: another try would reach a worker like this one.
 */
function unknownImplementation(role: 'validator' | 'reviser', name: string, registered: string[]): ApplicationFailure {
  const queue = Context.current().info.taskQueue;
  const register = `registry.${role}('${name}', …)`;
  return ApplicationFailure.nonRetryable(
    `unknown contract ${role} "${name}" on task queue ${queue} (its workers register: ${registered.sort().join(', ')}): ` +
      `register it with ${register} on every worker polling ${queue}, ` +
      "or name as the contract's task_queue the queue whose workers register it",
    UNKNOWN_CONTRACT_IMPLEMENTATION,
  );
}

async function finalize(
  input: ContractFinalizeInput,
  deps: ContractActivityDependencies,
): Promise<ContractFinalizeResult> {
  const state = await readJson<ContractState>(deps.blobs, input.stateRef);
  const { contract } = state;
  const accepted = state.items.filter((_, i) => state.verdicts[i] === 'accepted');
  const retries = `${input.retries} ${input.retries === 1 ? 'retry' : 'retries'}`;
  const warned = state.items.flatMap((item, i) => {
    if (state.verdicts[i] !== 'rejected') return [];
    const record = item as Record<string, Json>;
    const earlier = Array.isArray(record.validation_warnings) ? record.validation_warnings : [];
    return [{ ...record, validation_warnings: [...earlier, `Rejected after ${retries}: ${state.reasons[i] ?? ''}`] }];
  });
  const source = (await resolveArtefact(state.source, deps.blobs)) ?? null;
  const list = [...accepted, ...warned] as Json[];
  const replaced = contract.items === '' ? list : setPath(source, contract.items, list);
  const summary = `${accepted.length} accepted, ${warned.length} passed through with warnings`;
  const artefact = await offloadArtefact(
    replaced,
    deps.blobs,
    deps.blobThresholdBytes,
    `${contract.from}'s items for ${contract.to}: ${summary}`,
  );
  return { artefact: artefact as Json, accepted: accepted.length, warned: warned.length, summary };
}

/** Tokens this activity spent, its earlier executions' included (a retried execution reports their calls too). */
function tokensOf(s: Supervision): number {
  const { inputTokens, outputTokens } = s.usage();
  return inputTokens + outputTokens;
}
