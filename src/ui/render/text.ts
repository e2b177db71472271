/**
 * Plain-text artefacts (test output, logs) in `<pre>`, escaped; a line over 10,000 characters is folded into a
 * `<details>` so one minified line cannot freeze the page's layout.
 */
import { html, type SafeHtml } from '../html';

/** Lines in a `<pre>` end with a newline. */
const NEWLINE = '\n';

const LONG_LINE = 10_000;

/** Renders text in a `<pre>`, long lines folded. */
export function renderText(text: string): SafeHtml {
  const lines = text
    .split('\n')
    .map((line, i) => (line.length > LONG_LINE ? folded(line, i + 1) : html`${line}${NEWLINE}`));
  return html`<pre class="artefact-text">${lines}</pre>`;
}

/** Whitespace inside `<pre>` is shown, so this markup is kept on one line (prettier would reflow it). */
function folded(line: string, n: number): SafeHtml {
  const summary = `line ${n}: ${line.length.toLocaleString('en')} characters (${line.slice(0, 200)}…)`;
  // prettier-ignore
  return html`<details class="long-line"><summary>${summary}</summary>${line}</details>${NEWLINE}`;
}
