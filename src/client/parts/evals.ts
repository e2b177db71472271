/**
 * `client.evals`: evaluations (issue 42) — run every case of a dataset on every variant of a pipeline, show a
 * run, compare two. Records live in the shared blob store (../eval-store.ts), so any machine with the same
 * Temporal server and blob store reads them.
 */
import { compareRuns, type EvalComparison, type EvalRunListing, type EvalRunRecord } from '../../model/evals';
import { listEvalRuns, loadEvalRun } from '../eval-store';
import { load } from '../lazy-modules';
import type { EvalRunOptions } from '../eval-runner';
import type { EvalScorer, ScorerChoice } from '../eval-scorers';
import { TreadleError } from '../errors';
import { ClientPart } from './context';

/** The regression threshold of {@link EvalsClient.compare} when none is given: a 5-point drop in pass rate. */
export const DEFAULT_REGRESSION_THRESHOLD = 0.05;

/** The evaluations part of `TreadleClient` (`client.evals`). */
export class EvalsClient extends ClientPart {
  /**
   * Runs every case on every variant as ordinary work items (`eval-<run>-<variant>-<case>`, at most `concurrency`
   * in flight), answers their human decisions by `policy` as `eval-policy`, scores each output, stores the run's
   * record and returns it. Every problem of every variant is an `invalid_pipeline` TreadleError before anything
   * starts. The same `run` again resumes: items already finished are read, not run again.
   */
  run(options: EvalRunOptions): Promise<EvalRunRecord> {
    const { client, blobs, known } = this.context;
    return load
      .evalRunner()
      .runEvaluation({ parts: this.parts, client, blobs, ...(known ? { known } : {}) }, options)
      .catch(this.context.rethrow);
  }

  /**
   * The scorer a choice names: `exact`, `json-schema` (with `schemaFile`), `llm-judge` (with `judge` settings; the
   * key and address as the anthropic agent reads them) or a module's path exporting `score(case)`. Loaded on use.
   */
  scorer(choice: ScorerChoice): Promise<EvalScorer> {
    return load.evalScorers().scorerFor(choice);
  }

  /** A finished run's record: summaries per variant and every case's result; `not_found` for an unknown run. */
  show(run: string): Promise<EvalRunRecord> {
    return loadEvalRun(this.context.blobs, run);
  }

  /** Every finished run, newest first, with its summaries. */
  list(): Promise<EvalRunListing[]> {
    return listEvalRuns(this.context.blobs);
  }

  /**
   * Run B against run A, per variant both have: the deltas of pass rate, mean score, attempts, escalations, tokens,
   * cost and wall time; `regressions` names the variants whose pass rate dropped by more than `threshold` (0..1).
   */
  async compare(runA: string, runB: string, threshold = DEFAULT_REGRESSION_THRESHOLD): Promise<EvalComparison> {
    if (!(threshold >= 0 && threshold <= 1))
      throw new TreadleError(`the threshold is a pass-rate drop from 0 to 1, got ${threshold}`, 'invalid_input');
    const [a, b] = await Promise.all([this.show(runA), this.show(runB)]);
    return compareRuns(a, b, threshold);
  }
}
