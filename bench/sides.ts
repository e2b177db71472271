/**
 * The two sides every scenario runs: Treadle work items and raw-Temporal baseline workflows, behind one
 * interface so each scenario's code (and its measurement) is the same for both.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { TreadleClient } from '../src/client';
import type { FanOutArtefact } from '../src/kinds/fan-out/shapes';
import type { WorkItemResult } from '../src/model/state';
import { reviewSignal } from '../src/workflow-kit/messages';
import {
  approveSignal,
  fanOut,
  fanOutChildren,
  isWaitingQuery,
  largePayload,
  linearPipeline,
  loopIterations,
  retryLoop,
  reviewThenContinue,
} from './baseline-workflows';
import {
  FAN_OUT_ITEMS_STAGE,
  fanOutItemsPipelineSpec,
  fanOutPipelineSpec,
  largeArtefactPipelineSpec,
  linearPipelineSpec,
  LOOP_STAGE_NAME,
  loopPipelineSpec,
  loopReplies,
  retryPipelineSpec,
  retryScript,
  reviewPipelineSpec,
} from './treadle-pipelines';

/** How often a side is polled while waiting for an item to reach its review. */
const REVIEW_POLL_MS = 20;
/** Give up waiting for a review after this long: something is broken. */
const REVIEW_WAIT_TIMEOUT_MS = 120_000;

export type SideName = 'treadle' | 'baseline';

/** What a scenario can ask of a side. Every start uses the given id as the workflow id. */
export interface Side {
  name: SideName;
  startLinear(id: string, stages: number): Promise<void>;
  startFanOut(id: string, width: number): Promise<void>;
  /** A fan-out over `count` elements, each a child workflow, `concurrency` at once. */
  startFanOutItems(id: string, count: number, concurrency: number): Promise<void>;
  /** The workflow id of element `index` of a {@link startFanOutItems} item. */
  elementId(id: string, index: number): string;
  /** The workflows whose runs start a {@link startFanOutItems} item's elements, or hold it (the parent side). */
  fanOutParents(id: string): string[];
  /**
   * Waits for a {@link startFanOutItems} item and throws unless all `count` elements completed and came back
   * in input order (a Treadle fan-out reports failed elements in a completed stage, so the item's status is
   * not enough).
   */
  fanOutItemsResult(id: string, count: number): Promise<void>;
  /** A loop of `iterations` iterations, each writing an output of `output` characters and a status file in `dir`. */
  startLoop(id: string, iterations: number, output: string, dir: string): Promise<void>;
  /** The workflow whose runs hold the loop's history (a Treadle loop stage is a child workflow). */
  loopWorkflowId(id: string): string;
  /** Waits for a {@link startLoop} item and throws unless all `iterations` ran. */
  loopResult(id: string, iterations: number): Promise<void>;
  startReview(id: string): Promise<void>;
  startRetry(id: string, rejections: number): Promise<void>;
  /** An item whose input is a document of `bytes` characters and whose first stage makes an artefact as large. */
  startLarge(id: string, bytes: number): Promise<void>;
  /** Resolves once the item waits for its review (polled through a query). */
  untilWaiting(id: string): Promise<void>;
  /** Approves the waiting review: the Treadle update by default, or the Treadle signal with `via: 'signal'`. */
  approve(id: string, via?: 'update' | 'signal'): Promise<void>;
  /** Waits for the item and throws unless it completed successfully. */
  result(id: string): Promise<void>;
  /** The workflow `id`: its latest run, or run `runId` (a continued-as-new workflow has several). */
  handle(id: string, runId?: string): WorkflowHandle;
}

