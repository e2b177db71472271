/**
 * The TDD nodes' replies (seed 001): tells the agent how to answer, and parses the answer into the node's
 * typed exit plus the file changes that go with it. The prompts themselves are the nodes' Jinja templates,
 * rendered by `node-templates.ts`.
 *
 * A reply is one JSON object: `exit` names one of the node's exits, that exit's fields sit beside it, and
 * `files` maps paths relative to the worktree to their full new content (null deletes). Treadle writes and
 * commits the files itself, so commit hashes in a reply are replaced by the real ones.
 */
import { z } from 'zod';
import { EXIT_SCHEMAS, FilePathSchema, NUDGE_REMINDER, TDD_NODES, type NodeExit, type TddNodeName } from '../spec';
import type { Json } from '../../../model/shapes';

// ---------------------------------------------------------------------------------------------------------
// The reply format, generated from the exit schemas

/** At most this many issues are reported for one reply. */
const MAX_ISSUES = 5;
/** Openings `{` tried when looking for the reply's JSON object: each try scans the rest of the reply. */
const MAX_JSON_CANDIDATES = 50;
/** Agent-supplied text quoted in an issue (an exit name, a path) is cut to this many characters. */
const MAX_QUOTED_CHARS = 80;

interface ExitVariant {
  name: string;
  schema: z.ZodObject;
}

function variantsOf(node: TddNodeName): ExitVariant[] {
  const options = EXIT_SCHEMAS[node].options as readonly z.ZodObject[];
  return options.map((schema) => ({ name: String((schema.shape.exit as z.ZodLiteral<string>).value), schema }));
}

const VARIANTS = Object.fromEntries(TDD_NODES.map((node) => [node, variantsOf(node)])) as Record<
  TddNodeName,
  ExitVariant[]
>;

/** The exit names of a node, in the seed's order. */
export function exitNames(node: TddNodeName): string[] {
  return VARIANTS[node].map((v) => v.name);
}

/** A zod type in the compact TypeScript-like notation the reply instructions use. */
function describeType(schema: z.ZodType): string {
  if (schema === FilePathSchema) return 'path';
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable)
    return describeType(schema.unwrap() as z.ZodType);
  if (schema instanceof z.ZodString) return 'string';
  if (schema instanceof z.ZodNumber) return schema.isInt ? 'integer' : 'number';
  if (schema instanceof z.ZodBoolean) return 'boolean';
  if (schema instanceof z.ZodLiteral) return JSON.stringify(schema.value);
  if (schema instanceof z.ZodEnum) return schema.options.map((o) => JSON.stringify(o)).join(' | ');
  if (schema instanceof z.ZodArray) {
    const element = schema.element as z.ZodType;
    const described = describeType(element);
    return element instanceof z.ZodEnum || element instanceof z.ZodUnion ? `(${described})[]` : `${described}[]`;
  }
  if (schema instanceof z.ZodTuple)
    return `[${(schema.def.items as readonly z.ZodType[]).map(describeType).join(', ')}]`;
  if (schema instanceof z.ZodObject) return `{ ${describeFields(schema.shape as Record<string, z.ZodType>)} }`;
  return 'value';
}

/** True for the seed's `Maybe` fields: they may be left out or null. */
function isMaybe(schema: z.ZodType): boolean {
  return schema instanceof z.ZodOptional || (schema instanceof z.ZodNullable && isMaybe(schema.unwrap() as z.ZodType));
}

function describeFields(shape: Record<string, z.ZodType>): string {
  return Object.entries(shape)
    .map(([field, type]) => `${field}${isMaybe(type) ? '?' : ''}: ${describeType(type)}`)
    .join('; ');
}

/** One exit as the instructions list it: `{ "exit": "Name"; field: type; … }`. */
function describeVariant(variant: ExitVariant): string {
  const { exit: _exit, ...fields } = variant.schema.shape as Record<string, z.ZodType>;
  const rest = describeFields(fields);
  return `{ "exit": ${JSON.stringify(variant.name)}${rest ? `; ${rest}` : ''} }`;
}

