/**
 * PDF text → markdown (seed 000, use case B, stage 1). The input is the text layer a PDF extractor produces:
 * form feeds between pages, running headers and "Page N of M" footers, words hyphenated across lines, and
 * tables laid out as whitespace-aligned columns. Two strategies exist because extraction quality varies:
 *
 * - `plain` reads line by line and collapses whitespace, like a naive text extractor. It finds headings,
 *   lists and paragraphs but flattens tables into prose.
 * - `layout` also reads the page geometry: it recovers tables from column gutters and strips footers glued
 *   to the end of a text line. It is the strategy a quality gate asks for when tables were lost.
 *
 * Markdown input (`format: 'markdown'`) is only cleaned of page furniture (strategy `passthrough`).
 */
import { countWords } from './language';

/** How a source text is converted. */
export type ConversionStrategy = 'plain' | 'layout' | 'passthrough';

/** The converted document and what it contains. */
export interface Conversion {
  markdown: string;
  strategy: ConversionStrategy;
  stats: { words: number; headings: number; tables: number };
}

// "Page 3 of 10", "page 3/10", "Page 3", "- 3 -", "3 / 10".
const PAGE_MARKER = /^(?:page\s+\d+(?:\s*(?:of|\/)\s*\d+)?|-\s*\d+\s*-|\d+\s*\/\s*\d+)$/i;
// A footer the extractor appended to the last text line of a page, after a wide gap.
const TRAILING_PAGE_MARKER = /\s{2,}page\s+\d+(?:\s*(?:of|\/)\s*\d+)?\s*$/i;
const BARE_PAGE_NUMBER = /^\d{1,4}$/;
// Two or more spaces between non-space characters: the gap between table columns.
const COLUMN_GAP = /(?<=\S) {2,}(?=\S)/g;
const BULLET = /^[•●▪■◦‣·*–-]\s+(.*)$/;
const ORDERED_ITEM = /^(\d{1,3})[.)]\s+(.*)$/;
const NUMBERED_HEADING = /^(\d{1,2}(?:\.\d{1,2})*)\.?\s+(\p{Lu}.*)$/u;
// "To: All staff", "Date: 14 October": the field lines of memos and forms.
const FIELD = /^(\p{Lu}[\p{L} ]{0,24}):\s+(\S.*)$/u;
const RULE_LINE = /^[\s=_\-–—]+$/;

/** Lines whose whole text is a page number marker ("Page 3 of 10", "- 3 -", "3 / 10"). */
export function isPageMarker(line: string): boolean {
  return PAGE_MARKER.test(line.trim());
}

