/**
 * How a validation problem reads, wherever it is found (pipeline, stage `with:`, contract, loop files): the
 * field, what is wrong, and the fix. zod's own wording ("Invalid input", "Unrecognized key") names neither
 * the fix nor, for a missing field, that the field is required; {@link describeIssue} says both, with a
 * did-you-mean where a near name exists.
 */
import type { z } from 'zod';
import { closest } from './suggest';

/** A problem found in a spec: the path into the spec as written (for finding its line) and the text. */
export interface SpecProblem {
  /** The check that found it. `registry` problems are names a worker of your own may register. */
  layer: 'schema' | 'graph' | 'config' | 'contract' | 'registry' | 'limit';
  /** Path into the spec as written, e.g. `['stages', 2, 'with', 'on_reject']`; `[]` for the whole spec. */
  at: (string | number)[];
  /** What is printed: `<field>: <what is wrong>[; <fix>]`. */
  text: string;
}

/** What {@link describeIssue} may know about the schema: the fields an object takes, hints for required ones. */
export interface IssueContext {
  /** The fields the object at `path` takes (for unknown fields and their did-you-mean). */
  fieldsAt?: (path: readonly PropertyKey[]) => readonly string[] | undefined;
  /** What a required field is for, by its name (`ttl: 'how long … e.g. 4h'`). */
  required?: Readonly<Record<string, string>>;
  /** How field names are shown (the pipeline schema reads camelCase and shows the YAML's snake_case). */
  spell?: (field: string) => string;
}

/**
 * One zod issue as `{ path, message }` pairs (an issue about several unknown keys gives one pair per key):
 * a missing field says "required", an unknown one names the fields (and the nearest), an enum names its
 * values (and the nearest to what was given).
 */
export function describeIssue(
  issue: z.core.$ZodIssue,
  input: unknown,
  context: IssueContext = {},
): { path: PropertyKey[]; message: string }[] {
  const path = [...issue.path];
  if (issue.code === 'unrecognized_keys') {
    const fields = context.fieldsAt?.(path);
    const spell = context.spell ?? ((field: string) => field);
    return issue.keys.map((key) => {
      const near = fields ? closest(key, fields) : undefined;
      const list = fields ? `; the fields here are: ${fields.map(spell).join(', ')}` : '';
      const guess = near ? ` (did you mean "${spell(near)}"?)` : '';
      return { path: [...path, key], message: `unknown field${guess}${list}` };
    });
  }
  const got = valueAt(input, path);
  // zod's own words for a missing field ("Invalid input: expected string, received undefined"); a schema's
  // own message for it (e.g. "prompt is required: …") already says more.
  if (got === undefined && issue.message.startsWith('Invalid')) {
    const last = path[path.length - 1];
    const hint = typeof last === 'string' ? context.required?.[last] : undefined;
    return [{ path, message: `required${hint ? `: ${hint}` : ''}` }];
  }
  if (issue.code === 'invalid_value' && 'values' in issue) {
    const allowed = (issue.values as unknown[]).map(String);
    const near = typeof got === 'string' ? closest(got, allowed) : undefined;
    const given = got !== undefined ? ` (got ${JSON.stringify(got)}${near ? `; did you mean "${near}"?` : ''})` : '';
    return [{ path, message: `must be one of ${allowed.join(', ')}${given}` }];
  }
  return [{ path, message: issue.message }];
}

/** `path: message` lines for a config's zod issues (`(the whole with:)` for the root), each once. */
export function describeConfigIssues(
  issues: readonly z.core.$ZodIssue[],
  input: unknown,
  context: IssueContext = {},
): string[] {
  const field = (path: PropertyKey[]) => path.map(String).join('.') || '(the whole with:)';
  const lines = issues.flatMap((issue) =>
    describeIssue(issue, input, context).map((d) => `${field(d.path)}: ${d.message}`),
  );
  return [...new Set(lines)];
}

/** The value at `path` in `input`, or undefined. */
export function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value: unknown = input;
  for (const key of path) {
    value = value !== null && typeof value === 'object' ? (value as Record<PropertyKey, unknown>)[key] : undefined;
  }
  return value;
}

/** `${NAME}` variables of loop text (the names the loop runtime substitutes: capitals and `_`). */
const VARIABLE = /\$\{([A-Z_]+)\}/g;

/**
 * The `${NAME}` variables of `text` that are not in `known`, with the line (1-based) each is on, the fix (a
 * did-you-mean, else the variables this text may use) and `consequence`: what the literal text would do.
 */
export function unknownVariables(
  text: string,
  known: readonly string[],
  consequence: string,
): { line: number; message: string }[] {
  const found: { line: number; message: string }[] = [];
  text.split('\n').forEach((content, i) => {
    for (const match of content.matchAll(VARIABLE)) {
      const name = match[1]!;
      if (known.includes(name)) continue;
      const near = closest(name, known);
      const all = known.map((k) => `\${${k}}`).join(', ');
      const fix = near ? `did you mean \${${near}}?` : `the variables here are ${all}`;
      found.push({ line: i + 1, message: `unknown variable \${${name}} (${fix}); ${consequence}` });
    }
  });
  return found;
}
