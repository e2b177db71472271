/**
 * The approval stage kind's activities (seed 003 "Approval Gate"): `treadle.approvalCreate` turns the stage's
 * input into requests (every payload validated against its action type, ids and idempotency keys made,
 * large payloads stored by reference), and `treadle.approvalExecute` runs an approved request's action,
 * validating the payload again first and passing the idempotency key, so a retried activity or a worker
 * that crashed after the action ran never runs it twice.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { createHash } from 'node:crypto';
import {
  APPROVAL_CREATE_ACTIVITY,
  APPROVAL_EXECUTE_ACTIVITY,
  type ApprovalCreateInput,
  type ApprovalCreateResult,
  type ApprovalExecuteInput,
  type ApprovalExecuteResult,
  type ApprovalStageConfig,
} from '../shapes';
import { parseApprovalStageConfig } from '../spec';
import { truncateText } from '../../../model/limits';
import type { Artefact, Json } from '../../../model/shapes';
import {
  DEFAULT_BLOB_THRESHOLD_BYTES,
  offloadArtefact,
  resolveArtefact,
  type BlobStore,
} from '../../../storage/blob-store';
import { isRecord, resolveList, valueAt } from '../../../activities/sources';

/** What the approval activities need of the action registry (`src/approvals`). */
export interface ActionCatalog {
  /** Problems with a payload for the type, `path: message` each; an unknown type is one problem naming the known ones. */
  validatePayload(type: string, payload: unknown): string[];
  /** One line saying what the action will do. */
  summarize(type: string, payload: Json): string;
  /** Runs the action at most once per idempotency key and returns its result (the recorded one on a repeat). */
  execute(type: string, payload: Json, context: { idempotencyKey: string; signal?: AbortSignal }): Promise<Json>;
  /**
   * The registered types. With it, the worker's check before an item's first stage lists an unknown `action:`
   * (with a did-you-mean) among the spec's other problems; without it, the approval step refuses the type
   * only when it makes its requests, after the stages before it have run.
   */
  names?(): string[];
}

export interface ApprovalActivityDependencies {
  blobs: BlobStore;
  actions: ActionCatalog;
  blobThresholdBytes?: number;
  /** The seed's idempotency key, `hash(runId + step + inputHash)`. */
  idempotencyKey: (runId: string, step: string, inputHash: string) => string;
  /** The hash of an action's input (canonical JSON). */
  inputHash: (value: Json) => string;
}

/** How often an executing action heartbeats. */
const HEARTBEAT_EVERY_MS = 1_000;

/** At most this many requests per stage attempt: each is a row in the item's state and in listings. */
export const MAX_APPROVAL_REQUESTS = 1_000;

/** The approval kind's activities, keyed by activity type: making an attempt's requests, and running an approved one. */
export function createApprovalActivities(
  deps: ApprovalActivityDependencies,
): Record<string, (input: never) => Promise<unknown>> {
  const threshold = deps.blobThresholdBytes ?? DEFAULT_BLOB_THRESHOLD_BYTES;
  return {
    [APPROVAL_CREATE_ACTIVITY]: approvalCreate(deps, threshold) as (input: never) => Promise<unknown>,
    [APPROVAL_EXECUTE_ACTIVITY]: approvalExecute(deps, threshold) as (input: never) => Promise<unknown>,
  };
}

type ApprovalRequest = Extract<ApprovalCreateResult, { ok: true }>['requests'][number];
type Action = { type: string; payload: Json; fixed: boolean };

/** `treadle.approvalCreate`: one request per element of the stage's list, or every problem found in the list. */
function approvalCreate(
  deps: ApprovalActivityDependencies,
  threshold: number,
): (input: ApprovalCreateInput) => Promise<ApprovalCreateResult> {
  return async (input) => {
    let config: ApprovalStageConfig;
    try {
      config = parseApprovalStageConfig(input.config);
    } catch (error) {
      return { ok: false, problems: [(error as Error).message] };
    }
    const source = await resolveList(config, input.upstream, input.input, deps.blobs);
    if ('problem' in source) return { ok: false, problems: [source.problem] };
    const elements = source.elements;
    if (elements.length > MAX_APPROVAL_REQUESTS)
      return {
        ok: false,
        problems: [
          `${source.label} has ${elements.length} elements; an approval stage takes at most ${MAX_APPROVAL_REQUESTS} (split the list, or batch them with batch_create_tasks)`,
        ],
      };

    const problems: string[] = [];
    const requests: ApprovalRequest[] = [];
    for (const [index, element] of elements.entries()) {
      const where = `${source.label}[${index}]`;
      const action = actionOf(element, config);
      if ('problem' in action) {
        problems.push(`${where}: ${action.problem}`);
        continue;
      }
      const invalid = deps.actions.validatePayload(action.type, action.payload);
      if (invalid.length > 0) {
        // An unknown type is the stage's `action:` (once) or the element's `action_type`; the rest name payload fields.
        const unknown = invalid.find((p) => p.startsWith('action_type:'));
        if (unknown !== undefined && action.fixed)
          return { ok: false, problems: [`with.action: ${unknown.slice('action_type:'.length).trim()}`] };
        problems.push(...invalid.map((p) => payloadProblem(where, action.fixed, p)));
        continue;
      }
      requests.push(await approvalRequest(deps, threshold, input, index, action, contextOf(element, config)));
    }
    if (problems.length > 0) return { ok: false, problems };
    return { ok: true, requests, config };
  };
}

