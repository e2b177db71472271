/**
 * The evaluation pages (issue 42): `/evals` lists the finished runs, `/evals/<run>` shows one: a bar chart of each
 * variant's pass rate and one of its cost, the variants' table and every case's row. The charts are SVG drawn on
 * the server, coloured by the stylesheet's classes: no script, no inline style, so the inbox's CSP holds.
 */
import type { EvalRunListing, EvalRunRecord, EvalVariantSummary } from '../../model/evals';
import { html, type SafeHtml } from '../html';
import { TEST_IDS } from '../test-ids';
import { page } from './layout';

const percent = (rate: number): string => `${(rate * 100).toFixed(1)}%`;
const usd = (cost: number | null): string => (cost === null ? 'unknown' : `$${cost.toFixed(4)}`);
const runHref = (run: string): string => `/evals/${encodeURIComponent(run)}`;

/** One bar: its label, its value (the bar's length), and the text shown beside it. */
interface Bar {
  label: string;
  value: number;
  text: string;
}

/** Chart geometry, in SVG user units. */
const CHART = { labelWidth: 140, barArea: 420, textWidth: 110, barHeight: 22, gap: 10, top: 8 } as const;
/** Colours cycle through this many `bar-<n>` classes of the stylesheet. */
const BAR_COLOURS = 6;

/**
 * A horizontal bar chart: one bar per variant, its length `value / max` of the bar area (`max` at least the largest
 * value, so no bar overflows). Each bar carries its variant and value for tests and tools (`data-variant`,
 * `data-value`) and a `<title>` for readers.
 */
export function barChart(title: string, testId: string, bars: readonly Bar[], max: number): SafeHtml {
  const top = Math.max(max, ...bars.map((b) => b.value), Number.MIN_VALUE);
  const width = CHART.labelWidth + CHART.barArea + CHART.textWidth;
  const height = CHART.top * 2 + bars.length * (CHART.barHeight + CHART.gap);
  const rows = bars.map((bar, i) => {
    const y = CHART.top + i * (CHART.barHeight + CHART.gap);
    const length = Math.max(0, (bar.value / top) * CHART.barArea);
    const middle = y + CHART.barHeight / 2;
    return html`<g>
      <text class="chart-label" x="${CHART.labelWidth - 8}" y="${middle}" text-anchor="end" dominant-baseline="middle">
        ${bar.label}
      </text>
      <rect
        class="chart-bar bar-${i % BAR_COLOURS}"
        data-testid="${TEST_IDS.evalBar}"
        data-variant="${bar.label}"
        data-value="${bar.value}"
        x="${CHART.labelWidth}"
        y="${y}"
        width="${length.toFixed(1)}"
        height="${CHART.barHeight}"
      >
        <title>${bar.label}: ${bar.text}</title>
      </rect>
      <text class="chart-value" x="${CHART.labelWidth + length + 6}" y="${middle}" dominant-baseline="middle">
        ${bar.text}
      </text>
    </g>`;
  });
  return html`<figure class="chart" data-testid="${testId}">
    <figcaption>${title}</figcaption>
    <svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${title}">
      ${rows}
    </svg>
  </figure>`;
}

/** `/evals`: every finished run, newest first, with each variant's pass rate. */
export function evalListPage(runs: readonly EvalRunListing[], reviewer: string): SafeHtml {
  const rows = runs.map(
    (r) =>
      html`<tr data-testid="${TEST_IDS.evalRunRow}" data-run="${r.run}">
        <td><a href="${runHref(r.run)}">${r.run}</a></td>
        <td>${r.pipeline}</td>
        <td>${r.scorer}</td>
        <td>${r.summaries.map((s) => html`<div>${s.variant}: ${percent(s.passRate)} of ${s.cases}</div>`)}</td>
        <td class="age" title="${r.finishedAt}">${r.finishedAt.replace('T', ' ').slice(0, 19)}</td>
      </tr>`,
  );
  const body = html`<section>
    <h1>Evaluations</h1>
    ${
      runs.length === 0
        ? html`<p class="empty">No evaluation has finished yet: <code>treadle eval run</code> makes one.</p>`
        : html`<table>
            <thead>
              <tr>
                <th>Run</th>
                <th>Pipeline</th>
                <th>Scorer</th>
                <th>Pass rate</th>
                <th>Finished (UTC)</th>
              </tr>
            </thead>
            <tbody>
              ${rows}
            </tbody>
          </table>`
    }
  </section>`;
  return page('Evaluations', body, reviewer);
}

