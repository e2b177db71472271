/**
 * The review inbox's only way to build HTML: a tagged template that escapes every interpolation. Markup that
 * is already safe (another `html` result, a renderer's sanitised output) passes only when wrapped in
 * {@link trusted}, so a forgotten escape cannot happen by default.
 */

/** Markup that is safe to insert as is. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/** Marks markup as safe: only for output of {@link html} or of a sanitiser. */
export function trusted(markup: string): SafeHtml {
  return new SafeHtml(markup);
}

/**
 * Escapes text for element content and quoted attribute values; bidi controls are shown as their code points,
 * so an artefact cannot reorder the text a reviewer reads.
 */
export function escapeHtml(text: string): string {
  return text.replace(ESCAPED, (c) => ESCAPES[c] ?? `&lt;U+${hex(c)}&gt;`);
}

/** The bidi controls (embeddings, overrides, isolates, marks) that {@link escapeHtml} shows as code points. */
export const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069\u200E\u200F]/g;
const ESCAPED = new RegExp(`[&<>"'\`]|${BIDI_CONTROLS.source}`, 'g');

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

const hex = (c: string): string => c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');

type Interpolation = SafeHtml | string | number | boolean | null | undefined | readonly Interpolation[];

/** `html\`<p>${text}</p>\``: strings and numbers escaped, arrays joined, null/undefined/false empty. */
export function html(strings: TemplateStringsArray, ...values: Interpolation[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new SafeHtml(out);
}

function render(value: Interpolation): string {
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return (value as readonly Interpolation[]).map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}
