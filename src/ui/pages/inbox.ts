/**
 * The inbox list page (`GET /`): the first page of pending decisions, oldest first, rendered on the server so
 * the first screen needs no fetch; filters are query parameters (bookmarkable), counts sit in the filter bar.
 */
import { DECISION_KINDS, waitingFor, type DecisionFilter, type PendingDecision } from '../../model/decisions';
import type { DecisionPage } from '../decision-index';
import { html, type SafeHtml } from '../html';
import { TEST_IDS } from '../test-ids';
import { AGE_CHOICES, ageMs } from '../filter';
import { page, remaining } from './layout';

/** One row of the list; also what the event stream sends for a decision that appeared. */
export function decisionRow(d: PendingDecision, now: number): SafeHtml {
  const href = `/d/${encodeURIComponent(d.key)}`;
  const escalated = d.reason === 'escalated' || d.approval?.escalated;
  return html`<tr
    data-testid="${TEST_IDS.decisionRow}"
    data-key="${d.key}"
    data-kind="${d.kind}"
    data-pipeline="${d.pipeline}"
    data-answers="${d.answers.join(' ')}"
  >
    <td>
      <input type="checkbox" data-testid="${TEST_IDS.selectRow}" aria-label="Select ${d.itemId}" value="${d.key}" />
    </td>
    <td>
      <span class="kind kind-${d.kind}">${d.kind}</span>${escalated ? html` <span class="badge">escalated</span>` : ''}
      ${d.attempts ? html`<div class="sub attempts">${d.attempts} ${d.attempts === 1 ? 'attempt' : 'attempts'}</div>` : ''}
    </td>
    <td>
      <a href="${href}">${d.itemId}</a>
      <div class="sub">${d.pipeline} · ${d.stage}</div>
    </td>
    <td class="msg">${d.message}${d.partial ? html` <span class="sub">(details on opening)</span>` : ''}</td>
    <td>${d.reviewers ?? ''}</td>
    <td class="age" title="${d.requestedAt}">${waitingFor(d.requestedAt, now)}</td>
    <td class="expires">
      ${d.expiresAt ? html`<time datetime="${d.expiresAt}" title="${d.expiresAt}" data-countdown>${remaining(d.expiresAt, now)}</time>` : ''}
    </td>
  </tr>`;
}

/** The filter the page's query parameters ask for, and the cursor of the page. */
export interface InboxQuery {
  filter: DecisionFilter;
  /** The `age` parameter as given (`15m`, `1h`…), for the next page's link. */
  age?: string;
  after?: string;
}

/** The inbox page for one query's results; `unfiltered` is the total without filters, for the empty state. */
export function inboxPage(
  query: InboxQuery,
  result: DecisionPage,
  unfiltered: number,
  reviewer: string,
  now: number,
): SafeHtml {
  const { filter } = query;
  const kind = filter.kinds?.length === 1 ? filter.kinds[0] : undefined;
  const kindOptions = DECISION_KINDS.map(
    (k) =>
      html`<option value="${k}" ${k === kind ? html` selected` : ''}>${k} (${result.counts.byKind[k] ?? 0})</option>`,
  );
  const pipelines = Object.entries(result.counts.byPipeline).sort(([a], [b]) => a.localeCompare(b));
  const pipelineOptions = pipelines.map(
    ([p, n]) => html`<option value="${p}" ${p === filter.pipeline ? html` selected` : ''}>${p} (${n})</option>`,
  );
  const groups = Object.entries(result.counts.byReviewers).sort(([a], [b]) => a.localeCompare(b));
  const groupOptions = groups.map(
    ([g, n]) => html`<option value="${g}" ${g === filter.reviewers ? html` selected` : ''}>${g} (${n})</option>`,
  );
  const age = AGE_CHOICES.find((a) => ageMs(a) === filter.olderThanMs);
  const ageOptions = AGE_CHOICES.map(
    (a) =>
      html`<option value="${a}" ${a === age ? html` selected` : ''}>
        over ${a} (${result.counts.byAge[a] ?? 0})
      </option>`,
  );
  const filtered = Boolean(
    filter.kinds?.length || filter.pipeline || filter.reviewers || filter.olderThanMs !== undefined || filter.text,
  );
  const rows = result.decisions.map((d) => decisionRow(d, now));
  const empty = html`<div class="empty" data-testid="${TEST_IDS.emptyState}">
    <p><strong>Nothing waits for you.</strong></p>
    ${filtered && unfiltered > 0 ? html`<p>${unfiltered} pending under other filters: <a href="/">show all</a>.</p>` : ''}
    <p class="sub">New decisions appear here within a second or two.</p>
  </div>`;
  const next = result.nextCursor
    ? html`<p class="more"><a href="${nextHref(query, result.nextCursor)}" rel="next">Older decisions →</a></p>`
    : '';
  return page(
    'Inbox',
    html`<form class="filters" method="get" action="/" role="search">
        <label
          >Kind
          <select name="kind" data-testid="${TEST_IDS.filterKind}">
            <option value="">all</option>
            ${kindOptions}
          </select></label
        >
        <label
          >Pipeline
          <select name="pipeline" data-testid="${TEST_IDS.filterPipeline}">
            <option value="">all</option>
            ${pipelineOptions}
          </select></label
        >
        <label
          >Reviewers
          <select name="reviewers" data-testid="${TEST_IDS.filterReviewers}">
            <option value="">all</option>
            ${groupOptions}
          </select></label
        >
        <label
          >Waiting
          <select name="age" data-testid="${TEST_IDS.filterAge}">
            <option value="">any time</option>
            ${ageOptions}
          </select></label
        >
        <label
          >Search
          <input
            type="search"
            name="q"
            value="${filter.text ?? ''}"
            placeholder="item, stage or message (/)"
            data-testid="${TEST_IDS.filterText}"
        /></label>
        <button type="submit">Filter</button>
        <span class="count" data-testid="${TEST_IDS.decisionCount}" data-version="${result.version}"
          >${result.counts.total} pending</span
        >
      </form>
      <div class="batch" hidden>
        <span id="batch-count">0 selected</span>
        <button type="button" data-testid="${TEST_IDS.batchApprove}">Approve selected</button>
        <input type="text" placeholder="Reason to reject" data-testid="${TEST_IDS.batchReason}" />
        <button type="button" data-testid="${TEST_IDS.batchReject}">Reject selected</button>
      </div>
      <table class="decisions" ${rows.length === 0 ? html` hidden` : ''}>
        <thead>
          <tr>
            <th><input type="checkbox" data-testid="${TEST_IDS.selectAll}" aria-label="Select all" /></th>
            <th>Kind</th>
            <th>Item</th>
            <th>Why</th>
            <th>Reviewers</th>
            <th>Age</th>
            <th>Expires</th>
          </tr>
        </thead>
        <tbody>
          ${rows}
        </tbody>
      </table>
      ${rows.length === 0 ? empty : ''} ${next}`,
    reviewer,
  );
}

function nextHref(query: InboxQuery, cursor: string): string {
  const params = new URLSearchParams();
  const { filter } = query;
  if (filter.kinds?.length) params.set('kind', filter.kinds.join(','));
  if (filter.pipeline) params.set('pipeline', filter.pipeline);
  if (filter.reviewers) params.set('reviewers', filter.reviewers);
  if (query.age) params.set('age', query.age);
  if (filter.text) params.set('q', filter.text);
  params.set('after', cursor);
  return `/?${params.toString()}`;
}
