/**
 * JSON artefacts as a collapsible tree of `<details>` with escaped text: nothing in a value becomes markup, and
 * a long string is folded behind its first characters.
 */
import { html, type SafeHtml } from '../html';

const LONG_STRING = 500;
/** Nesting deeper than this is shown as JSON text (the tree would be unreadable anyway). */
const MAX_DEPTH = 40;

/** Renders any JSON value as a tree; top-level containers start open. */
export function renderJsonTree(value: unknown): SafeHtml {
  return html`<div class="json-tree">${node(value, 0)}</div>`;
}

function node(value: unknown, depth: number): SafeHtml {
  if (value === null || typeof value !== 'object') return leaf(value);
  if (depth >= MAX_DEPTH) return html`<code class="json-deep">${JSON.stringify(value)}</code>`;
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [String(i), v])
    : Object.entries(value as Record<string, unknown>);
  const label = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
  const items = entries.map(([k, v]) => html`<li><span class="json-key">${k}</span>: ${node(v, depth + 1)}</li>`);
  const open = depth < 2 ? html` open` : '';
  return html`<details${open}><summary class="json-count">${label}</summary><ul>${items}</ul></details>`;
}

function leaf(value: unknown): SafeHtml {
  if (typeof value === 'string') {
    const quoted = JSON.stringify(value);
    if (quoted.length <= LONG_STRING) return html`<span class="json-string">${quoted}</span>`;
    return html`<details class="json-long">
      <summary class="json-string">${quoted.slice(0, 120)}… (${value.length.toLocaleString('en')} characters)</summary>
      <span class="json-string">${quoted}</span>
    </details>`;
  }
  if (value === undefined) return html`<span class="json-null">undefined</span>`;
  return html`<span class="json-${value === null ? 'null' : typeof value}">${String(value)}</span>`;
}
