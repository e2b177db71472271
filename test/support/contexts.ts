/** Hand-made implementation contexts for calling stage and gate implementations directly in unit tests. */
import { ApplicationFailure } from '@temporalio/common';
import { MemoryBlobStore } from '../../src/storage/blob-store';
import type { StageContext } from '../../src/activities/registry';

/**
 * A stage context for `item-1` with no input, upstream or feedback, an in-memory blob store and no agent
 * (calling `agent()` throws); `overrides` replace any field.
 */
export function stageContext(overrides: Partial<StageContext> = {}): StageContext {
  const stage = overrides.stage ?? 'stage';
  const attempt = overrides.attempt ?? 1;
  return {
    itemId: 'item-1',
    pipeline: 'test',
    stage,
    attempt,
    maxAttempts: 3,
    input: null,
    config: undefined,
    upstream: {},
    previousAttempts: [],
    signal: new AbortController().signal,
    idempotencyKey: `item-1/${stage}/${attempt}`,
    stepKey: `step-key-of-item-1-${stage}`,
    blobs: new MemoryBlobStore(),
    log: { info: () => undefined, warn: () => undefined },
    heartbeat: () => undefined,
    previousProgress: undefined,
    agent: () => {
      throw new Error('this test context has no agent');
    },
    feedback: null,
    ...overrides,
  };
}

/** Runs a function expected to throw an ApplicationFailure and returns it (anything else is rethrown). */
export async function failureOf(run: () => unknown): Promise<ApplicationFailure> {
  try {
    await run();
  } catch (error) {
    if (error instanceof ApplicationFailure) return error;
    throw error;
  }
  throw new Error('expected an ApplicationFailure');
}
