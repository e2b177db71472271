/**
 * The `human` stage kind's shapes (issue 40): a stage whose output a person supplies. Its request lives in the
 * work item's state (`humanRequests`); the person answers through the item's `respondHuman` update, checked here
 * (pure, no I/O: the workflow's validator and the client share it).
 */
import type { HumanRequest } from '../../model/state';
import type { Json } from '../../model/shapes';

/** The kind's name in a spec (`run: human`). */
export const HUMAN_STAGE = 'human';

/** The memo key under which the item lists its pending human requests for listings. */
export const HUMAN_MEMO_KEY = 'treadleHuman';

/**
 * An output sent inline is at most this large (JSON text); a larger one goes to the blob store and only its
 * reference is sent (the client does so above its blob threshold, which is far smaller): history stays small.
 */
export const MAX_INLINE_HUMAN_OUTPUT_BYTES = 32 * 1024;

/** The longest reason a person may give to reject the stage. */
export const MAX_HUMAN_REASON_CHARS = 4_000;

/** The `respondHuman` update's argument: the output of attempt `attempt` of `stage`, or a rejection. */
export interface HumanResponse {
  stage: string;
  /** The attempt waiting (the person's first answer is attempt 1; a gate's rejection asks for the next). */
  attempt: number;
  /** The output inline (small), or `outputRef` (a blob reference, as stage artefacts are stored). */
  output?: Json;
  outputRef?: Json;
  /** `reject`: fail the stage with this reason instead of answering. */
  reject?: string;
  /** Who answered. */
  by: string;
}

/** What the update answers. */
export interface HumanResponded {
  itemId: string;
  stage: string;
  attempt: number;
  outcome: 'responded' | 'rejected';
  by: string;
}

/** A stage's `with:` made canonical. */
export interface HumanStageConfig {
  instructions?: string;
  reviewers?: string;
}

/** The pending human requests as listings read them from the memo. */
export interface HumanMemo {
  pipeline: string;
  requests: HumanRequest[];
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Whether `value` has the shape of a blob reference (`{ref: 'sha256:…', …}`). */
function looksLikeBlobRef(value: unknown): boolean {
  return isRecord(value) && typeof value.ref === 'string' && value.ref.startsWith('sha256:');
}

/**
 * A response checked against the item's requests: the pending request it answers, or why it is refused (the
 * stage does not wait on a person, the attempt is not the one waiting, no output or two, an output too large).
 */
export function checkHumanResponse(
  requests: readonly HumanRequest[],
  itemId: string,
  payload: unknown,
): { ok: true; request: HumanRequest; response: HumanResponse } | { ok: false; error: string } {
  if (!isRecord(payload))
    return { ok: false, error: 'a response is an object {stage, attempt, output | outputRef, by}' };
  const { stage, attempt, output, outputRef, reject, by } = payload;
  if (typeof stage !== 'string' || stage === '') return { ok: false, error: 'stage: must name the human stage' };
  if (typeof by !== 'string' || by.trim() === '') return { ok: false, error: 'by: must name who answers' };
  const request = requests.find((r) => r.stage === stage && r.status === 'pending');
  if (!request) {
    const waiting = requests.filter((r) => r.status === 'pending').map((r) => r.stage);
    return {
      ok: false,
      error: `stage ${stage} of ${itemId} is not waiting for a person's output${waiting.length > 0 ? ` (waiting: ${waiting.join(', ')})` : ''}`,
    };
  }
  if (attempt !== request.attempt)
    return {
      ok: false,
      error: `stage ${stage} of ${itemId} waits for attempt ${request.attempt}, not ${JSON.stringify(attempt)}: answer attempt ${request.attempt}`,
    };
  if (reject !== undefined) {
    if (typeof reject !== 'string' || reject.trim() === '')
      return { ok: false, error: 'reject: must say why the stage fails' };
    if (reject.length > MAX_HUMAN_REASON_CHARS)
      return { ok: false, error: `reject: at most ${MAX_HUMAN_REASON_CHARS} characters` };
    if (output !== undefined || outputRef !== undefined)
      return { ok: false, error: 'a rejection carries no output: send reject or output, not both' };
  } else {
    if ((output === undefined) === (outputRef === undefined))
      return { ok: false, error: 'send the output inline (output) or by blob reference (outputRef), exactly one' };
    if (outputRef !== undefined && !looksLikeBlobRef(outputRef))
      return { ok: false, error: 'outputRef: must be a blob reference {ref: "sha256:…", bytes, summary}' };
    if (output !== undefined && JSON.stringify(output).length > MAX_INLINE_HUMAN_OUTPUT_BYTES)
      return {
        ok: false,
        error: `output: larger than ${MAX_INLINE_HUMAN_OUTPUT_BYTES} bytes inline; store it in the blob store and send outputRef (the client does)`,
      };
  }
  return { ok: true, request, response: payload as unknown as HumanResponse };
}

/** Problems with a human stage's `with:` (`path: message` each); none when it is valid. */
export function checkHumanStageConfig(config: unknown): string[] {
  if (config === undefined || config === null) return [];
  if (!isRecord(config)) return ['(with): must be an object {instructions?, reviewers?}'];
  const problems: string[] = [];
  for (const key of Object.keys(config))
    if (key !== 'instructions' && key !== 'reviewers')
      problems.push(`${key}: unknown field; a human stage takes instructions and reviewers`);
  const { instructions, reviewers } = config;
  if (instructions !== undefined && (typeof instructions !== 'string' || instructions.trim() === ''))
    problems.push('instructions: must be text saying what the person should supply');
  else if (typeof instructions === 'string' && instructions.length > 4_000)
    problems.push('instructions: must be at most 4,000 characters');
  if (reviewers !== undefined && (typeof reviewers !== 'string' || reviewers.trim() === ''))
    problems.push('reviewers: must name a reviewer group, e.g. legal');
  return problems;
}

/** The canonical config (validate first: invalid fields are left out). */
export function humanStageConfig(config: unknown): HumanStageConfig {
  if (!isRecord(config)) return {};
  return {
    ...(typeof config.instructions === 'string' ? { instructions: config.instructions } : {}),
    ...(typeof config.reviewers === 'string' ? { reviewers: config.reviewers } : {}),
  };
}
