/**
 * The `scripted` agent provider: deterministic and offline (DESIGN.md principle 5), so every LLM pipeline
 * runs end to end without a key and tests can script exactly what "the model" answers.
 *
 * Canned replies are looked up by key — the stage name, or `<stage>.gate` for a gate's calls — in, first
 * match wins: the work item input's `agent_replies: { <key>: [reply, ...] }`, then the JSON file named by
 * the implementation config's `replies_file` (same map). Attempt n uses reply n and the last reply repeats.
 *
 * `replies_file` comes from the spec, which anyone who can start a work item can write, so it is read only
 * from the worker's replies folders ({@link repliesFolders}: `TREADLE_REPLIES_DIR`, default `replies/` in
 * the home, `TREADLE_HOME`). A relative path is resolved against the first folder; the path, symlinks
 * followed, must stay inside one of them, so `..`, absolute paths and symlinks leading elsewhere are refused
 * before anything outside is read. Without a canned reply the agent answers a minimal value generated
 * from the request's `outputSchema`, or `scripted reply to: <the last user message>`.
 *
 * A reply is a string (the reply text, parsed as JSON when a schema is given), any other JSON (structured
 * output, validated against the schema: a reply that does not match comes back as `invalidOutput`, which is
 * how tests script malformed replies), or `{ "$reply": { text?, output?, inputTokens?, outputTokens? } }`.
 */
import { readFileSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import { JsonSchema, type Json } from '../model/shapes';
import { compileOutputSchema, validateReply, validateValue } from './output-schema';
import { startCallRecord } from './call-record';
import type { AgentContext, AgentProviderFactory } from './providers';
import type { Agent, AgentRequest, AgentResult } from './types';
import { homeLocations } from '../config/home';

/** Provider name of the scripted agent. */
export const SCRIPTED_PROVIDER = 'scripted';

/**
 * Suffix of the correlation id of a gate's calls (`<item>/<stage>/<attempt>/gate`): gates and stages share
 * an attempt's idempotency key, and the suffix keeps their calls apart in the call log and in `agent_replies`.
 */
export const GATE_CORRELATION_SUFFIX = '/gate';

/** How many characters of the last user message the default text reply quotes. */
const QUOTED_PROMPT_CHARS = 80;
/** Rough characters per token, for usage figures that look like a real provider's. */
const CHARS_PER_TOKEN = 4;

const FullReplySchema = z
  .object({
    text: z.string().optional(),
    output: JsonSchema.optional(),
    inputTokens: z.number().int().nonnegative().optional(),
    outputTokens: z.number().int().nonnegative().optional(),
  })
  .strict();
type FullReply = z.infer<typeof FullReplySchema>;

const RepliesSchema = z.record(z.string(), z.array(JsonSchema).min(1, 'needs at least one reply'));
/** Canned replies by stage (or `<stage>.gate`), one per attempt. */
export type AgentReplies = z.infer<typeof RepliesSchema>;

/** Environment variable listing the folders `replies_file` may be read from (separated by `path.delimiter`). */
export const REPLIES_DIR_ENV = 'TREADLE_REPLIES_DIR';
/**
 * The folders `replies_file` may be read from, as absolute paths: {@link REPLIES_DIR_ENV} (relative folders are
 * taken from the home), else `<TREADLE_HOME>/replies`.
 */
export function repliesFolders(env: NodeJS.ProcessEnv = process.env): string[] {
  return homeLocations(REPLIES_DIR_ENV, env);
}

/** Options of a {@link ScriptedAgent}. */
export interface ScriptedAgentOptions {
  /** Folders `replies_file` may be read from; default {@link repliesFolders}(). */
  repliesFolders?: string[];
}

/** A deterministic agent answering canned or schema-derived replies; see the module comment. */
export class ScriptedAgent implements Agent {
  readonly provider = SCRIPTED_PROVIDER;

  constructor(
    private readonly ctx: AgentContext,
    private readonly options: ScriptedAgentOptions = {},
  ) {}

  /** Answers the reply for this attempt; never calls out, never sleeps. */
  async run(request: AgentRequest): Promise<AgentResult> {
    request.signal?.throwIfAborted();
    const callRecord = startCallRecord(request, SCRIPTED_PROVIDER, request.model ?? SCRIPTED_PROVIDER);
    const reply = this.replyFor(request);
    const { text, output, invalidOutput } = shapeReply(reply, request.outputSchema);
    const promptChars = (request.system?.length ?? 0) + request.messages.reduce((sum, m) => sum + m.content.length, 0);
    const usage = {
      inputTokens: reply.inputTokens ?? Math.ceil(promptChars / CHARS_PER_TOKEN),
      outputTokens: reply.outputTokens ?? Math.ceil(text.length / CHARS_PER_TOKEN),
      cacheReadTokens: 0,
    };
    const call = callRecord('success', usage);
    return {
      text,
      ...(output !== undefined ? { output } : {}),
      ...(invalidOutput ? { invalidOutput } : {}),
      usage,
      call,
      calls: [call],
    };
  }

  /** The canned reply for this call, else the default one. */
  private replyFor(request: AgentRequest): FullReply {
    const key = replyKey(this.ctx.stage, request.correlationId);
    const replies =
      inputReplies(this.ctx.input)?.[key] ??
      fileReplies(this.ctx.config, this.options.repliesFolders ?? repliesFolders())?.[key];
    if (replies) return normaliseReply(replies[Math.min(this.ctx.attempt, replies.length) - 1]!, key);
    if (request.outputSchema !== undefined) return { output: exampleOf(request.outputSchema) };
    const lastUser = [...request.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
    return { text: `scripted reply to: ${lastUser.slice(0, QUOTED_PROMPT_CHARS)}` };
  }
}

/** The factory registered under `scripted`: one agent per attempt. */
export const scriptedAgentFactory: AgentProviderFactory = (ctx) => new ScriptedAgent(ctx);

/** `<stage>.gate` for a gate's calls (by correlation id suffix, or a context already naming the gate). */
function replyKey(stage: string, correlationId: string): string {
  if (stage.endsWith('.gate') || !correlationId.endsWith(GATE_CORRELATION_SUFFIX)) return stage;
  return `${stage}.gate`;
}

function inputReplies(input: Json): AgentReplies | undefined {
  if (typeof input !== 'object' || input === null || Array.isArray(input) || input.agent_replies === undefined)
    return undefined;
  return parseReplies(input.agent_replies, 'agent_replies in the work item input', 'InvalidInput');
}

function fileReplies(config: Json | undefined, folders: string[]): AgentReplies | undefined {
  if (typeof config !== 'object' || config === null || Array.isArray(config) || config.replies_file === undefined)
    return undefined;
  const file = config.replies_file;
  if (typeof file !== 'string' || file.length === 0) {
    throw ApplicationFailure.nonRetryable(
      'replies_file must be the path of a JSON file of canned agent replies',
      'InvalidConfig',
    );
  }
  const resolved = allowedRepliesFile(file, folders);
  let parsed: unknown;
  try {
    // A device or a fifo in the folder must not block the worker.
    if (!statSync(resolved).isFile()) throw new Error('not a regular file');
    parsed = JSON.parse(readFileSync(resolved, 'utf8'));
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw ApplicationFailure.nonRetryable(`cannot read replies_file ${resolved}: ${reason}`, 'InvalidConfig');
  }
  return parseReplies(parsed, `replies_file ${resolved}`, 'InvalidConfig');
}

/**
 * The real path of a `replies_file` inside one of the folders, else a non-retryable `InvalidConfig`. The
 * path is checked before the file system is touched (so nothing outside is even looked up) and again with
 * symlinks resolved (so a link inside a folder cannot lead out of it).
 */
function allowedRepliesFile(file: string, folders: string[]): string {
  const refuse = (): ApplicationFailure =>
    ApplicationFailure.nonRetryable(
      `replies_file ${JSON.stringify(file)} is outside the folders replies may be read from (${folders.join(', ')}); put the file there or add its folder to ${REPLIES_DIR_ENV}`,
      'InvalidConfig',
    );
  const [first] = folders;
  if (first === undefined) throw refuse();
  const resolved = path.resolve(first, file);
  if (!folders.some((folder) => isInside(resolved, folder))) throw refuse();
  let real: string;
  try {
    real = realpathSync(resolved);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw ApplicationFailure.nonRetryable(`cannot read replies_file ${resolved}: ${reason}`, 'InvalidConfig');
  }
  if (!folders.some((folder) => isInside(real, realFolder(folder)))) throw refuse();
  return real;
}

/** A folder's real path; the folder as given when it does not exist (nothing can be inside it then). */
function realFolder(folder: string): string {
  try {
    return realpathSync(folder);
  } catch {
    return folder;
  }
}

/** True when `file` is strictly below `folder` (both absolute). */
function isInside(file: string, folder: string): boolean {
  const relative = path.relative(folder, file);
  return relative !== '' && relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative);
}

function parseReplies(value: unknown, where: string, failureType: string): AgentReplies {
  const parsed = RepliesSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
  throw ApplicationFailure.nonRetryable(
    `${where} must map stage names to lists of replies (${issues.join('; ')})`,
    failureType,
  );
}

function normaliseReply(reply: Json, key: string): FullReply {
  if (typeof reply === 'string') return { text: reply };
  if (
    typeof reply === 'object' &&
    reply !== null &&
    !Array.isArray(reply) &&
    '$reply' in reply &&
    Object.keys(reply).length === 1
  ) {
    const full = FullReplySchema.safeParse(reply.$reply);
    if (full.success) return full.data;
    const issues = full.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
    throw ApplicationFailure.nonRetryable(
      `agent reply for ${key}: $reply must be { text?, output?, inputTokens?, outputTokens? } (${issues.join('; ')})`,
      'InvalidInput',
    );
  }
  return { output: reply };
}

/** Text, validated output or the validation issues, as a real provider would return them. */
function shapeReply(
  reply: FullReply,
  outputSchema: Json | undefined,
): Pick<AgentResult, 'text' | 'output' | 'invalidOutput'> {
  const text = reply.text ?? (reply.output !== undefined ? JSON.stringify(reply.output) : '');
  if (outputSchema === undefined) return { text };
  let schema: z.ZodType;
  try {
    schema = compileOutputSchema(outputSchema);
  } catch (error) {
    throw ApplicationFailure.nonRetryable((error as Error).message, 'InvalidConfig');
  }
  const checked = reply.output !== undefined ? validateValue(reply.output, schema) : validateReply(text, schema);
  return checked.ok ? { text, output: checked.value } : { text, invalidOutput: { issues: checked.issues, raw: text } };
}

type SchemaNode = { [key: string]: Json };

/**
 * A minimal value that matches a JSON Schema: required properties only, empty strings and arrays (padded to
 * `minLength` / `minItems`), zero clamped into numeric bounds, `false`, the first `const`, `enum` or
 * `anyOf` / `oneOf` branch, merged `allOf`, local `$ref`s followed. `pattern` is not honoured.
 */
export function exampleOf(schema: Json, root: Json = schema, depth = 0): Json {
  if (depth > 32 || typeof schema !== 'object' || schema === null || Array.isArray(schema)) return null;
  const node: SchemaNode = schema;
  if (typeof node.$ref === 'string') return exampleOf(resolvePointer(root, node.$ref), root, depth + 1);
  if ('const' in node) return node.const ?? null;
  if (Array.isArray(node.enum) && node.enum.length > 0) return node.enum[0]!;
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = node[key];
    if (Array.isArray(branches) && branches.length > 0) return exampleOf(branches[0]!, root, depth + 1);
  }
  if (Array.isArray(node.allOf)) {
    const parts = node.allOf.map((part) => exampleOf(part, root, depth + 1));
    const objects = parts.filter((p): p is SchemaNode => typeof p === 'object' && p !== null && !Array.isArray(p));
    if (objects.length === parts.length && parts.length > 0) return Object.assign({}, ...objects) as Json;
    return parts[0] ?? null;
  }
  switch (typeOf(node)) {
    case 'object': {
      const properties = isNode(node.properties) ? node.properties : {};
      const required = Array.isArray(node.required)
        ? node.required.filter((r): r is string => typeof r === 'string')
        : [];
      return Object.fromEntries(required.map((name) => [name, exampleOf(properties[name] ?? {}, root, depth + 1)]));
    }
    case 'array': {
      const count = typeof node.minItems === 'number' ? node.minItems : 0;
      const prefix = Array.isArray(node.prefixItems) ? node.prefixItems : [];
      return Array.from({ length: count }, (_, i) => exampleOf(prefix[i] ?? node.items ?? {}, root, depth + 1));
    }
    case 'string':
      return exampleString(node);
    case 'integer':
    case 'number':
      return exampleNumber(node, typeOf(node) === 'integer');
    case 'boolean':
      return false;
    default:
      return null;
  }
}

