/**
 * Markdown artefacts as HTML a reviewer can read without running anything: markdown-it with raw HTML off, then
 * sanitize-html with a strict allowlist as a second layer. Links are http, https or mailto only and never
 * pass the referrer; images are never loaded (an image is a tracking beacon): their alt text is shown instead.
 */
import MarkdownIt from 'markdown-it';
import sanitizeHtml from 'sanitize-html';
import { BIDI_CONTROLS, escapeHtml, trusted, type SafeHtml } from '../html';

const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false });

const TAGS = [
  'p',
  'br',
  'hr',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'blockquote',
  'pre',
  'code',
  'em',
  'strong',
  's',
  'del',
  'ul',
  'ol',
  'li',
  'a',
  'table',
  'thead',
  'tbody',
  'tr',
  'th',
  'td',
  'span',
];

const OPTIONS: sanitizeHtml.IOptions = {
  allowedTags: TAGS,
  // rel and target come from the transform below; the allowlist is applied to the transformed tag, so names them.
  allowedAttributes: {
    a: ['href', 'title', 'rel', 'target'],
    ol: ['start'],
    th: ['style'],
    td: ['style'],
    span: ['class'],
  },
  allowedStyles: { th: { 'text-align': [/^(left|right|center)$/] }, td: { 'text-align': [/^(left|right|center)$/] } },
  allowedSchemes: ['http', 'https', 'mailto'],
  allowedSchemesAppliedToAttributes: ['href'],
  allowProtocolRelative: false,
  disallowedTagsMode: 'escape',
  transformTags: {
    a: (tagName, attribs) => ({
      tagName,
      attribs: { ...attribs, rel: 'noopener noreferrer nofollow', target: '_blank' },
    }),
    img: (_tagName, attribs) => ({
      tagName: 'span',
      attribs: { class: 'img-alt' },
      text: `[image: ${attribs.alt ?? ''}]`,
    }),
  },
};

/** Renders Markdown to sanitised HTML. */
export function renderMarkdown(source: string): SafeHtml {
  return trusted(sanitizeHtml(markdown.render(source), OPTIONS).replace(BIDI_CONTROLS, (c) => escapeHtml(c)));
}