/** A node's exits with their field names only: `"RebaseClean" (newBase), …`. */
function exitSummary(node: TddNodeName): string {
  return VARIANTS[node]
    .map((v) => {
      const fields = Object.keys(v.schema.shape).filter((f) => f !== 'exit');
      return `${JSON.stringify(v.name)} (${fields.join(', ')})`;
    })
    .join(', ');
}

/**
 * How an agent changes the files of its worktree: only through its reply's `files` (`scripted`), with the
 * worktree tools during its reply too (`anthropic`), or by acting in the worktree itself (`claude-code`).
 */
export type WorktreeMode = 'files' | 'tools' | 'workdir';

/** What the agent is told about changing files, by {@link WorktreeMode}. */
const FILE_CHANGES: Record<WorktreeMode, string> = {
  files:
    'Put file changes in a "files" object beside "exit": `"files": { "relative/path": "the full new content", "file/to/delete": null }`. Paths are relative to your worktree (no leading "/", no ".."); each value is the whole new file, not a diff; null deletes the file. Treadle writes the files and commits them for you, so any commit hash you give in your exit is replaced by the real one.',
  tools:
    'Change files with your tools before you answer: `read_file`, `write_file` (the whole new file, not a diff), `list_files`, `delete_file`, and `run_tests` to run the tests. Paths are relative to your worktree (no leading "/", no ".."); files outside it, in .git, and read-only files (tests that are not yours to change, the parent\'s interface) are refused. When you are done, answer with the JSON object alone; a "files" object beside "exit" (`"files": { "relative/path": "the full new content", "file/to/delete": null }`) is optional and is written after your tool changes. Treadle commits the worktree for you, so any commit hash you give in your exit is replaced by the real one.',
  workdir:
    'You run in your worktree: change files there with your own tools, and only there (files outside it, in .git, and read-only files such as tests that are not yours to change and the parent\'s interface are not yours). When you are done, answer with the JSON object; a "files" object beside "exit" (`"files": { "relative/path": "the full new content", "file/to/delete": null }`) is optional and is written after your own changes. Treadle commits the worktree for you, so any commit hash you give in your exit is replaced by the real one.',
};

/**
 * The text appended after a node's rendered template: answer with one JSON object whose `exit` names one of
 * the node's exits (each listed with its fields and their types, generated from the exit schema), with file
 * changes in `files` (which Treadle writes and commits) or, for agents that act in the worktree, made there.
 */
export function replyInstructions(node: TddNodeName, options: { worktree?: WorktreeMode } = {}): string {
  return [
    '---',
    '',
    '## How to answer',
    '',
    'Answer with one JSON object (a ```json fence around it is fine). Its "exit" field names your decision, and that exit\'s fields sit beside it. The exits open to you:',
    '',
    ...VARIANTS[node].map((v) => `- \`${describeVariant(v)}\``),
    '',
    '`path` is a file path relative to your worktree; a field marked `?` may be left out or null.',
    '',
    FILE_CHANGES[options.worktree ?? 'files'],
  ].join('\n');
}

/** The JSON Schema of a reply's `files`: path → full new content, or null to delete. */
const FILES_JSON_SCHEMA: { [key: string]: Json } = {
  type: 'object',
  additionalProperties: { anyOf: [{ type: 'string' }, { type: 'null' }] },
};

/**
 * The JSON Schema of a node's reply, usable as an LLM call's `outputSchema`: the exit union (`oneOf`, one
 * object per exit, `exit` a `const`) from zod's `toJSONSchema`, with every definition inlined (no `$ref`, no
 * `$schema`), `type: "object"` at the top, and each exit also allowing the optional `files` object.
 * Refinements zod cannot express (a path's "no `..`") are checked again by {@link parseNodeOutput}.
 */