function typeOf(node: SchemaNode): string | undefined {
  const type = node.type;
  if (typeof type === 'string') return type;
  if (Array.isArray(type)) {
    const named = type.filter((t): t is string => typeof t === 'string');
    return named.find((t) => t !== 'null') ?? named[0];
  }
  if (node.properties !== undefined || node.required !== undefined) return 'object';
  if (node.items !== undefined || node.prefixItems !== undefined) return 'array';
  return undefined;
}

const FORMAT_EXAMPLES: Record<string, string> = {
  'date-time': '1970-01-01T00:00:00Z',
  date: '1970-01-01',
  time: '00:00:00Z',
  email: 'scripted@example.com',
  uri: 'https://example.com/',
  url: 'https://example.com/',
  uuid: '00000000-0000-4000-8000-000000000000',
};

function exampleString(node: SchemaNode): string {
  const formatted = typeof node.format === 'string' ? FORMAT_EXAMPLES[node.format] : undefined;
  if (formatted !== undefined) return formatted;
  return 'x'.repeat(typeof node.minLength === 'number' ? node.minLength : 0);
}

function exampleNumber(node: SchemaNode, integer: boolean): number {
  let value = 0;
  if (typeof node.minimum === 'number' && value < node.minimum) value = node.minimum;
  if (typeof node.exclusiveMinimum === 'number' && value <= node.exclusiveMinimum) value = node.exclusiveMinimum + 1;
  if (typeof node.maximum === 'number' && value > node.maximum) value = node.maximum;
  if (typeof node.exclusiveMaximum === 'number' && value >= node.exclusiveMaximum) value = node.exclusiveMaximum - 1;
  return integer ? Math.ceil(value) : value;
}

function isNode(value: Json | undefined): value is SchemaNode {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Follows a local JSON pointer (`#/$defs/thing`); anything else resolves to the empty schema. */
function resolvePointer(root: Json, ref: string): Json {
  if (!ref.startsWith('#')) return {};
  let current: Json | undefined = root;
  for (const raw of ref
    .slice(1)
    .split('/')
    .filter((part) => part.length > 0)) {
    const part = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    current = isNode(current) ? current[part] : Array.isArray(current) ? current[Number(part)] : undefined;
  }
  return current ?? {};
}
