/**
 * Where evaluation runs are kept: in the blob store every worker and client of a deployment shares
 * (`TREADLE_BLOB_DIR`, or S3), so `eval show`, `eval compare` and the inbox find a run from any machine, and no
 * per-case result ever enters a workflow history. A run's record (summaries and per-case results) is one blob,
 * named `treadle-eval/<run>`; the list of runs is one more, named {@link EVAL_RUNS_NAME}, changed by
 * compare-and-swap so two runs finishing at once both stay listed. Named blobs survive `treadle blobs gc`.
 */
import type { BlobStore } from '../storage/blob-store';
import type { EvalRunListing, EvalRunRecord } from '../model/evals';
import { TreadleError } from './errors';

/** The name of the list of evaluation runs. */
export const EVAL_RUNS_NAME = 'treadle-evals';
/** The name of one run's record. */
export const evalRunName = (run: string): string => `treadle-eval/${run}`;
/** Tries of the list's compare-and-swap before giving up (each after another writer won). */
const LIST_TRIES = 20;

async function readJson<T>(blobs: BlobStore, ref: string): Promise<T> {
  return JSON.parse((await blobs.get(ref)).toString('utf8')) as T;
}

/** Stores a run's record and lists it (replacing an earlier record of the same run: a resumed run's). */
export async function saveEvalRun(blobs: BlobStore, record: EvalRunRecord): Promise<string> {
  const stored = await blobs.put(
    Buffer.from(JSON.stringify(record)),
    'application/json',
    `evaluation ${record.run}: ${record.results.length} results`,
  );
  await blobs.setName(evalRunName(record.run), stored.ref);
  const listing: EvalRunListing = {
    run: record.run,
    pipeline: record.pipeline,
    scorer: record.scorer.name,
    finishedAt: record.finishedAt,
    summaries: record.summaries,
  };
  for (let tries = 0; tries < LIST_TRIES; tries++) {
    const current = await blobs.getName(EVAL_RUNS_NAME);
    const runs = current ? await readJson<EvalRunListing[]>(blobs, current) : [];
    const next = [...runs.filter((r) => r.run !== record.run), listing];
    const list = await blobs.put(Buffer.from(JSON.stringify(next)), 'application/json', 'evaluation runs');
    if (await blobs.compareAndSetName(EVAL_RUNS_NAME, current, list.ref)) return stored.ref;
  }
  throw new TreadleError(`could not list evaluation ${record.run}: the list kept changing`, 'failed');
}

/** A run's record; a TreadleError `not_found` naming the runs there are when it has none. */
export async function loadEvalRun(blobs: BlobStore, run: string): Promise<EvalRunRecord> {
  const ref = await blobs.getName(evalRunName(run));
  if (ref === undefined) {
    const known = (await listEvalRuns(blobs)).map((r) => r.run);
    throw new TreadleError(
      `unknown evaluation run "${run}" (${known.length > 0 ? `runs: ${known.join(', ')}` : 'no run has finished yet'})`,
      'not_found',
    );
  }
  return readJson<EvalRunRecord>(blobs, ref);
}

/** Every finished run, newest first. */
export async function listEvalRuns(blobs: BlobStore): Promise<EvalRunListing[]> {
  const ref = await blobs.getName(EVAL_RUNS_NAME);
  const runs = ref ? await readJson<EvalRunListing[]>(blobs, ref) : [];
  return runs.sort((a, b) => (a.finishedAt < b.finishedAt ? 1 : a.finishedAt > b.finishedAt ? -1 : 0));
}
