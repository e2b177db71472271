/**
 * The inbox list page (`GET /`): the first page of pending decisions, oldest first, rendered on the server so
 * the first screen needs no fetch; filters are query parameters (bookmarkable), counts sit in the filter bar.
 */
import {
  DECISION_KINDS,
  isOverdue,
  waitingFor,
  type DecisionFilter,
  type PendingDecision,
} from '../../model/decisions';
import type { DecisionPage } from '../decision-index';
import { html, type SafeHtml } from '../html';
import { TEST_IDS } from '../test-ids';
import { AGE_CHOICES, OVERDUE, ageMs } from '../filter';
import { page, remaining } from './layout';

/** One row of the list; also what the event stream sends for a decision that appeared. */
export function decisionRow(d: PendingDecision, now: number): SafeHtml {
  const href = `/d/${encodeURIComponent(d.key)}`;
  const escalated = d.reason === 'escalated' || d.approval?.escalated;
  const overdue = isOverdue(d, now);
  return html`<tr
    data-testid="${TEST_IDS.decisionRow}"
    data-key="${d.key}"
    data-kind="${d.kind}"
    data-pipeline="${d.pipeline}"
    data-answers="${d.answers.join(' ')}"
    data-reviewers="${d.reviewers ?? ''}"
    ${overdue ? html` data-overdue` : ''}
  >
    <td>
      <input type="checkbox" data-testid="${TEST_IDS.selectRow}" aria-label="Select ${d.itemId}" value="${d.key}" />
    </td>
    <td>
      <span class="kind kind-${d.kind}">${d.kind}</span
      >${escalated ? html` <span class="badge">escalated</span>` : ''}${overdue ? html` <span class="badge overdue" data-testid="${TEST_IDS.overdueBadge}" title="due ${d.dueAt ?? ''}">overdue</span>` : ''}
      ${d.attempts ? html`<div class="sub attempts">${d.attempts} ${d.attempts === 1 ? 'attempt' : 'attempts'}</div>` : ''}
    </td>
    <td>
      <a href="${href}">${d.itemId}</a>
      <div class="sub">${d.pipeline} · ${d.stage}</div>
    </td>
    <td class="msg">${d.message}${d.partial ? html` <span class="sub">(details on opening)</span>` : ''}</td>
    <td>
      ${d.reviewers ?? ''}${d.escalated ? html`<div class="sub">handed over${d.escalated.from ? html` from ${d.escalated.from}` : ''}</div>` : ''}
    </td>
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

/**
 * The inbox page for one query's results; `unfiltered` is the total without filters, for the empty state.
 * `groups` are the reviewer's: the page's script marks the rows addressed to other groups read-only (rows arriving
 * live included, which the server renders once for every reviewer).
 */
export function inboxPage(
  query: InboxQuery,
  result: DecisionPage,
  unfiltered: number,
  reviewer: { name: string; groups: readonly string[] },
  now: number,
): SafeHtml {
  const { filter } = query;
  const kind = filter.kinds?.length === 1 ? filter.kinds[0] : undefined;
  const age = filter.overdue ? OVERDUE : AGE_CHOICES.find((a) => ageMs(a) === filter.olderThanMs);
  const { counts } = result;
  const byName = (tally: Record<string, number>): Choice[] =>
    Object.entries(tally)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([value, n]) => ({ value, text: value, count: n }));
  const filtered = isFiltered(filter);
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
        ${filterSelect('Kind', 'kind', TEST_IDS.filterKind, 'all', kind, [
          ...DECISION_KINDS.map((k) => ({ value: k, text: k, count: counts.byKind[k] ?? 0 })),
        ])}
        ${filterSelect('Pipeline', 'pipeline', TEST_IDS.filterPipeline, 'all', filter.pipeline, byName(counts.byPipeline))}
        ${filterSelect('Reviewers', 'reviewers', TEST_IDS.filterReviewers, 'all', filter.reviewers, byName(counts.byReviewers))}
        ${filterSelect('Waiting', 'age', TEST_IDS.filterAge, 'any time', age, [
          ...AGE_CHOICES.map((a) => ({ value: a, text: `over ${a}`, count: counts.byAge[a] ?? 0 })),
          { value: OVERDUE, text: 'overdue', count: counts.byAge[OVERDUE] ?? 0 },
        ])}
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
      <table class="decisions" data-groups="${reviewer.groups.join(',')}" ${rows.length === 0 ? html` hidden` : ''}>
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
    reviewer.name,
  );
}

/** Whether any filter is set (the empty state then says how many wait under other filters). */
function isFiltered(filter: DecisionFilter): boolean {
  const { kinds, pipeline, reviewers, olderThanMs, overdue, text } = filter;
  return Boolean(kinds?.length || pipeline || reviewers || olderThanMs !== undefined || overdue || text);
}

/** One choice of a filter select: its value, its text and how many decisions it holds. */
interface Choice {
  value: string;
  text: string;
  count: number;
}

/** A filter select of the list's form: "any" first, then each choice with its count, `selected` marked. */
function filterSelect(
  label: string,
  name: string,
  testId: string,
  any: string,
  selected: string | undefined,
  choices: readonly Choice[],
): SafeHtml {
  const options = choices.map(
    (c) =>
      html`<option value="${c.value}" ${c.value === selected ? html` selected` : ''}>${c.text} (${c.count})</option>`,
  );
  return html`<label
    >${label}
    <select name="${name}" data-testid="${testId}">
      <option value="">${any}</option>
      ${options}
    </select></label
  >`;
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
