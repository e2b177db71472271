/**
 * Reading a limits file (docs/configuration.md "Model capacity"): YAML, or JSON (which YAML reads too), checked
 * by `parseLimits` so that every problem is listed at once, each with the field's line in the file. The reading is
 * generic ({@link parseSettingsText}): the notifications file (src/notify/) is read the same way.
 */
import { readFileSync } from 'node:fs';
import { LineCounter, parseDocument } from 'yaml';
import { parseLimits, type LimitsParse } from '../limits';

/** A settings file checked: what it holds, or every problem as `path: what is wrong; fix`. */
export type SettingsParse<T> = ({ ok: true } & T) | { ok: false; problems: string[] };

/**
 * Parses the text of a settings file named `file` (for messages) with `parse`, which lists problems as
 * `field.path: message`; each problem comes back as `file (line n): field.path: message`.
 */
export function parseSettingsText<T>(
  text: string,
  file: string,
  parse: (raw: unknown) => SettingsParse<T>,
): SettingsParse<T> {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter });
  if (doc.errors.length > 0)
    return { ok: false, problems: doc.errors.map((e) => `${file}: line ${e.linePos?.[0].line ?? '?'}: ${e.message}`) };
  const parsed = parse(doc.toJS());
  if (parsed.ok) return parsed;
  const lineOf = (field: string): string => {
    const path = field.split('.').map((part) => (/^\d+$/.test(part) ? Number(part) : part));
    const node = doc.getIn(path, true) as { range?: [number, number] } | undefined;
    const range =
      node?.range ?? (doc.getIn(path.slice(0, -1), true) as { range?: [number, number] } | undefined)?.range;
    return range ? ` (line ${lineCounter.linePos(range[0]).line})` : '';
  };
  return {
    ok: false,
    problems: parsed.problems.map((problem) => {
      const field = problem.slice(0, problem.indexOf(':'));
      return `${file}${lineOf(field)}: ${problem}`;
    }),
  };
}

/** Reads the settings file at `path` with `parse`; a file that cannot be read is one problem naming it. */
export function readSettingsFile<T>(path: string, parse: (raw: unknown) => SettingsParse<T>): SettingsParse<T> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    return { ok: false, problems: [`${path}: cannot be read (${(error as Error).message}); check the path`] };
  }
  return parseSettingsText(text, path, parse);
}

/** Parses the text of a limits file named `file` (for messages): the limits, or every problem found. */
export function parseLimitsText(text: string, file: string): LimitsParse {
  return parseSettingsText(text, file, parseLimits);
}

/** Reads and parses the limits file at `path`; a file that cannot be read is one problem naming it. */
export function readLimitsFile(path: string): LimitsParse {
  return readSettingsFile(path, parseLimits);
}
