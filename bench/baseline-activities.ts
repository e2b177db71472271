import { appendFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Activities of the raw-Temporal baseline: the same no-op work the Treadle side's `noop` stage does, plus a
 * judge for the retry loop, a loop iteration's files, a payload producer for the large-artefact scenario and a list maker for the
 * fan-out over items.
 */

/** What every baseline activity returns: a tiny object, like the Treadle `noop` stage's artefact. */
export interface NoopResult {
  i: number;
}

/** Input of the baseline judge: the attempt it judges and how many attempts it rejects first. */
export interface JudgeInput {
  attempt: number;
  rejectFirst: number;
}

/** A verdict in the shape the samples would use: accepted, or rejected with feedback. */
export interface JudgeResult {
  accepted: boolean;
  feedback?: string;
}

/** Builds the baseline's activities (samples' dependency-injection style, though they need none). */
export function createBaselineActivities() {
  return {
    /**
     * One iteration of the baseline loop: the files a loop iteration leaves (the output, its snapshot, a
     * status file, a progress entry) written in `dir`, as a hand-written loop over an agent would.
     */
    async iterate(input: {
      dir: string;
      iteration: number;
      output: string;
    }): Promise<{ decision: string; bytes: number }> {
      const at = path.join(input.dir, 'iterations', String(input.iteration).padStart(3, '0'));
      await mkdir(at, { recursive: true });
      await writeFile(path.join(input.dir, 'output.md'), input.output);
      await writeFile(path.join(at, 'output.md'), input.output);
      await writeFile(
        path.join(at, 'status.json'),
        JSON.stringify({ decision: 'continue', reason: 'r', summary: 's', errors: [] }),
      );
      await appendFile(path.join(input.dir, 'progress.md'), `## Iteration ${input.iteration}\n- s\n`);
      return { decision: 'continue', bytes: input.output.length };
    },
    async noop(input: { step: number }): Promise<NoopResult> {
      return { i: input.step };
    },
    async judge(input: JudgeInput): Promise<JudgeResult> {
      return input.attempt <= input.rejectFirst
        ? { accepted: false, feedback: `attempt ${input.attempt} rejected` }
        : { accepted: true };
    },
    async producePayload(input: { bytes: number; document?: string }): Promise<{ text: string }> {
      return { text: 'x'.repeat(input.bytes) };
    },
    async consumePayload(input: { text: string }): Promise<NoopResult> {
      return { i: input.text.length };
    },
    /** The list a fan-out runs over, `0 … count-1`, like the Treadle side's `items` stage artefact. */
    async listElements(input: { count: number }): Promise<{ items: number[] }> {
      return { items: Array.from({ length: input.count }, (_, i) => i) };
    },
  };
}

/** The baseline activity interface, for `proxyActivities` in the baseline workflows. */
export type BaselineActivities = ReturnType<typeof createBaselineActivities>;