export function exitJsonSchema(node: TddNodeName): { [key: string]: Json } {
  const generated = z.toJSONSchema(EXIT_SCHEMAS[node], {
    target: 'draft-2020-12',
    reused: 'inline',
    cycles: 'throw',
    unrepresentable: 'throw',
  });
  const { $schema: _dialect, ...schema } = JSON.parse(JSON.stringify(generated)) as { [key: string]: Json };
  const variants = schema.oneOf;
  if (!Array.isArray(variants)) throw new Error(`${node}: the exit schema is not a oneOf of exits`);
  for (const variant of variants) {
    const properties = (variant as { properties?: { [key: string]: Json } }).properties;
    if (!properties) throw new Error(`${node}: an exit schema has no properties`);
    properties.files = FILES_JSON_SCHEMA;
  }
  if (JSON.stringify(schema).includes('"$ref"')) throw new Error(`${node}: the exit schema has references`);
  return { type: 'object', ...schema };
}

// ---------------------------------------------------------------------------------------------------------
// Parsing replies

/** A parsed reply: the node's exit (unknown fields dropped) and the file changes. */
/** A reply, or its issues; `refusedPaths` are its `files` paths refused as outside the worktree (the user sees them). */
export type NodeReply =
  | { ok: true; exit: NodeExit; files: Record<string, string | null> }
  | { ok: false; issues: string[]; refusedPaths?: string[] };

/** Agent text quoted in an issue: JSON-quoted and cut short. */
function quote(value: string): string {
  return JSON.stringify(value.length > MAX_QUOTED_CHARS ? `${value.slice(0, MAX_QUOTED_CHARS)}…` : value);
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/** `testPlan[0].approach`. */
function pathText(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (text, part) => (typeof part === 'number' ? `${text}[${part}]` : `${text}${text ? '.' : ''}${String(part)}`),
    '',
  );
}

function issueText(issue: z.core.$ZodIssue): string {
  const message = issue.message.replace(/^Invalid input: /, '');
  const missing = /^expected (.+), received undefined$/.exec(message);
  return `${pathText(issue.path) || '(reply)'}: ${missing ? `missing (expected ${missing[1]})` : message}`;
}

/** The first few issues; a last line counts the rest. */
function capped(issues: string[]): string[] {
  return issues.length <= MAX_ISSUES
    ? issues
    : [...issues.slice(0, MAX_ISSUES - 1), `… and ${issues.length - (MAX_ISSUES - 1)} more issues`];
}

/** The index just past the `}` closing the object that opens at `start`, or -1 if it never closes. */
function objectEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i + 1;
  }
  return -1;
}

/**
 * The reply's JSON object: the first balanced top-level `{…}` that parses and has an `exit` field, else the
 * first that parses at all; fences and prose around it are ignored.
 */
function findJsonObject(text: string): { ok: true; value: Record<string, unknown> } | { ok: false; issue: string } {
  let firstObject: Record<string, unknown> | undefined;
  let firstError: string | undefined;
  let candidates = 0;
  for (let start = text.indexOf('{'); start !== -1 && candidates < MAX_JSON_CANDIDATES; candidates++) {
    const end = objectEnd(text, start);
    if (end === -1) {
      // A stray "{" in prose never closes; the reply may still follow it.
      firstError ??= 'a JSON object in the reply never closes (unbalanced braces, or the reply was cut off)';
      start = text.indexOf('{', start + 1);
      continue;
    }
    try {
      const value: unknown = JSON.parse(text.slice(start, end));
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
        const object = value as Record<string, unknown>;
        if (Object.prototype.hasOwnProperty.call(object, 'exit')) return { ok: true, value: object };
        firstObject ??= object;
      }
    } catch (error) {
      firstError ??= `the reply's JSON object does not parse: ${(error as Error).message}`;
    }
    start = text.indexOf('{', end);
  }
  if (firstObject) return { ok: true, value: firstObject };
  if (firstError) return { ok: false, issue: firstError };
  return {
    ok: false,
    issue: 'no JSON object in the reply: answer with one JSON object whose "exit" names your decision',
  };
}

/** Another node's exit of this name, for a clearer issue. */
function ownerOf(exit: string): TddNodeName | undefined {
  return TDD_NODES.find((node) => exitNames(node).includes(exit));
}

