/**
 * One attempt of a `human` stage (issue 40): the item asks a person for the stage's output and waits for it.
 * The request lives in the item's state (`humanRequests`, one per stage, replaced by each attempt); the answer
 * arrives through the item's `respondHuman` update (item.ts). The output becomes the attempt's artefact, which
 * the stage's gate then judges like any attempt: a rejection makes the runner ask again (attempt n+1), with the
 * gate's feedback on the request. Workflow code: deterministic.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import { decisionAnnouncer } from '../../notify/announce';
import { dueAt, recordOverdue, waitWithDeadline } from '../../workflow-kit/deadline';
import type { QualityFeedback } from '../../model/shapes';
import type { HumanRequest, StageActivityResult } from '../../model/state';
import type { StageKindRun } from '../../workflow-kit/common';
import { humanStageConfig } from './shapes';

/** The answer a request keeps until its attempt takes it (never published: the memo leaves it out). */
export const HUMAN_OUTPUTS = new WeakMap<HumanRequest, unknown>();

/** The gate's feedback as one line on the request (the whole is on the attempt record). */
function feedbackLine(feedback: QualityFeedback | null | undefined): string | undefined {
  if (!feedback) return undefined;
  const names = feedback.failedCriteria.map((c) => c.name);
  const failed = names.length > 0 ? ` (failed: ${names.join(', ')})` : '';
  const { guidance: given } = feedback;
  const guidance =
    given === undefined || given === null ? '' : ` ${typeof given === 'string' ? given : JSON.stringify(given)}`;
  return `${feedback.summary}${failed}${guidance}`.slice(0, 1_000);
}

/** Asks a person for the stage's output and waits for it; their rejection fails the stage. */
export async function runHumanStage(run: StageKindRun): Promise<StageActivityResult> {
  const config = humanStageConfig(run.stage.with);
  const reviewers = config.reviewers ?? run.stage.reviewers;
  const feedback = run.attempt > 1 ? feedbackLine(run.feedback) : undefined;
  const request: HumanRequest = {
    stage: run.stage.name,
    attempt: run.attempt,
    status: 'pending',
    requestedAt: new Date().toISOString(),
    ...(config.instructions !== undefined ? { instructions: config.instructions } : {}),
    ...(reviewers !== undefined ? { reviewers } : {}),
    ...(feedback !== undefined ? { feedback } : {}),
  };
  if (run.stage.reviewSla !== undefined) request.dueAt = dueAt(request.requestedAt, run.stage.reviewSla);
  const requests = (run.state.humanRequests ??= []);
  const earlier = requests.findIndex((r) => r.stage === request.stage);
  if (earlier >= 0) requests.splice(earlier, 1);
  requests.push(request);
  // The item waits on a person: its status says so (`run --wait` stops there, exit 3), as for a review.
  const st = run.state.stages[request.stage]!;
  st.status = 'waiting_review';
  run.emit(
    'HumanRequested',
    `${request.stage}: waiting for a person's output (attempt ${request.attempt})${reviewers ? ` from ${reviewers}` : ''}${feedback ? `; the gate said: ${feedback}` : ''}`,
    { stage: request.stage, attempt: request.attempt },
  );
  run.touch();
  const say = run.announces
    ? decisionAnnouncer(
        {
          kind: 'human',
          subject: request.stage,
          itemId: run.itemId,
          pipeline: run.pipeline,
          stage: request.stage,
          requestedAt: request.requestedAt,
        },
        () => request.reviewers,
      )
    : undefined;
  if (say) await say('decision_owed', `${request.stage}: waiting for a person's output`);
  await waitWithDeadline({
    decided: () => request.status !== 'pending',
    limitMs: null,
    limitSummary: '',
    sla: run.stage.reviewSla,
    slaSummary: `${request.stage} · review SLA`,
    onOverdue: () =>
      recordOverdue(
        run,
        request,
        run.stage.reviewSla!,
        `${request.stage}'s request for a person's output`,
        say && ((message) => say('overdue', message)),
      ),
  });
  st.status = 'running';
  run.touch();
  if (say)
    await say('decided', `${request.stage}: ${request.status} by ${request.respondedBy}`, {
      decidedBy: request.respondedBy ?? '',
      outcome: request.status === 'rejected' ? 'reject' : 'respond',
    });
  if (request.status === 'rejected')
    throw ApplicationFailure.nonRetryable(
      `${request.stage}: rejected by ${request.respondedBy}: ${request.reason}`,
      'HumanRejected',
    );
  const artefact = HUMAN_OUTPUTS.get(request);
  HUMAN_OUTPUTS.delete(request);
  return {
    outcome: 'completed',
    artefact: artefact as StageActivityResult['artefact'],
    summary: `supplied by ${request.respondedBy}`,
    previousLog: null,
  };
}
