/**
 * Two artefacts side by side as a line diff (jsdiff `diffLines`): JSON compared as canonical JSON with sorted
 * keys, so key order is not a change; text as is. Bounded by time and edit length, so a pathological pair
 * shows a notice instead of blocking the server.
 */
import { diffLines } from 'diff';
import { html, type SafeHtml } from '../html';

/** Lines in a `<pre>` end with a newline. */
const NEWLINE = '\n';

const DIFF_TIMEOUT_MS = 500;
const DIFF_MAX_EDIT_LENGTH = 20_000;

/** JSON with object keys sorted at every level, two-space indented: one text per value. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value), null, 2) ?? 'undefined';
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(record)
      .sort()
      .map((k) => [k, sortKeys(record[k])]),
  );
}

/** Renders the diff of `a` and `b` (strings are compared as text, anything else as canonical JSON). */
export function renderDiff(a: unknown, b: unknown): SafeHtml {
  const left = typeof a === 'string' ? a : canonicalJson(a);
  const right = typeof b === 'string' ? b : canonicalJson(b);
  const parts = diffLines(left, right, { timeout: DIFF_TIMEOUT_MS, maxEditLength: DIFF_MAX_EDIT_LENGTH });
  if (!parts) {
    return html`<p class="notice" role="status">
      These two differ too much to diff here (over ${DIFF_MAX_EDIT_LENGTH.toLocaleString('en')} edits or
      ${DIFF_TIMEOUT_MS} ms); compare them raw.
    </p>`;
  }
  const rows = parts.map((part) => {
    const cls = part.added ? 'diff-add' : part.removed ? 'diff-del' : 'diff-same';
    const sign = part.added ? '+' : part.removed ? '-' : ' ';
    const lines = part.value.endsWith('\n') ? part.value.slice(0, -1).split('\n') : part.value.split('\n');
    return lines.map((line) => html`<span class="${cls}">${sign} ${line}${NEWLINE}</span>`);
  });
  return html`<pre class="diff">${rows}</pre>`;
}