function checkExit(
  node: TddNodeName,
  reply: Record<string, unknown>,
): { ok: true; exit: NodeExit } | { ok: false; issues: string[] } {
  const valid = exitNames(node)
    .map((n) => JSON.stringify(n))
    .join(', ');
  const exit = reply.exit;
  if (exit === undefined) return { ok: false, issues: [`exit: missing; name one of ${valid}`] };
  if (typeof exit !== 'string')
    return { ok: false, issues: [`exit: expected a string naming one of ${valid}, received ${typeName(exit)}`] };
  if (!exitNames(node).includes(exit)) {
    const owner = ownerOf(exit);
    const whose = owner ? ` (it is ${owner}'s exit)` : '';
    return { ok: false, issues: [`exit: ${quote(exit)} is not an exit of ${node}${whose}; valid exits: ${valid}`] };
  }
  // Unknown fields (`files` among them) are dropped: the exit carries only its own.
  const parsed = (EXIT_SCHEMAS[node] as z.ZodType<NodeExit>).safeParse(reply);
  return parsed.success ? { ok: true, exit: parsed.data } : { ok: false, issues: parsed.error.issues.map(issueText) };
}

function checkFiles(
  files: unknown,
): { ok: true; files: Record<string, string | null> } | { ok: false; issues: string[]; refused: string[] } {
  if (files === undefined || files === null) return { ok: true, files: {} };
  if (typeof files !== 'object' || Array.isArray(files))
    return {
      ok: false,
      issues: [`files: expected an object of path → content or null, received ${typeName(files)}`],
      refused: [],
    };
  const issues: string[] = [];
  const refused: string[] = [];
  const checked: Record<string, string | null> = {};
  for (const [file, content] of Object.entries(files)) {
    const where = `files[${quote(file)}]`;
    const path = FilePathSchema.safeParse(file);
    if (!path.success) {
      const why = path.error.issues[0]?.message ?? 'not a usable path';
      issues.push(`${where}: ${why}`);
      refused.push(`refused path ${quote(file)}: ${why}`);
    } else if (typeof content !== 'string' && content !== null)
      issues.push(`${where}: expected the full new content (string) or null, received ${typeName(content)}`);
    else checked[file] = content;
  }
  return issues.length > 0 ? { ok: false, issues, refused } : { ok: true, files: checked };
}

/**
 * Checks an already-parsed reply (structured output, tool input): an object whose `exit` is one of the
 * node's exits with that exit's fields, and optional `files`. A string is parsed as reply text first.
 * Issues name the field they are about; at most five.
 */
export function parseNodeOutput(node: TddNodeName, value: unknown): NodeReply {
  if (typeof value === 'string') return parseNodeReply(node, value);
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { ok: false, issues: [`(reply): expected a JSON object, received ${typeName(value)}`] };
  const reply = value as Record<string, unknown>;
  const exit = checkExit(node, reply);
  const files = checkFiles(reply.files);
  if (exit.ok && files.ok) return { ok: true, exit: exit.exit, files: files.files };
  return {
    ok: false,
    issues: capped([...(exit.ok ? [] : exit.issues), ...(files.ok ? [] : files.issues)]),
    ...(files.ok || files.refused.length === 0 ? {} : { refusedPaths: files.refused }),
  };
}

/**
 * Parses an agent's reply text: the first JSON object in it (bare, in a ```json fence, or with prose
 * around), then the checks of {@link parseNodeOutput}. A reply with no JSON object at all says
 * "no JSON object", which callers treat as "no decision yet".
 */
export function parseNodeReply(node: TddNodeName, text: string): NodeReply {
  const found = findJsonObject(text);
  if (!found.ok) return { ok: false, issues: [found.issue] };
  return parseNodeOutput(node, found.value);
}

/** What the agent hears after a malformed reply: the issues, and the exits it may choose from. */
export function invalidReplyFeedback(node: TddNodeName, issues: readonly string[]): string {
  return [
    'Your reply could not be used:',
    ...capped([...issues]).map((issue) => `- ${issue}`),
    '',
    `Send the whole reply again as one JSON object whose "exit" is one of ${exitSummary(node)}, with that exit's fields beside it and any file changes in "files".`,
  ].join('\n');
}

/** The seed's reminder after the nudge timeout, word for word. */
export function nudgeMessage(): string {
  return NUDGE_REMINDER;
}
