/**
 * One artefact as the page shows it, chosen by its media type: Markdown, a JSON tree, a diff or plain text,
 * with a line saying when it was cut.
 */
import type { ArtefactView } from '../../model/decisions';
import { html, type SafeHtml } from '../html';
import { renderJsonTree } from './json-tree';
import { renderMarkdown } from './markdown';
import { renderText } from './text';

/** Renders an artefact; anything not JSON, Markdown or text is shown as escaped text. */
export function renderArtefact(view: ArtefactView): SafeHtml {
  // A JSON artefact cut short is no longer JSON: its first part is shown as text.
  const body =
    view.mediaType === 'application/json' && !view.truncated
      ? renderJsonTree(view.content)
      : view.mediaType === 'text/markdown'
        ? renderMarkdown(String(view.content))
        : renderText(typeof view.content === 'string' ? view.content : JSON.stringify(view.content, null, 2));
  const cut = view.truncated
    ? html`<p class="notice">Shown in part: the whole artefact is ${view.bytes.toLocaleString('en')} bytes.</p>`
    : '';
  return html`<div class="artefact" data-testid="artefact">${cut}${body}</div>`;
}