/** Page markers still present in a text, whole-line or trailing; what a quality gate looks for. */
export function findPageMarkers(text: string): string[] {
  const found: string[] = [];
  for (const line of text.split('\n')) {
    const bare = line.replace(/^[#>*\s-]+/, '').trim();
    if (bare.length > 0 && isPageMarker(bare)) found.push(bare);
    // Inside a line: a footer glued to text, possibly collapsed into a paragraph.
    else for (const match of line.matchAll(/\bpage\s+\d+\s*(?:of|\/)\s*\d+\b/gi)) found.push(match[0]);
  }
  return found;
}

/**
 * Removes page furniture and joins what page and line breaks split: form feeds, page number lines, running
 * headers and footers (a line repeated at the top or bottom of at least two pages), and words hyphenated
 * at a line end ("conver-" + "sion"). Returns the text as lines; blank lines separate blocks.
 */
export function removePageLayout(source: string, strategy: ConversionStrategy): string[] {
  const pages = splitPages(source.replace(/\r\n?/g, '\n').replace(/\t/g, '    '));
  const running = runningLines(pages);
  const lines: string[] = [];
  pages.forEach((page, index) => {
    const edges = edgeLines(page);
    const kept = page.filter((line, i) => {
      const text = line.trim();
      if (text.length === 0) return true;
      if (isPageMarker(text)) return false;
      return !(edges.has(i) && (running.has(normalisedEdge(text)) || BARE_PAGE_NUMBER.test(text)));
    });
    const cleaned = strategy === 'layout' ? kept.map((line) => line.replace(TRAILING_PAGE_MARKER, '')) : kept;
    if (index > 0) lines.push(PAGE_BREAK);
    lines.push(...cleaned.map((line) => line.replace(/\s+$/, '')));
  });
  return joinBrokenLines(lines);
}

const PAGE_BREAK = '\u0000page-break';

function splitPages(text: string): string[][] {
  if (text.includes('\f')) return text.split('\f').map((page) => page.split('\n'));
  // Without form feeds, a "Page N of M" line closes a page.
  const pages: string[][] = [[]];
  for (const line of text.split('\n')) {
    pages[pages.length - 1]!.push(line);
    if (isPageMarker(line.trim())) pages.push([]);
  }
  return pages;
}

/** Indices of the first two and last two non-blank lines of a page, where headers and footers sit. */
function edgeLines(page: string[]): Set<number> {
  const filled = page.flatMap((line, i) => (line.trim().length > 0 ? [i] : []));
  return new Set([...filled.slice(0, 2), ...filled.slice(-2)]);
}

function normalisedEdge(text: string): string {
  return text.replace(/\d+/g, '#').replace(/\s+/g, ' ').toLowerCase();
}

/** Lines repeated at the top or bottom of at least two pages: running headers and footers. */
function runningLines(pages: string[][]): Set<string> {
  const seen = new Map<string, number>();
  for (const page of pages) {
    const edges = new Set([...edgeLines(page)].map((i) => normalisedEdge(page[i]!.trim())));
    for (const edge of edges) seen.set(edge, (seen.get(edge) ?? 0) + 1);
  }
  return new Set([...seen].filter(([, count]) => count >= 2).map(([edge]) => edge));
}

/**
 * Rejoins what breaks split: a word hyphenated at a line end moves back up to its first half, and a
 * paragraph interrupted by a page break continues when the next page starts in lowercase.
 */
function joinBrokenLines(lines: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line === PAGE_BREAK) {
      const previous = lastText(out);
      const next = nextText(lines, i + 1);
      const continues =
        previous !== null &&
        next !== null &&
        !/[.!?:]$/.test(out[previous]!.trim()) &&
        /^\s*\p{Ll}/u.test(lines[next]!);
      if (continues) {
        out.length = previous + 1;
        i = next - 1;
      } else out.push('');
      continue;
    }
    out.push(line);
  }
  for (let i = 0; i < out.length; i++) {
    const line = out[i]!;
    if (!/\p{L}-$/u.test(line)) continue;
    const next = nextText(out, i + 1);
    if (next === null) continue;
    const match = /^\s*(\p{Ll}[\p{L}\p{N}'’]*[.,;:!?)]*)\s*(.*)$/u.exec(out[next]!);
    if (!match) continue;
    out[i] = line.slice(0, -1) + match[1]!;
    out[next] = match[2]!;
    // Blank lines a page break left between the halves go too, and so does a line the word emptied.
    out.splice(i + 1, next - i - (match[2]!.length > 0 ? 1 : 0));
  }
  return out;
}

function lastText(lines: string[]): number | null {
  for (let i = lines.length - 1; i >= 0; i--) if (lines[i]!.trim().length > 0) return i;
  return null;
}

function nextText(lines: string[], from: number): number | null {
  for (let i = from; i < lines.length; i++) if (lines[i] !== PAGE_BREAK && lines[i]!.trim().length > 0) return i;
  return null;
}

/** A table found in laid-out text: where it is and its cells, header row first. */
export interface LaidOutTable {
  start: number;
  end: number;
  rows: string[][];
}

function columnGaps(line: string): number {
  return (line.trim().match(COLUMN_GAP) ?? []).length;
}

/**
 * Finds whitespace-aligned tables: runs of at least two lines that each have two or more column gaps (so at
 * least three cells) and whose cells line up, either on gutters that are blank in every line or on the same
 * number of gap-separated cells per line. Justified prose with double spaces does not line up and is left.
 */
export function findLaidOutTables(lines: string[]): LaidOutTable[] {
  const tables: LaidOutTable[] = [];
  let i = 0;
  while (i < lines.length) {
    if (columnGaps(lines[i]!) < 2) {
      i++;
      continue;
    }
    let end = i;
    // Rule lines ("-----  -----") may sit between header and body.
    while (
      end + 1 < lines.length &&
      (columnGaps(lines[end + 1]!) >= 2 || (RULE_LINE.test(lines[end + 1]!) && lines[end + 1]!.trim().length > 0))
    )
      end++;
    const rows = lines.slice(i, end + 1).filter((line) => !RULE_LINE.test(line));
    const cells = rows.length >= 2 ? tableCells(rows) : null;
    if (cells) tables.push({ start: i, end, rows: cells });
    i = end + 1;
  }
  return tables;
}

/** Splits aligned rows into cells, or returns null when they do not form columns. */
function tableCells(rows: string[]): string[][] | null {
  const indent = Math.min(...rows.map((row) => row.length - row.trimStart().length));
  const body = rows.map((row) => row.slice(indent));
  const width = Math.max(...body.map((row) => row.length));
  const blank: boolean[] = Array.from({ length: width }, (_, col) => body.every((row) => (row[col] ?? ' ') === ' '));
  const gutters: [number, number][] = [];
  for (let col = 0; col < width;) {
    if (!blank[col]) {
      col++;
      continue;
    }
    let stop = col;
    while (stop < width && blank[stop]) stop++;
    if (stop - col >= 2 && col > 0 && stop < width) gutters.push([col, stop]);
    col = stop;
  }
  const byGutter = body.map((row) => {
    const cells: string[] = [];
    let from = 0;
    for (const [gapStart, gapEnd] of gutters) {
      cells.push(row.slice(from, gapStart).trim());
      from = gapEnd;
    }
    cells.push(row.slice(from).trim());
    return cells;
  });
  const bySplit = body.map((row) => row.trim().split(/ {2,}/));
  const splitWidths = new Set(bySplit.map((cells) => cells.length));
  const columns = Math.max(...bySplit.map((cells) => cells.length));
  if (gutters.length + 1 >= 3 && gutters.length + 1 >= columns) return byGutter;
  if (splitWidths.size === 1 && columns >= 3) return bySplit;
  return null;
}

/** Number of markdown pipe tables (a `|` row followed by a `| --- |` separator row). */
export function countPipeTables(markdown: string): number {
  const lines = markdown.split('\n');
  let count = 0;
  for (let i = 0; i + 1 < lines.length; i++) {
    if (/^\s*\|.*\|\s*$/.test(lines[i]!) && /^\s*\|(?:\s*:?-{3,}:?\s*\|)+\s*$/.test(lines[i + 1]!)) count++;
  }
  return count;
}

/** Tables in a source text, in either form: laid-out columns or markdown pipe tables. */
export function countSourceTables(source: string): number {
  return findLaidOutTables(removePageLayout(source, 'layout')).length + countPipeTables(source);
}

type Block =
  | { kind: 'heading'; level: number; text: string }
  | { kind: 'paragraph'; text: string }
  | { kind: 'list'; ordered: boolean; items: string[] }
  | { kind: 'fields'; fields: [string, string][] }
  | { kind: 'table'; rows: string[][] };

/**
 * Converts extracted text to markdown with the given strategy. The title becomes the `#` heading; a heading
 * in the text that repeats the title is dropped.
 */
export function convertToMarkdown(title: string, source: string, strategy: ConversionStrategy): Conversion {
  if (strategy === 'passthrough') {
    const markdown = removePageLayout(source, 'layout')
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim();
    return {
      markdown: `${markdown}\n`,
      strategy,
      stats: {
        words: countWords(markdown),
        headings: markdown.split('\n').filter((line) => /^#{1,6}\s/.test(line)).length,
        tables: countPipeTables(markdown),
      },
    };
  }
  const lines = removePageLayout(source, strategy);
  const tables = new Map((strategy === 'layout' ? findLaidOutTables(lines) : []).map((table) => [table.start, table]));
  const blocks: Block[] = [];
  let paragraph: string[] = [];
  const flush = (): void => {
    if (paragraph.length > 0) blocks.push(...readBlock(paragraph));
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const table = tables.get(i);
    if (table) {
      flush();
      blocks.push({ kind: 'table', rows: table.rows });
      i = table.end;
      continue;
    }
    const line = lines[i]!;
    if (line.trim().length === 0) flush();
    else paragraph.push(line);
  }
  flush();
  const kept = blocks.filter((block) => !(block.kind === 'heading' && sameText(block.text, title)));
  const markdown = [`# ${title}`, ...kept.map(renderBlock)].join('\n\n');
  return {
    markdown: `${markdown}\n`,
    strategy,
    stats: {
      words: countWords(markdown),
      headings: kept.filter((block) => block.kind === 'heading').length,
      tables: kept.filter((block) => block.kind === 'table').length,
    },
  };
}

function sameText(a: string, b: string): boolean {
  const norm = (text: string): string =>
    text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}]+/gu, ' ')
      .trim();
  return norm(a) === norm(b);
}

