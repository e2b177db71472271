/**
 * What a contract's validators and revisers are: the interface the built-in llm ones and a worker's own
 * implement, and the check that tells a validator's answer the engine can read from one it would misread.
 */
import type { ContractSpec } from '../spec';
import type { Agent } from '../../../agents/types';
import type { Json } from '../../../model/shapes';

/** What a validator or reviser is given. */
export interface ContractContext {
  itemId: string;
  pipeline: string;
  contract: ContractSpec;
  round: number;
  /** The implementation's `with:`. */
  config: Json | undefined;
  /** The work item's input. */
  input: Json;
  signal: AbortSignal;
  /** The agent for this call (the contract's `with.agent`, else the worker's default); its calls are logged. */
  agent(provider?: string): Agent;
}

/** A validator's answer: the rejections with reasons; items it does not name are accepted. */
export interface ContractValidation {
  rejected: { id: string; reason: string }[];
  /** Ids it named as accepted (to tell a partial answer from a full one). */
  accepted?: string[];
  /** Set when the answer could not be read: everything is accepted (the seed's conservative fallback). */
  malformed?: string;
}

/** The consuming stage's judge of the producer's items (one call for all of them). */
export type ContractValidator = (
  ctx: ContractContext & { items: { id: string; item: Json }[] },
) => Promise<ContractValidation>;
/** The producing stage's reviser of one rejected item; throw {@link UnparsableRevision} for a reply that is not an item. */
export type ContractReviser = (ctx: ContractContext & { id: string; item: Json; reason: string }) => Promise<Json>;

/** A revision whose reply could not be read as an item: the item is skipped this round. */
export class UnparsableRevision extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnparsableRevision';
  }
}

/** The shape a validator answers in, as its error messages name it. */
const VALIDATION_SHAPE = '{rejected: [{id, reason}], accepted?: [id]}';

/**
 * Why a validator's answer is not a {@link ContractValidation} (the engine would misread it), or undefined
 * when it is one. Ids may be numbers (item ids are read as text).
 */
export function unrecognisedAnswer(answer: unknown): string | undefined {
  const kind = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value);
  const keys = (value: object): string => Object.keys(value).join(', ') || 'none';
  const isId = (id: unknown): boolean => typeof id === 'string' || typeof id === 'number';
  if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) {
    return `the validator's answer is ${kind(answer)}, not ${VALIDATION_SHAPE}`;
  }
  const a = answer as Record<string, unknown>;
  if (a.malformed !== undefined) {
    return typeof a.malformed === 'string' ? undefined : `malformed: must be text, got ${kind(a.malformed)}`;
  }
  const problems: string[] = [];
  if (!Array.isArray(a.rejected)) {
    const got = a.rejected === undefined ? 'nothing' : kind(a.rejected);
    problems.push(`rejected: must be a list, got ${got} (keys given: ${keys(a)})`);
  } else {
    a.rejected.forEach((r: unknown, i) => {
      if (r === null || typeof r !== 'object' || Array.isArray(r)) {
        problems.push(`rejected[${i}] is ${kind(r)}, not {id, reason}`);
        return;
      }
      const entry = r as Record<string, unknown>;
      if (!isId(entry.id)) problems.push(`rejected[${i}] has no id (keys given: ${keys(entry)})`);
      if (entry.reason !== undefined && typeof entry.reason !== 'string') {
        problems.push(`rejected[${i}].reason: must be text, got ${kind(entry.reason)}`);
      }
    });
  }
  if (a.accepted !== undefined && (!Array.isArray(a.accepted) || !a.accepted.every(isId))) {
    problems.push('accepted: must be a list of ids');
  }
  if (problems.length === 0) return undefined;
  const more = problems.length > 3 ? `; … and ${problems.length - 3} more` : '';
  return `the validator's answer is not ${VALIDATION_SHAPE}: ${problems.slice(0, 3).join('; ')}${more}`;
}
