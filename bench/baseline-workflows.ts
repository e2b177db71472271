/**
 * The raw-Temporal baseline: plain workflows written the way temporalio/samples-typescript writes them
 * (proxyActivities, a for-loop, Promise.all, a signal plus `condition`). Each benchmark scenario runs one
 * of these next to the equivalent Treadle work item, on the same server, with the same no-op activities.
 *
 * Cases covered: a linear pipeline, a fan-out, a wait for a human's signal, a judge-driven retry loop, a
 * large payload passed inline between two activities, a fan-out of child workflows over a list, and a
 * loop of iterations that continues as new every `perRun` of them.
 */
import {
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  executeChild,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type * as activities from './baseline-activities';

type Activities = activities.BaselineActivities;

const { noop, judge, consumePayload, listElements, iterate } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
});

// One attempt only: a payload over the server's limit fails the same way every time, and the default
// (unlimited) retry policy would retry it forever.
const { producePayload } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 1 },
});

/** Approval is fire-and-forget, as in the samples' human-in-the-loop workflows: a signal. */
export const approveSignal = defineSignal('approve');

/** Whether the workflow is waiting for approval; a query because reading must not change the workflow. */
export const isWaitingQuery = defineQuery<boolean>('isWaiting');

/** Runs `stages` no-op activities one after another. */
export async function linearPipeline(input: { stages: number }): Promise<{ steps: number }> {
  for (let step = 1; step <= input.stages; step++) {
    await noop({ step });
  }
  return { steps: input.stages };
}

/** One activity, then `width` activities in parallel, then one more. */
export async function fanOut(input: { width: number }): Promise<{ steps: number }> {
  await noop({ step: 0 });
  await Promise.all(Array.from({ length: input.width }, (_, i) => noop({ step: i + 1 })));
  await noop({ step: input.width + 1 });
  return { steps: input.width + 2 };
}

/** One activity, then waits for the approve signal, then one more activity. */
export async function reviewThenContinue(): Promise<{ approved: boolean }> {
  let approved = false;
  let waiting = false;
  setHandler(approveSignal, () => {
    approved = true;
  });
  setHandler(isWaitingQuery, () => waiting);
  await noop({ step: 1 });
  waiting = true;
  await condition(() => approved);
  waiting = false;
  await noop({ step: 2 });
  return { approved };
}

/** Does the work, asks the judge, and tries again until the judge accepts or attempts run out. */
export async function retryLoop(input: {
  maxAttempts: number;
  rejectFirst: number;
}): Promise<{ attempts: number; accepted: boolean }> {
  for (let attempt = 1; attempt <= input.maxAttempts; attempt++) {
    await noop({ step: attempt });
    const verdict = await judge({ attempt, rejectFirst: input.rejectFirst });
    if (verdict.accepted) return { attempts: attempt, accepted: true };
  }
  return { attempts: input.maxAttempts, accepted: false };
}

/**
 * The workflow's input is a document; one activity receives it and returns a payload of `bytes` characters;
 * the next receives that as its input.
 */
export async function largePayload(input: { bytes: number; document?: string }): Promise<{ consumed: number }> {
  const payload = await producePayload({
    bytes: input.bytes,
    ...(input.document !== undefined ? { document: input.document } : {}),
  });
  const result = await consumePayload(payload);
  return { consumed: result.i };
}

/** One element of {@link fanOutChildren}: a child workflow running one no-op activity. */
export async function fanOutElement(input: { step: number }): Promise<{ i: number }> {
  return noop({ step: input.step });
}

/**
 * The samples' child-workflow fan-out: one activity makes the list, then one child workflow per element,
 * at most `concurrency` at once, results kept in input order.
 */
export async function fanOutChildren(input: {
  count: number;
  concurrency: number;
}): Promise<{ results: { i: number }[] }> {
  const { items } = await listElements({ count: input.count });
  const results = new Array<{ i: number }>(items.length);
  const parent = workflowInfo().workflowId;
  let next = 0;
  // `concurrency` lanes, each starting the next element's child when its last one is done.
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await executeChild(fanOutElement, { workflowId: `${parent}.${i}`, args: [{ step: items[i]! }] });
    }
  };
  await Promise.all(Array.from({ length: Math.min(input.concurrency, items.length) }, lane));
  return { results };
}

/**
 * A hand-written agent loop: one activity per iteration writing the iteration's files, continuing as new
 * every `perRun` iterations with the count carried, until `iterations` are done.
 */
export async function loopIterations(input: {
  iterations: number;
  perRun: number;
  dir: string;
  output: string;
  done?: number;
}): Promise<{ iterations: number }> {
  let done = input.done ?? 0;
  for (let run = 0; done < input.iterations; run++) {
    if (run === input.perRun) return continueAsNew<typeof loopIterations>({ ...input, done });
    await iterate({ dir: input.dir, iteration: done + 1, output: input.output });
    done++;
  }
  return { iterations: done };
}