/** Treadle work items, started and reviewed through `TreadleClient`. */
export function treadleSide(client: TreadleClient): Side {
  const start = async (id: string, spec: unknown, input: unknown = null): Promise<void> => {
    await client.start(spec, input, { id });
  };
  return {
    name: 'treadle',
    startLinear: (id, stages) => start(id, linearPipelineSpec(stages)),
    startFanOut: (id, width) => start(id, fanOutPipelineSpec(width)),
    startFanOutItems: (id, count, concurrency) => start(id, fanOutItemsPipelineSpec(count, concurrency)),
    elementId: (id, index) => `${id}.${FAN_OUT_ITEMS_STAGE}.1.${index}`,
    // The work item and its fan-out workflow, which continues as new.
    fanOutParents: (id) => [id, `${id}.${FAN_OUT_ITEMS_STAGE}.1`],
    fanOutItemsResult: async (id, count) => {
      const result = await client.result(id);
      if (result.status !== 'completed') throw new Error(`treadle item ${id} ${result.status}: ${result.error ?? ''}`);
      const fanOut = (await client.readArtefact(result.artefacts[FAN_OUT_ITEMS_STAGE])) as FanOutArtefact | undefined;
      const inOrder = fanOut?.results.every((r, i) => r.index === i && r.status === 'completed') ?? false;
      if (fanOut?.completed !== count || fanOut.results.length !== count || !inOrder) {
        throw new Error(
          `treadle item ${id}: ${fanOut?.completed ?? 0} of ${count} elements completed (${fanOut?.failed ?? '?'} failed)${inOrder ? '' : ', not in input order'}`,
        );
      }
    },
    startLoop: (id, iterations, output) => start(id, loopPipelineSpec(iterations), loopReplies(output)),
    loopWorkflowId: (id) => `${id}.${LOOP_STAGE_NAME}.1`,
    loopResult: async (id, iterations) => {
      const result = await client.result(id);
      if (result.status !== 'completed') throw new Error(`treadle item ${id} ${result.status}: ${result.error ?? ''}`);
      const loop = (await client.readArtefact(result.artefacts[LOOP_STAGE_NAME])) as
        { iterations?: number } | undefined;
      if (loop?.iterations !== iterations)
        throw new Error(`treadle loop ${id}: ${loop?.iterations ?? 0} of ${iterations} iterations ran`);
    },
    startReview: (id) => start(id, reviewPipelineSpec),
    startRetry: (id, rejections) => start(id, retryPipelineSpec(rejections + 1), retryScript(rejections)),
    startLarge: (id, bytes) => start(id, largeArtefactPipelineSpec(bytes), { document: payloadText(bytes) }),
    untilWaiting: (id) => poll(id, async () => (await client.getState(id)).status === 'waiting_review'),
    approve: async (id, via = 'update') => {
      if (via === 'update') await client.approve(id, 'review', { reviewer: 'bench' });
      else
        await client.client.workflow
          .getHandle(id)
          .signal(reviewSignal, { stage: 'review', outcome: { kind: 'approve' }, reviewer: 'bench' });
    },
    result: async (id) => {
      const result: WorkItemResult = await client.result(id);
      if (result.status !== 'completed') throw new Error(`treadle item ${id} ${result.status}: ${result.error ?? ''}`);
    },
    handle: (id, runId) => client.client.workflow.getHandle(id, runId),
  };
}

/**
 * Plain workflows from `baseline-workflows.ts` on their own task queue. Large payloads start through
 * `startClient` when given (a client that does not retry, so an oversized start fails at once).
 */
export function baselineSide(client: Client, taskQueue: string, startClient: Client = client): Side {
  return {
    name: 'baseline',
    startLinear: async (id, stages) => {
      await client.workflow.start(linearPipeline, { taskQueue, workflowId: id, args: [{ stages }] });
    },
    startFanOut: async (id, width) => {
      await client.workflow.start(fanOut, { taskQueue, workflowId: id, args: [{ width }] });
    },
    startFanOutItems: async (id, count, concurrency) => {
      await client.workflow.start(fanOutChildren, { taskQueue, workflowId: id, args: [{ count, concurrency }] });
    },
    elementId: (id, index) => `${id}.${index}`,
    fanOutParents: (id) => [id],
    fanOutItemsResult: async (id, count) => {
      const { results } = await client.workflow.getHandle<typeof fanOutChildren>(id).result();
      if (results.length !== count || !results.every((r, i) => r.i === i))
        throw new Error(
          `baseline fan-out ${id}: ${results.length} results for ${count} elements, or not in input order`,
        );
    },
    startLoop: async (id, iterations, output, dir) => {
      await client.workflow.start(loopIterations, {
        taskQueue,
        workflowId: id,
        args: [{ iterations, perRun: 100, dir, output }],
      });
    },
    loopWorkflowId: (id) => id,
    loopResult: async (id, iterations) => {
      const result = await client.workflow.getHandle<typeof loopIterations>(id).result();
      if (result.iterations !== iterations)
        throw new Error(`baseline loop ${id}: ${result.iterations} of ${iterations} iterations ran`);
    },
    startReview: async (id) => {
      await client.workflow.start(reviewThenContinue, { taskQueue, workflowId: id });
    },
    startRetry: async (id, rejections) => {
      await client.workflow.start(retryLoop, {
        taskQueue,
        workflowId: id,
        args: [{ maxAttempts: rejections + 1, rejectFirst: rejections }],
      });
    },
    startLarge: async (id, bytes) => {
      await startClient.workflow.start(largePayload, {
        taskQueue,
        workflowId: id,
        args: [{ bytes, document: payloadText(bytes) }],
      });
    },
    untilWaiting: (id) => poll(id, () => client.workflow.getHandle(id).query(isWaitingQuery)),
    approve: async (id) => {
      await client.workflow.getHandle(id).signal(approveSignal);
    },
    result: async (id) => {
      await client.workflow.getHandle(id).result();
    },
    handle: (id, runId) => client.workflow.getHandle(id, runId),
  };
}

/** The document of the large-payload scenario: `bytes` characters. */
function payloadText(bytes: number): string {
  return 'd'.repeat(bytes);
}

async function poll(id: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + REVIEW_WAIT_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, REVIEW_POLL_MS));
  }
  throw new Error(`${id} did not reach its review within ${REVIEW_WAIT_TIMEOUT_MS / 1000}s`);
}
