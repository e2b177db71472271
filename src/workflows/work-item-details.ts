/**
 * How a work item looks from outside while it runs: the Markdown of the Web UI's "current details" and the
 * `state` query's answer.
 */
import { summarizeUsage } from '../engine/usage';
import type { StageState, StateQueryArgs, WorkItemState } from '../model/state';
import { eventPage } from '../workflow-kit/common';
import type { KindPublication } from '../workflow-kit/stage-kind';

/** Stage rows in the Web UI's current details; the rest are counted. */
const DETAIL_ROWS = 30;

/** A Markdown summary for the Web UI's "current details", with the blocks of `kinds` (their publications). */
export function renderDetails(state: WorkItemState, kinds: readonly KindPublication[]): string {
  const entries = Object.entries(state.stages);
  // Wide pipelines: the stages in motion first, then the rest, at most DETAIL_ROWS rows and a count.
  const order = (s: StageState): number =>
    s.status === 'waiting_review' ? 0 : s.status === 'running' ? 1 : s.status === 'failed' ? 2 : 3;
  const shown =
    entries.length > DETAIL_ROWS
      ? entries
          .slice()
          .sort((a, b) => order(a[1]) - order(b[1]))
          .slice(0, DETAIL_ROWS)
      : entries;
  const rows = shown.map(([name, s]) => {
    const last = s.attempts[s.attempts.length - 1];
    const verdict = last?.verdict ? last.verdict.kind : last?.timedOut ? 'timed out' : '';
    // Seed 003's words: a stage on its second or later attempt is retrying; a fan-out shows its progress.
    const status = s.status === 'running' && s.attempts.length > 1 ? 'retrying' : s.status;
    const progress = s.fanOut ? ` (${s.fanOut.completed + s.fanOut.failed}/${s.fanOut.total} elements)` : '';
    return `| ${name} | ${status}${progress} | ${s.attempts.length} | ${verdict} |`;
  });
  if (entries.length > shown.length) {
    const counts = new Map<string, number>();
    for (const [, s] of entries) counts.set(s.status, (counts.get(s.status) ?? 0) + 1);
    rows.push(
      `| … ${entries.length - shown.length} more | ${[...counts].map(([k, n]) => `${n} ${k}`).join(', ')} | | |`,
    );
  }
  const reviews = state.pendingReviews.slice(0, DETAIL_ROWS).map((r) => `- **${r.stage}**: ${r.message}`);
  // Seed 002's quality_flags of the stages whose input a contract validated.
  const flags = entries
    .filter(([, s]) => s.qualityFlags)
    .slice(0, DETAIL_ROWS)
    .map(
      ([name, s]) =>
        `- **${name}**: ${s.qualityFlags!.items_produced} items produced, ${s.qualityFlags!.validation_rejections} rejections, ${s.qualityFlags!.validation_retries} retries`,
    );
  return [
    `**${state.pipeline}** · ${state.status}`,
    '',
    '| stage | status | attempts | last verdict |',
    '|---|---|---|---|',
    ...rows,
    ...(reviews.length ? ['', 'Waiting for review:', ...reviews] : []),
    // The kinds' waiting decisions (approval requests), as their publish hooks give them.
    ...kinds.flatMap(({ details }) => (details !== undefined ? ['', details.heading, ...details.lines] : [])),
    ...(flags.length ? ['', 'Input validation (quality_flags):', ...flags] : []),
  ].join('\n');
}

/** What the `state` query answers: everything but the event stream, of which one page. */
export function pageOfState(state: WorkItemState, args: StateQueryArgs | undefined): WorkItemState {
  return { ...state, events: eventPage(state.events, args), usage: summarizeUsage(state.stages) };
}
