/**
 * The detail page (`GET /d/:key`): everything a reviewer needs to decide one decision (stage table, attempts
 * with verdict and feedback, artefacts through the inert renderers, a diff picker, the approval payload, the
 * TDD question, the loop's failure and iterations, the Web UI link) and the answer forms the kind allows.
 */
import {
  isOverdue,
  waitingFor,
  type AttemptView,
  type DecisionDetail,
  type PendingDecision,
} from '../../model/decisions';
import { MAX_REVIEW_NOTE_CHARS } from '../../model/limits';
import { html, type SafeHtml } from '../html';
import { renderArtefact } from '../render/artefact';
import { canonicalJson, renderDiff } from '../render/diff';
import { renderJsonTree } from '../render/json-tree';
import { renderText } from '../render/text';
import { OUTCOME_CLASS, renderFeedback, renderVerdict, verdictOutcome } from '../render/verdict';
import { TEST_IDS } from '../test-ids';
import { page, remaining } from './layout';
import { humanForm } from './human-form';

/**
 * The whole detail page; with `readOnly` (why this reviewer may not answer: a decision for groups they are not
 * in), that sentence stands where the answer forms would.
 */
export function detailPage(detail: DecisionDetail, reviewer: string, now: number, readOnly?: string): SafeHtml {
  const d = detail.decision;
  return page(
    `${d.itemId} · ${d.stage}`,
    html`<article class="detail" data-key="${d.key}" data-kind="${d.kind}">
      <p><a href="/">← Inbox</a></p>
      <h1>${d.itemId} <span class="sub">${d.pipeline} · ${d.stage}</span></h1>
      <p class="why">
        <span class="kind kind-${d.kind}">${d.kind}</span> ${d.reason}: ${d.message}
        <span class="sub"
          >requested ${waitingFor(d.requestedAt, now)}
          ago${d.expiresAt ? html`, expires <time datetime="${d.expiresAt}" title="${d.expiresAt}" data-countdown>${remaining(d.expiresAt, now)}</time>` : ''}${d.dueAt ? html`, ${isOverdue(d, now) ? html`<strong class="badge overdue" data-testid="${TEST_IDS.overdueBadge}">overdue</strong> since` : 'due'} <time datetime="${d.dueAt}" title="${d.dueAt}">${d.dueAt.slice(0, 16).replace('T', ' ')}</time>` : ''}${d.reviewers ? html`, for ${d.reviewers}` : ''}${d.escalated ? html` (handed over${d.escalated.from ? html` from ${d.escalated.from}` : ''} when overdue)` : ''}</span
        >
      </p>
      ${detail.live ? '' : html`<p class="notice warn" role="status">No worker answered: this is what the listing and the history say; answering still works once a worker runs.</p>`}
      ${detail.webUiUrl ? html`<p><a href="${safeHref(detail.webUiUrl)}" rel="noopener noreferrer" target="_blank" data-testid="${TEST_IDS.webUiLink}">History in the Temporal Web UI</a></p>` : ''}
      ${readOnly ? html`<p class="notice" role="status" data-testid="${TEST_IDS.readOnly}">${readOnly}</p>` : html`${answerForms(d, detail)}${forkForm(d)}${cancelForm(d)}`}
      ${stageTable(detail)} ${approvalSection(detail)} ${tddSection(detail)} ${loopSection(detail)}
      ${attemptsSection(d, detail.attempts ?? [])}
    </article>`,
    reviewer,
  );
}

/** The diff fragment `GET /d/:key/diff?a&b` returns: attempt `a`'s output against attempt `b`'s. */
export function attemptDiff(detail: DecisionDetail, a: number, b: number): SafeHtml | undefined {
  const left = detail.attempts?.find((x) => x.attempt === a)?.output;
  const right = detail.attempts?.find((x) => x.attempt === b)?.output;
  if (!left || !right) return undefined;
  return html`<div data-testid="${TEST_IDS.diffView}">
    <p class="sub">Attempt ${a} → attempt ${b}</p>
    ${renderDiff(left.content, right.content)}
  </div>`;
}

