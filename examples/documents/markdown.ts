/**
 * Reads markdown back into sections and blocks, the unit every downstream stage works on: concepts record
 * the sections they appear in, chunks never span two sections, and the search index has one entry per
 * section. Only the markdown that `pdf_to_markdown` writes (and what people commonly write by hand) matters:
 * ATX headings, paragraphs, `-`/`*`/`1.` lists, pipe tables and fenced code.
 */
import { slugify } from './language';

/** A run of text inside a section. */
export interface MarkdownBlock {
  kind: 'paragraph' | 'list' | 'table' | 'code';
  /** The block's markdown source. */
  text: string;
  /**
   * The block as plain prose units: a paragraph's text, one entry per list item or table row (cells
   * joined by `; `), the code as is. Markup is removed.
   */
  units: string[];
}

/** A heading and what follows it up to the next heading. */
export interface MarkdownSection {
  /** Unique within the document: the heading's slug, `-2`, `-3`… on repeats; `preamble` before any heading. */
  id: string;
  /** Heading text without the `#` marks; empty for the preamble. */
  heading: string;
  /** 1 for `#`, 2 for `##`…; 0 for the preamble. */
  level: number;
  blocks: MarkdownBlock[];
}

const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const LIST_ITEM = /^\s*(?:[-*+]|\d+[.)])\s+(.*)$/;
const TABLE_ROW = /^\s*\|.*\|\s*$/;
const TABLE_RULE = /^\s*\|(?:\s*:?-{3,}:?\s*\|)+\s*$/;

/** Splits markdown into sections; sections with neither heading nor blocks are left out. */
export function parseMarkdown(markdown: string): MarkdownSection[] {
  const sections: MarkdownSection[] = [];
  const used = new Map<string, number>();
  let current: MarkdownSection = { id: 'preamble', heading: '', level: 0, blocks: [] };
  let pending: string[] = [];
  let fence: string[] | null = null;

  const flush = (): void => {
    if (pending.length > 0) current.blocks.push(readBlock(pending));
    pending = [];
  };
  for (const line of markdown.replace(/\r\n?/g, '\n').split('\n')) {
    if (fence) {
      if (/^\s*(```|~~~)/.test(line)) {
        current.blocks.push({ kind: 'code', text: fence.join('\n'), units: [fence.join('\n')] });
        fence = null;
      } else fence.push(line);
      continue;
    }
    if (/^\s*(```|~~~)/.test(line)) {
      flush();
      fence = [];
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      if (current.heading !== '' || current.blocks.length > 0) sections.push(current);
      const text = stripInline(heading[2]!);
      const base = slugify(text);
      const seen = (used.get(base) ?? 0) + 1;
      used.set(base, seen);
      current = { id: seen === 1 ? base : `${base}-${seen}`, heading: text, level: heading[1]!.length, blocks: [] };
      continue;
    }
    if (line.trim().length === 0) flush();
    else pending.push(line);
  }
  if (fence) current.blocks.push({ kind: 'code', text: fence.join('\n'), units: [fence.join('\n')] });
  flush();
  if (current.heading !== '' || current.blocks.length > 0) sections.push(current);
  return sections;
}

function readBlock(lines: string[]): MarkdownBlock {
  const text = lines.join('\n');
  if (lines.length >= 2 && TABLE_ROW.test(lines[0]!) && TABLE_RULE.test(lines[1]!)) {
    const rows = lines
      .filter((line) => !TABLE_RULE.test(line))
      .map((line) =>
        splitRow(line)
          .map(stripInline)
          .filter((cell) => cell.length > 0)
          .join('; '),
      );
    return { kind: 'table', text, units: rows.filter((row) => row.length > 0) };
  }
  if (LIST_ITEM.test(lines[0]!)) {
    const items: string[] = [];
    for (const line of lines) {
      const item = LIST_ITEM.exec(line);
      if (item) items.push(stripInline(item[1]!));
      else if (items.length > 0) items[items.length - 1] += ` ${stripInline(line.trim())}`;
    }
    return { kind: 'list', text, units: items };
  }
  return { kind: 'paragraph', text, units: [stripInline(lines.map((line) => line.trim()).join(' '))] };
}

function splitRow(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split(/(?<!\\)\|/)
    .map((cell) => cell.replace(/\\\|/g, '|').trim());
}

/** Removes inline markup: emphasis, code spans, links (keeping their text), images. */
export function stripInline(text: string): string {
  return text
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]+)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/(\*\*|__)(.+?)\1/g, '$2')
    .replace(/(^|[^\p{L}\p{N}])[*_](\S(?:.*?\S)?)[*_](?=[^\p{L}\p{N}]|$)/gu, '$1$2')
    .trim();
}
