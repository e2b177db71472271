/**
 * A gate's verdict and an attempt's feedback as text a reviewer reads at a glance: the outcome, the gate's
 * summary, each failed criterion (name, what was expected and what was found, its score when it has one) and
 * the guidance; the JSON they were read from stays one click away. Values come from history as recorded
 * (`QualityVerdict`, `QualityFeedback`, or a gate's own shape), so every field is read defensively and
 * everything is escaped by {@link html}.
 */
import { html, type SafeHtml } from '../html';
import { TEST_IDS } from '../test-ids';
import { renderJsonTree } from './json-tree';
import { renderText } from './text';

/** How a verdict came out, from `kind` (accepted, rejected, uncertain) or a gate's own `passed`. */
export type VerdictOutcome = 'accepted' | 'rejected' | 'uncertain';

/** The outcome of a verdict, or undefined when it says none. */
export function verdictOutcome(verdict: unknown): VerdictOutcome | undefined {
  const v = record(verdict);
  if (v.kind === 'accepted' || v.kind === 'rejected' || v.kind === 'uncertain') return v.kind;
  if (typeof v.passed === 'boolean') return v.passed ? 'accepted' : 'rejected';
  return undefined;
}

/** A verdict as text: its outcome, score, reason or summary, failed criteria and guidance; then its JSON. */
export function renderVerdict(verdict: unknown): SafeHtml {
  const v = record(verdict);
  const outcome = verdictOutcome(verdict);
  const score = typeof v.score === 'number' ? html` <span class="sub">score ${v.score}</span>` : '';
  const feedback = v.feedback !== undefined ? v.feedback : verdict;
  // The uncertain gate's reason, else the rejecting gate's summary, on the outcome's line.
  const reason = text(v.reason) ?? summaryOf(feedback);
  return html`<div class="verdict-text" data-testid="${TEST_IDS.verdict}">
    <p>
      ${outcome ? html`<strong class="verdict ${OUTCOME_CLASS[outcome]}">${OUTCOME_LABEL[outcome]}</strong>` : ''}${score}${reason ? html`${outcome ? ': ' : ''}<span class="verdict-summary">${reason}</span>` : ''}
    </p>
    ${feedbackBody(feedback, { summary: false })} ${rawJson(verdict)}
  </div>`;
}

/** Feedback (a `QualityFeedback`, or plain text) as text, then its JSON when it has structure. */
export function renderFeedback(feedback: unknown): SafeHtml {
  if (typeof feedback === 'string') return renderText(feedback);
  return html`<div class="verdict-text" data-testid="${TEST_IDS.feedback}">
    ${feedbackBody(feedback)} ${rawJson(feedback)}
  </div>`;
}

const OUTCOME_LABEL: Record<VerdictOutcome, string> = {
  accepted: 'Accepted',
  rejected: 'Rejected',
  uncertain: 'Uncertain',
};
/** The classes the stylesheet colours (the attempt's summary line uses the same). */
export const OUTCOME_CLASS: Record<VerdictOutcome, string> = {
  accepted: 'passed',
  rejected: 'failed',
  uncertain: 'uncertain',
};

/** A feedback's summary, when it has one. */
function summaryOf(feedback: unknown): string | undefined {
  const summary = record(feedback).summary;
  return typeof summary === 'string' && summary.trim() ? summary : undefined;
}

/** Summary (unless shown already), failed criteria, guidance and the note of a shortened feedback. */
function feedbackBody(feedback: unknown, options: { summary: boolean } = { summary: true }): SafeHtml {
  const f = record(feedback);
  const summary = options.summary ? summaryOf(feedback) : undefined;
  const criteria = failedCriteria(f);
  const ref = typeof f.ref === 'string' ? f.ref : undefined;
  return html`${summary ? html`<p class="verdict-summary">${summary}</p>` : ''}
  ${
    criteria.length > 0
      ? html`<ul class="criteria" aria-label="Failed criteria">
          ${criteria.map(criterionItem)}
        </ul>`
      : ''
  }
  ${f.guidance !== undefined && f.guidance !== null ? guidance(f.guidance) : ''}
  ${ref ? html`<p class="sub">Shortened for the history; the whole feedback is stored as ${ref}.</p>` : ''}`;
}

/** The criteria that failed: `failedCriteria` (or a gate's own `criteria`), without those marked passed. */
function failedCriteria(f: Record<string, unknown>): Record<string, unknown>[] {
  const list = Array.isArray(f.failedCriteria) ? f.failedCriteria : Array.isArray(f.criteria) ? f.criteria : [];
  return list.map(record).filter((c) => c.passed !== true);
}

/** `name: expected …, got … (score 0.4)`, with whatever of it the criterion has. */
function criterionItem(c: Record<string, unknown>): SafeHtml {
  const name = text(c.name) ?? 'criterion';
  const why = [
    text(c.expected) !== undefined ? html`expected “${text(c.expected)}”` : '',
    text(c.actual) !== undefined ? html`got “${text(c.actual)}”` : '',
    text(c.reason) !== undefined ? html`${text(c.reason)}` : '',
  ].filter((part) => part !== '');
  const joined = why.map((part, i) => html`${i > 0 ? ', ' : ''}${part}`);
  const score = typeof c.score === 'number' ? html` <span class="sub">(score ${c.score})</span>` : '';
  return html`<li data-testid="${TEST_IDS.criterion}">
    <strong>${name}</strong>${why.length > 0 ? html`: ${joined}` : ''}${score}
  </li>`;
}

/** Guidance for the next attempt: text as text, `{ key: text }` as lines, anything else as a JSON tree. */
function guidance(value: unknown): SafeHtml {
  if (typeof value === 'string') return html`<p class="guidance"><span class="sub">Guidance:</span> ${value}</p>`;
  const entries = Object.entries(record(value));
  if (!Array.isArray(value) && entries.length > 0 && entries.every(([, v]) => typeof v === 'string')) {
    return html`<p class="guidance"><span class="sub">Guidance:</span></p>
      <ul class="criteria">
        ${entries.map(([k, v]) => html`<li><strong>${k}</strong>: ${v as string}</li>`)}
      </ul>`;
  }
  return html`<p class="guidance"><span class="sub">Guidance:</span></p>
    ${renderJsonTree(value)}`;
}

/** The value as recorded, folded: one click away. */
function rawJson(value: unknown): SafeHtml {
  return html`<details class="raw-json">
    <summary class="sub">JSON</summary>
    ${renderJsonTree(value)}
  </details>`;
}

const record = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};

/** A criterion's field as text: strings as they are, numbers and booleans written out. */
function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}
