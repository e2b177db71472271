/**
 * The fenced code blocks of a Markdown file, each with its language, its place and the marker that says how
 * a test treats it: an HTML comment on the line just before the fence,
 * `<!-- sample: <mode> [argument] [(reason)] -->`, e.g. `<!-- sample: not-run (starts a long-running server) -->`.
 * Works for any Markdown file (README.md now, docs/*.md later).
 */
import { readFileSync } from 'node:fs';

/** How a block is to be treated, as its marker says. */
export interface SampleMarker {
  /** The first word: `not-run`, `worker`, `fragment`, … (the test decides what it accepts). */
  mode: string;
  /** What follows the mode, without the reason (e.g. a pipeline file a fragment belongs to); '' when none. */
  argument: string;
  /** The text in parentheses at the end, if any. */
  reason?: string;
}

/** One fenced code block. */
export interface MarkdownSample {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The first word of the fence's info string, lower case; '' for a bare fence. */
  lang: string;
  /** The block's text, without the fences and without the fence's own indentation. */
  code: string;
  /** The nearest heading above the block ('' before the first). */
  section: string;
  marker?: SampleMarker;
}

/** A heading of the file, in order. */
export interface MarkdownHeading {
  line: number;
  level: number;
  text: string;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const MARKER = /^\s*<!--\s*sample:\s*(.*?)\s*-->\s*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;

/** Parses a marker comment's body (`not-run (reason)`); throws on an empty one. */
export function parseMarker(body: string): SampleMarker {
  const reasonMatch = /\(([^()]*(?:\([^()]*\)[^()]*)*)\)\s*$/.exec(body);
  const reason = reasonMatch?.[1]?.trim();
  const head = (reasonMatch ? body.slice(0, reasonMatch.index) : body).trim();
  const [mode = '', ...rest] = head.split(/\s+/);
  if (mode === '') throw new Error(`a sample marker needs a mode: "<!-- sample: ${body} -->"`);
  return { mode, argument: rest.join(' '), ...(reason ? { reason } : {}) };
}

/** Every fenced block and heading of `text`; `file` names it in the results. Throws on an unclosed fence. */
export function parseMarkdown(text: string, file: string): { samples: MarkdownSample[]; headings: MarkdownHeading[] } {
  const lines = text.split(/\r?\n/);
  const samples: MarkdownSample[] = [];
  const headings: MarkdownHeading[] = [];
  let section = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (!fence) {
      const heading = HEADING.exec(line);
      if (heading) {
        section = heading[2]!;
        headings.push({ line: i + 1, level: heading[1]!.length, text: section });
      }
      continue;
    }
    const indent = fence[1]!.length;
    const delimiter = fence[2]!;
    const start = i;
    const body: string[] = [];
    // A closing fence uses the same character, at least as many times, and nothing after it.
    const closing = new RegExp(`^\\s*${delimiter[0] === '`' ? '`' : '~'}{${delimiter.length},}\\s*$`);
    for (i++; i < lines.length && !closing.test(lines[i]!); i++) body.push(stripIndent(lines[i]!, indent));
    if (i >= lines.length) throw new Error(`${file}:${start + 1}: the code block opened here is never closed`);
    const previous = start > 0 ? MARKER.exec(lines[start - 1]!) : null;
    samples.push({
      file,
      line: start + 1,
      lang: fence[3]!.toLowerCase(),
      code: body.join('\n'),
      section,
      ...(previous ? { marker: parseMarker(previous[1]!) } : {}),
    });
  }
  return { samples, headings };
}

/** Reads and parses a Markdown file. */
export function readMarkdown(file: string): { samples: MarkdownSample[]; headings: MarkdownHeading[] } {
  return parseMarkdown(readFileSync(file, 'utf8'), file);
}

function stripIndent(line: string, indent: number): string {
  let n = 0;
  while (n < indent && line[n] === ' ') n++;
  return line.slice(n);
}