function answerForms(d: PendingDecision, detail: DecisionDetail): SafeHtml {
  const can = new Set(d.answers);
  const attempts = detail.attempts ?? [];
  const last = attempts.at(-1)?.output?.content;
  const reasonBox = can.has('reject') || can.has('abandon');
  return html`<section class="answer" aria-label="Answer">
    ${can.has('approve') ? html`<button type="button" class="primary" data-action="approve" data-testid="${TEST_IDS.actionApprove}">${d.kind === 'tdd' ? 'Continue' : 'Approve'} (a)</button>` : ''}
    ${can.has('resume') ? html`<button type="button" class="primary" data-action="resume" data-testid="${TEST_IDS.actionResume}">Resume</button>` : ''}
    ${
      can.has('approve_attempt') && attempts.length > 1
        ? html`<span class="group"
            ><select id="approve-attempt">
              ${attempts.map((x) => html`<option value="${x.attempt}">attempt ${x.attempt}</option>`)}
            </select>
            <button type="button" data-action="approve_attempt" data-testid="${TEST_IDS.actionApproveAttempt}">
              Approve this attempt
            </button></span
          >`
        : ''
    }
    ${
      reasonBox
        ? html`<span class="group"
            ><input
              type="text"
              id="reject-reason"
              placeholder="Reason (required)"
              data-testid="${TEST_IDS.rejectReason}"
            />
            ${can.has('reject') ? html`<button type="button" class="danger" data-action="reject" data-testid="${TEST_IDS.actionReject}">${d.kind === 'tdd' ? 'Abort' : 'Reject'} (r)</button>` : ''}
            ${can.has('abandon') ? html`<button type="button" class="danger" data-action="abandon" data-testid="${TEST_IDS.actionAbandon}">Abandon</button>` : ''}</span
          >`
        : ''
    }
    ${can.has('guidance') ? noteForm('guidance') : ''}
    ${can.has('request_changes') ? noteForm('request_changes', d.kind) : ''}
    ${
      can.has('edit')
        ? html`<button type="button" data-action="edit-open" data-testid="${TEST_IDS.actionEdit}">
              ${d.kind === 'tdd' ? 'Answer' : 'Edit and approve'} (e)
            </button>
            <div class="editor" hidden data-format="${d.kind === 'tdd' ? 'text' : 'json'}">
              <textarea id="editor" rows="18" spellcheck="false" data-testid="${TEST_IDS.editor}">
${d.kind === 'tdd' ? '' : last === undefined ? '' : canonicalJson(last)}</textarea>
              <p class="notice error" hidden data-testid="${TEST_IDS.editorError}"></p>
              <button type="button" class="primary" data-action="edit" data-testid="${TEST_IDS.editorSubmit}">
                ${d.kind === 'tdd' ? 'Send answer' : 'Check and approve'}
              </button>
            </div>`
        : ''
    }
    ${can.has('respond') ? humanForm(d, detail) : ''}
  </section>`;
}

/** A note and its button: TDD guidance, or request changes (its note required, at most {@link MAX_REVIEW_NOTE_CHARS}). */
function noteForm(action: 'guidance' | 'request_changes', kind?: PendingDecision['kind']): SafeHtml {
  if (action === 'guidance')
    return html`<div class="group">
      <textarea
        id="guidance"
        rows="3"
        placeholder="Guidance the next step reads"
        data-testid="${TEST_IDS.guidance}"
      ></textarea>
      <button type="button" data-action="guidance" data-testid="${TEST_IDS.actionGuidance}">Send guidance</button>
    </div>`;
  return html`<div class="group">
    <textarea
      id="changes-note"
      rows="3"
      maxlength="${MAX_REVIEW_NOTE_CHARS}"
      placeholder="${kind === 'loop' ? 'What the rerun iteration should change (required)' : "What to change: the next attempt reads this beside the gate's feedback (required)"}"
      data-testid="${TEST_IDS.changesNote}"
    ></textarea>
    <button type="button" data-action="request_changes" data-testid="${TEST_IDS.actionRequestChanges}">
      Request changes
    </button>
  </div>`;
}