/** A problem with an element's action, placed at the element (a fixed action's payload is the element itself). */
function payloadProblem(where: string, fixed: boolean, problem: string): string {
  if (problem.startsWith('action_type:')) return `${where}.${problem}`;
  return `${where}${fixed ? '' : '.payload'}${problem.startsWith('payload') ? problem.slice('payload'.length) : `: ${problem}`}`;
}

/** The request for one valid element: its id and idempotency key, its summary, its payload (large ones by reference). */
async function approvalRequest(
  deps: ApprovalActivityDependencies,
  threshold: number,
  input: ApprovalCreateInput,
  index: number,
  action: Action,
  context: string | null,
): Promise<ApprovalRequest> {
  const summary = truncateText(deps.actions.summarize(action.type, action.payload), 200);
  const stored = (await offloadArtefact(action.payload as Artefact, deps.blobs, threshold, summary)) ?? null;
  return {
    id: approvalId(input, index),
    actionType: action.type,
    payload: stored,
    summary,
    context,
    idempotencyKey: deps.idempotencyKey(
      input.itemId,
      input.step,
      deps.inputHash({ actionType: action.type, payload: action.payload }),
    ),
  };
}

/** `treadle.approvalExecute`: runs an approved request's action once, its payload validated again first. */
function approvalExecute(
  deps: ApprovalActivityDependencies,
  threshold: number,
): (input: ApprovalExecuteInput) => Promise<ApprovalExecuteResult> {
  return async (input) => {
    const payload = (await resolveArtefact(input.payload as Artefact, deps.blobs)) ?? null;
    // Validated again: the action registry may have changed since the request was made (a redeploy).
    const invalid = deps.actions.validatePayload(input.actionType, payload);
    if (invalid.length > 0)
      throw ApplicationFailure.nonRetryable(
        `approval ${input.id}: the ${input.actionType} payload is no longer valid: ${invalid.join('; ')}`,
        'InvalidPayload',
      );
    const result = await runAction(deps.actions, input, payload);
    const summary = truncateText(
      `${input.actionType} done: ${typeof result === 'string' ? result : JSON.stringify(result)}`,
      200,
    );
    return { result: (await offloadArtefact(result as Artefact, deps.blobs, threshold, summary)) ?? null, summary };
  };
}

/**
 * Runs the action under its idempotency key, heartbeating meanwhile, so a worker that dies mid-action is noticed
 * within the heartbeat timeout and the action runs again elsewhere (where the key makes the repeat a no-op).
 */
async function runAction(actions: ActionCatalog, input: ApprovalExecuteInput, payload: Json): Promise<Json> {
  const context = Context.current();
  const beat = setInterval(() => context.heartbeat(), HEARTBEAT_EVERY_MS);
  try {
    return await actions.execute(input.actionType, payload, {
      idempotencyKey: input.idempotencyKey,
      signal: context.cancellationSignal,
    });
  } catch (error) {
    // An action that says retrying cannot help (an unknown task, a conflicting key) fails for good.
    const refusal = error as { nonRetryable?: unknown; type?: unknown; message?: unknown };
    if (refusal?.nonRetryable === true)
      throw ApplicationFailure.nonRetryable(
        `approval ${input.id}: ${String(refusal.message)}`,
        typeof refusal.type === 'string' ? refusal.type : 'ActionFailed',
      );
    throw error;
  } finally {
    clearInterval(beat);
  }
}

/**
 * A request id: short, stable (recorded in history once made) and unique across runs — the hash of the
 * item, the workflow run, the step, the attempt and the element's place — as `ap-` and ten base32 characters.
 */
export function approvalId(
  where: Pick<ApprovalCreateInput, 'itemId' | 'runId' | 'step' | 'attempt'>,
  index: number,
): string {
  const digest = createHash('sha256')
    .update([where.itemId, where.runId, where.step, String(where.attempt), String(index)].join('\0'))
    .digest();
  return `ap-${base32(digest).slice(0, 10)}`;
}

const BASE32 = 'abcdefghijkmnpqrstuvwxyz23456789'; // no l, o, 0, 1: ids are read aloud and typed

function base32(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out;
}

function actionOf(element: Json, config: ApprovalStageConfig): Action | { problem: string } {
  if (config.action !== undefined) return { type: config.action, payload: element, fixed: true };
  if (!isRecord(element))
    return { problem: 'must be an object {action_type, payload, context?} (or set `action:` on the stage)' };
  const type = element.action_type ?? element.actionType;
  if (typeof type !== 'string' || type === '')
    return { problem: 'action_type: missing (each element names its action type, or the stage sets `action:`)' };
  if (element.payload === undefined) return { problem: 'payload: missing' };
  return { type, payload: element.payload, fixed: false };
}

function contextOf(element: Json, config: ApprovalStageConfig): string | null {
  let own: Json | undefined;
  if (isRecord(element)) {
    if (config.contextField !== undefined) {
      own = valueAt(element, config.contextField);
    } else if (config.action === undefined) own = element.context;
  }
  const ownText = own === undefined || own === null ? undefined : typeof own === 'string' ? own : JSON.stringify(own);
  const parts = [config.context, ownText].filter((p): p is string => typeof p === 'string' && p !== '');
  return parts.length > 0 ? truncateText(parts.join(' — '), 1_000) : null;
}