/**
 * Classifies the lines of one blank-line-separated block. Extracted text often has no blank line between a
 * heading, its prose and a list, so the block is read line by line: a heading may follow a finished
 * sentence, items start lists, and a line after an item continues it unless the item was finished.
 */
function readBlock(raw: string[]): Block[] {
  const lines = raw.map((line) => line.trim().replace(/\s+/g, ' '));
  const blocks: Block[] = [];
  let prose: string[] = [];
  let list: { kind: 'list'; ordered: boolean; items: string[] } | null = null;
  let fields: [string, string][] = [];
  const close = (): void => {
    if (prose.length > 0) blocks.push({ kind: 'paragraph', text: prose.join(' ') });
    if (list) blocks.push(list);
    if (fields.length > 0) blocks.push({ kind: 'fields', fields });
    prose = [];
    list = null;
    fields = [];
  };
  lines.forEach((line, i) => {
    const previous = lines[i - 1];
    const next = lines[i + 1];
    const atBoundary = previous === undefined || /[.!?:]$/.test(previous) || list !== null || fields.length > 0;
    const heading = atBoundary ? headingOf(line, raw[i]!, next) : null;
    if (heading) {
      close();
      blocks.push(heading);
      return;
    }
    const field = FIELD.exec(line);
    // One "Note: ..." line is prose; consecutive "Name: value" lines are the fields of a memo or form.
    if (
      field &&
      prose.length === 0 &&
      list === null &&
      (fields.length > 0 || (next !== undefined && FIELD.test(next)))
    ) {
      fields.push([field[1]!, field[2]!]);
      return;
    }
    const bullet = BULLET.exec(line);
    const ordered = ORDERED_ITEM.exec(line);
    const orderedList =
      ordered !== null && ((list !== null && list.ordered) || (next !== undefined && ORDERED_ITEM.test(next)));
    if (bullet || orderedList) {
      const isOrdered = bullet === null;
      if (list === null || list.ordered !== isOrdered) {
        close();
        list = { kind: 'list', ordered: isOrdered, items: [] };
      }
      list.items.push((bullet ?? ordered)![isOrdered ? 2 : 1]!);
      return;
    }
    if (list !== null) {
      const last = list.items[list.items.length - 1]!;
      // A wrapped item continues on the next line; a finished item followed by a capital starts prose.
      if (!/[.!?]$/.test(last) || /^\p{Ll}/u.test(line)) {
        list.items[list.items.length - 1] = `${last} ${line}`;
        return;
      }
    }
    if (list !== null || fields.length > 0) close();
    prose.push(line);
  });
  close();
  return blocks;
}