/**
 * Forks the work item the decision belongs to (`treadle fork <item> --from <stage> --overrides …`): a new item that
 * runs again from the stage with the settings written here, carrying the stages before it.
 */
function forkForm(d: PendingDecision): SafeHtml {
  return html`<details class="fork">
    <summary>Fork the work item…</summary>
    <label for="fork-from">Run again from stage</label>
    <input type="text" id="fork-from" value="${d.stage ?? ''}" data-testid="${TEST_IDS.forkFrom}" />
    <label for="fork-settings"
      >Changed settings (YAML or JSON, as <code>treadle fork --overrides</code> takes them)</label
    >
    <textarea
      id="fork-settings"
      rows="4"
      maxlength="20000"
      placeholder="stages:&#10;  ${d.stage ?? 'draft'}:&#10;    with: { model: claude-sonnet-4-5 }"
      data-testid="${TEST_IDS.forkSettings}"
    ></textarea>
    <button type="button" data-action="fork-item" data-item="${d.itemId}" data-testid="${TEST_IDS.actionForkItem}">
      Fork ${d.itemId}
    </button>
  </details>`;
}

/**
 * Cancels the whole work item the decision belongs to (`treadle cancel <item> --by <reviewer>`), after a
 * confirmation: its stages and children stop, its decisions leave the inbox, approvals not yet run never run.
 */
function cancelForm(d: PendingDecision): SafeHtml {
  return html`<details class="cancel">
    <summary>Cancel the work item…</summary>
    <span class="group"
      ><input
        type="text"
        id="cancel-reason"
        maxlength="1000"
        placeholder="Why (optional)"
        data-testid="${TEST_IDS.cancelReason}"
      />
      <button
        type="button"
        class="danger"
        data-action="cancel-item"
        data-item="${d.itemId}"
        data-testid="${TEST_IDS.actionCancelItem}"
      >
        Cancel ${d.itemId}
      </button></span
    >
  </details>`;
}

function stageTable(detail: DecisionDetail): SafeHtml | '' {
  if (!detail.stages?.length) return '';
  return html`<section>
    <h2>Stages</h2>
    <table class="stages" data-testid="${TEST_IDS.stageTable}">
      <thead>
        <tr>
          <th>Stage</th>
          <th>Status</th>
          <th>Attempts</th>
          <th>Summary</th>
        </tr>
      </thead>
      <tbody>
        ${detail.stages.map(
          (s) =>
            html`<tr${s.name === detail.decision.stage ? html` class="current"` : ''}><td>${s.name}</td><td>${s.status}</td><td>${s.attempts}</td><td>${s.summary ?? ''}</td></tr>`,
        )}
      </tbody>
    </table>
    ${capacityWaits(detail)}
  </section>`;
}

/** The item's calls waiting for model capacity (server data: every part escaped by `html`). */
function capacityWaits(detail: DecisionDetail): SafeHtml | '' {
  if (!detail.capacityWaits?.length) return '';
  return html`<ul class="capacity-waits" data-testid="${TEST_IDS.capacityWaits}">
    ${detail.capacityWaits.map((w) => html`<li><strong>${w.stage ?? w.activityType}</strong>: ${w.line}</li>`)}
  </ul>`;
}

function attemptsSection(d: PendingDecision, attempts: AttemptView[]): SafeHtml | '' {
  if (attempts.length === 0) return '';
  const options = (selected: number) =>
    attempts.map(
      (x) => html`<option value="${x.attempt}" ${x.attempt === selected ? html` selected` : ''}>${x.attempt}</option>`,
    );
  const picker =
    attempts.length > 1
      ? html`<form class="diff-picker" method="get" action="/d/${encodeURIComponent(d.key)}/diff">
            <label
              >Compare attempt
              <select name="a" data-testid="${TEST_IDS.diffA}">
                ${options(attempts.at(-2)!.attempt)}
              </select></label
            >
            <label
              >with
              <select name="b" data-testid="${TEST_IDS.diffB}">
                ${options(attempts.at(-1)!.attempt)}
              </select></label
            >
            <button type="submit" data-testid="${TEST_IDS.diffShow}">Show diff</button>
          </form>
          <div id="diff-view"></div>`
      : '';
  const newest = [...attempts].reverse();
  return html`<section>
    <h2>Attempts</h2>
    ${picker}${newest.map((x, i) => attemptView(x, i === 0))}
  </section>`;
}