function summaryRow(s: EvalVariantSummary): SafeHtml {
  return html`<tr>
    <td>${s.variant}</td>
    <td>${s.cases}</td>
    <td>${s.passed} (${percent(s.passRate)})</td>
    <td>${s.meanScore === null ? '–' : s.meanScore.toFixed(3)}</td>
    <td>${s.meanAttempts.toFixed(2)}</td>
    <td>${s.escalations}</td>
    <td>${s.tokens.input} / ${s.tokens.output}</td>
    <td>${usd(s.costUsd)}</td>
    <td>${Math.round(s.meanWallMs)} ms</td>
  </tr>`;
}

/** `/evals/<run>`: the charts of pass rate and cost per variant, the variants' table and every case. */
export function evalRunPage(record: EvalRunRecord, reviewer: string): SafeHtml {
  const passBars = record.summaries.map((s) => ({ label: s.variant, value: s.passRate, text: percent(s.passRate) }));
  const costBars = record.summaries.map((s) => ({ label: s.variant, value: s.costUsd ?? 0, text: usd(s.costUsd) }));
  const cases = record.results.map(
    (r) =>
      html`<tr data-testid="${TEST_IDS.evalCaseRow}" data-variant="${r.variant}" data-case="${r.caseId}">
        <td>${r.variant}</td>
        <td>${r.caseId}</td>
        <td>${r.outcome}</td>
        <td>${r.score === null ? html`<span class="sub">none: ${r.scoreError ?? ''}</span>` : r.score.toFixed(3)}</td>
        <td>${r.passed ? 'yes' : 'no'}</td>
        <td>${r.attempts}</td>
        <td>${r.verdicts.passed} / ${r.verdicts.rejected} / ${r.verdicts.uncertain}</td>
        <td>${r.escalations}</td>
        <td>${r.tokens.input} / ${r.tokens.output}</td>
        <td>${usd(r.costUsd)}</td>
        <td>${r.wallMs} ms</td>
        <td class="sub">${r.itemId}</td>
      </tr>`,
  );
  const body = html`<section>
    <p><a href="/evals">All evaluations</a></p>
    <h1>Evaluation ${record.run}</h1>
    <p class="sub">
      ${record.pipeline} · scorer ${record.scorer.name} (pass mark ${record.scorer.passMark}) · policy ${record.policy}
      · ${record.startedAt} – ${record.finishedAt}
    </p>
    <div class="charts">
      ${barChart('Pass rate per variant', TEST_IDS.evalPassChart, passBars, 1)}
      ${barChart('Cost per variant (USD, estimated)', TEST_IDS.evalCostChart, costBars, 0)}
    </div>
    <h2>Variants</h2>
    <table>
      <thead>
        <tr>
          <th>Variant</th>
          <th>Cases</th>
          <th>Passed</th>
          <th>Mean score</th>
          <th>Attempts</th>
          <th>Escalations</th>
          <th>Tokens in / out</th>
          <th>Cost</th>
          <th>Mean wall</th>
        </tr>
      </thead>
      <tbody>
        ${record.summaries.map(summaryRow)}
      </tbody>
    </table>
    <h2>Cases</h2>
    <table>
      <thead>
        <tr>
          <th>Variant</th>
          <th>Case</th>
          <th>Outcome</th>
          <th>Score</th>
          <th>Passed</th>
          <th>Attempts</th>
          <th>Verdicts + / − / ?</th>
          <th>Escalations</th>
          <th>Tokens in / out</th>
          <th>Cost</th>
          <th>Wall</th>
          <th>Item</th>
        </tr>
      </thead>
      <tbody>
        ${cases}
      </tbody>
    </table>
  </section>`;
  return page(`Evaluation ${record.run}`, body, reviewer);
}