/**
 * A heading line: numbered ("2.1 Scope", "1. Introduction") and short without closing punctuation, and not
 * the first of a numbered list; or short and all capitals ("EXECUTIVE SUMMARY"). Table rows (with column
 * gaps) never are.
 */
function headingOf(line: string, raw: string, next: string | undefined): Block | null {
  if (columnGaps(raw) > 0 || line.length > 80 || /[.,;:!?]$/.test(line)) return null;
  const words = line.split(' ').length;
  const numbered = NUMBERED_HEADING.exec(line);
  if (numbered && words <= 10) {
    const depth = numbered[1]!.split('.').length;
    const listStarts = !numbered[1]!.includes('.') && next !== undefined && ORDERED_ITEM.test(next);
    if (!listStarts) return { kind: 'heading', level: Math.min(depth + 1, 6), text: line };
  }
  const letters = line.replace(/[^\p{L}]/gu, '');
  if (words <= 8 && letters.length >= 3 && letters === letters.toUpperCase() && letters !== letters.toLowerCase()) {
    return { kind: 'heading', level: 2, text: line };
  }
  return null;
}

function renderBlock(block: Block): string {
  switch (block.kind) {
    case 'heading':
      return `${'#'.repeat(block.level)} ${block.text}`;
    case 'paragraph':
      return block.text;
    case 'list':
      return block.items.map((item, index) => `${block.ordered ? `${index + 1}.` : '-'} ${item}`).join('\n');
    case 'fields':
      return block.fields.map(([name, value]) => `- **${name}:** ${value}`).join('\n');
    case 'table': {
      const columns = Math.max(...block.rows.map((row) => row.length));
      const cell = (text: string | undefined): string => (text ?? '').replace(/\|/g, '\\|');
      const row = (cells: string[]): string =>
        `| ${Array.from({ length: columns }, (_, i) => cell(cells[i])).join(' | ')} |`;
      const [header = [], ...body] = block.rows;
      return [row(header), `| ${Array.from({ length: columns }, () => '---').join(' | ')} |`, ...body.map(row)].join(
        '\n',
      );
    }
  }
}