function attemptView(x: AttemptView, open: boolean): SafeHtml {
  return html`<details
    class="attempt"
    data-testid="${TEST_IDS.attempt}"
    data-attempt="${x.attempt}"
    ${open ? html` open` : ''}
  >
    <summary>
      Attempt ${x.attempt}
      <span class="sub">${x.startedAt}${x.timedOut ? ' · timed out' : ''}${x.error ? ' · failed' : ''}</span>
      ${verdictLine(x.verdict)}
    </summary>
    ${x.error ? html`<p class="notice error">${x.error}</p>` : ''}
    ${
      x.verdict !== undefined
        ? html`<h3>Verdict</h3>
            ${renderVerdict(x.verdict)}`
        : ''
    }
    ${
      x.feedback !== undefined && !sameFeedback(x)
        ? html`<h3>Feedback</h3>
            ${renderFeedback(x.feedback)}`
        : ''
    }
    ${
      x.output
        ? html`<h3>Output</h3>
            ${renderArtefact(x.output)}`
        : ''
    }
  </details>`;
}

/**
 * Whether an attempt's feedback is its rejecting verdict's own (the engine records both): shown once, under
 * the verdict.
 */
function sameFeedback(x: AttemptView): boolean {
  const fromVerdict = (x.verdict as { feedback?: unknown } | undefined)?.feedback;
  return fromVerdict !== undefined && JSON.stringify(fromVerdict) === JSON.stringify(x.feedback);
}

/** `rejected · score 0.72` from a gate verdict, when it has those fields. */
function verdictLine(verdict: unknown): SafeHtml | '' {
  if (typeof verdict !== 'object' || verdict === null) return '';
  const outcome = verdictOutcome(verdict);
  const v = verdict as { score?: unknown };
  const score = typeof v.score === 'number' ? `score ${v.score}` : undefined;
  const text = [outcome, score].filter(Boolean).join(' · ');
  return text ? html`<span class="verdict ${outcome ? OUTCOME_CLASS[outcome] : ''}">${text}</span>` : '';
}

function approvalSection(detail: DecisionDetail): SafeHtml | '' {
  const a = detail.decision.approval;
  if (!a && !detail.approval) return '';
  return html`<section>
    <h2>Approval</h2>
    ${
      a
        ? html`<p><strong>${a.actionType}</strong>: ${a.summary}</p>
            ${a.context ? html`<p class="sub">${a.context}</p>` : ''}`
        : ''
    }
    ${
      detail.approval
        ? html`<h3>Payload</h3>
            ${renderArtefact(detail.approval.payload)}`
        : ''
    }
  </section>`;
}

function tddSection(detail: DecisionDetail): SafeHtml | '' {
  const t = detail.tdd;
  if (!t) return '';
  return html`<section>
    <h2>Question</h2>
    ${renderText(t.question)}
    ${
      t.diff
        ? html`<h3>Branch diff</h3>
            ${renderArtefact(t.diff)}`
        : ''
    }
    ${
      t.testOutput
        ? html`<h3>Last test output</h3>
            ${renderArtefact(t.testOutput)}`
        : ''
    }
  </section>`;
}

function loopSection(detail: DecisionDetail): SafeHtml | '' {
  const l = detail.loop;
  if (!l) return '';
  return html`<section>
    <h2>Loop failure</h2>
    ${renderJsonTree(l.failure)}
    ${
      l.progress
        ? html`<h3>progress.md</h3>
            ${renderArtefact(l.progress)}`
        : ''
    }
    ${
      l.iterations.length
        ? html`<h3>Last iterations</h3>
            ${renderJsonTree(l.iterations)}`
        : ''
    }
  </section>`;
}

/** Only http(s) links leave the page; anything else becomes an inert `#`. */
function safeHref(url: string): string {
  return /^https?:\/\//i.test(url) ? url : '#';
}
