/**
 * Action types (seed 003 "Action types registry (extensible)"): what an approved request may do. Each type
 * is a name, a zod schema for its payload, an `execute` that honours the request's idempotency key, and a
 * one-line `summarize` for listings. The registry validates payloads when a request is created and again
 * right before execution, and names the known types (and a close one) for an unknown type.
 *
 * A registry carries one store (`Store`) that every action's context gets: the seed's five example types
 * (examples/task-list) write to a local task list, a user's own types may ignore it. No Temporal imports: the
 * approval activities call this through their `ActionCatalog` interface.
 */
import { type z } from 'zod';
import { closest } from '../../model/suggest';
import type { Json } from '../../model/shapes';
import { InvalidPayload, UnknownActionType } from './errors';

/** What an action's `execute` gets besides its payload. */
export interface ActionContext<Store = unknown> {
  /** Seed 003's `hash(runId + step + inputHash)`: the action's effect happens at most once per key. */
  idempotencyKey: string;
  /** The registry's store (the example actions' local task list). */
  store: Store;
  /** Aborted when the activity is cancelled; an action stops waiting, but never half-applies. */
  signal?: AbortSignal;
}

/**
 * One action type. `S` is its payload schema; `execute` and `summarize` get the parsed payload; `Store` is what
 * the registry's context carries.
 */
export interface ActionType<S extends z.ZodType = z.ZodType, Store = unknown> {
  /** snake_case, as approval stages name it (`action: create_task`, or an element's `action_type`). */
  name: string;
  /** One sentence for listings and docs. */
  description: string;
  payload: S;
  /**
   * Performs the action and returns a small JSON result (recorded with the request). Must honour
   * `ctx.idempotencyKey`: called again with the same key, it changes nothing and returns the same result.
   */
  execute(payload: z.output<S>, ctx: ActionContext<Store>): Promise<Json>;
  /** One line saying what the action will do, for approval listings. */
  summarize(payload: z.output<S>): string;
}

/** Defines an action type with its payload's type inferred from the schema. */
export function defineActionType<S extends z.ZodType, Store = unknown>(
  type: ActionType<S, Store>,
): ActionType<S, Store> {
  return type;
}

/** Longest summary kept; approval listings show one line each. */
export const MAX_SUMMARY_CHARS = 200;

const ACTION_NAME = /^[a-z][a-z0-9_]*$/;

/** The registered action types, and the checks around them. Structurally an approval `ActionCatalog`. */
export class ActionRegistry<Store = unknown> {
  private readonly types = new Map<string, ActionType<z.ZodType, Store>>();
  /** The store every action's context carries. */
  readonly store: Store;

  constructor(options: { store: Store }) {
    this.store = options.store;
  }

  /** Adds a type; throws when the name is taken or not snake_case. */
  register<S extends z.ZodType>(type: ActionType<S, Store>): this {
    if (!ACTION_NAME.test(type.name))
      throw new TypeError(`action type name "${type.name}" must be snake_case (a-z, 0-9, _), like create_task`);
    if (this.types.has(type.name)) throw new TypeError(`action type "${type.name}" is registered already`);
    this.types.set(type.name, type as unknown as ActionType<z.ZodType, Store>);
    return this;
  }

  /** True when `name` is registered. */
  has(name: string): boolean {
    return this.types.has(name);
  }

  /** The type called `name`; throws {@link UnknownActionType} naming the known types and a close one. */
  get(name: string): ActionType<z.ZodType, Store> {
    const type = this.types.get(name);
    if (!type) throw new UnknownActionType(this.unknownTypeMessage(name));
    return type;
  }

  /** Registered names, sorted. */
  names(): string[] {
    return [...this.types.keys()].sort();
  }

  /**
   * Every problem with `payload` for the type, each `path: message` with paths from `payload`
   * (`payload.title: required`, `payload.tasks[2].due: …`); none when valid. An unknown type is one
   * problem, `action_type: unknown action type "…" (did you mean "…"?) (known: …)`.
   */
  validatePayload(type: string, payload: unknown): string[] {
    const actionType = this.types.get(type);
    if (!actionType) return [`action_type: ${this.unknownTypeMessage(type)}`];
    const parsed = actionType.payload.safeParse(payload, { error: friendlyMessage });
    return parsed.success ? [] : problemsOf(parsed.error.issues, actionType.payload);
  }

  /** The parsed payload (defaults applied); throws {@link UnknownActionType} or {@link InvalidPayload} with every problem. */
  parsePayload(type: string, payload: unknown): unknown {
    const actionType = this.get(type);
    const parsed = actionType.payload.safeParse(payload, { error: friendlyMessage });
    if (parsed.success) return parsed.data;
    const problems = problemsOf(parsed.error.issues, actionType.payload);
    throw new InvalidPayload(`invalid ${type} payload: ${problems.join('; ')}`, problems);
  }

  /** The type's one-line summary of the payload, at most {@link MAX_SUMMARY_CHARS}; a short JSON excerpt when the payload is invalid. */
  summarize(type: string, payload: Json): string {
    const actionType = this.types.get(type);
    const parsed = actionType?.payload.safeParse(payload);
    const text =
      actionType && parsed?.success ? actionType.summarize(parsed.data) : `${type} ${JSON.stringify(payload)}`;
    return oneLine(text, MAX_SUMMARY_CHARS);
  }

  /**
   * Validates the payload again (the registry may have changed since the request was made) and executes
   * it with the key: at most one effect per key, the same result on every call.
   */
  async execute(
    type: string,
    payload: unknown,
    context: { idempotencyKey: string; signal?: AbortSignal },
  ): Promise<Json> {
    if (typeof context.idempotencyKey !== 'string' || context.idempotencyKey === '')
      throw new TypeError(`${type}: an idempotency key is required`);
    const parsed = this.parsePayload(type, payload);
    return this.get(type).execute(parsed, {
      idempotencyKey: context.idempotencyKey,
      store: this.store,
      ...(context.signal ? { signal: context.signal } : {}),
    });
  }

  private unknownTypeMessage(name: string): string {
    const known = this.names();
    const close = closest(name, known);
    return `unknown action type "${name}"${close ? ` (did you mean "${close}"?)` : ''} (known: ${known.length > 0 ? known.join(', ') : 'none'})`;
  }
}

// ---- problems and summaries ------------------------------------------------------------------------

function oneLine(value: string, max: number): string {
  const line = value.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

type Issue = z.core.$ZodIssue;
type RawIssue = z.core.$ZodRawIssue;

/** Default wording for zod's issues (a schema's own message wins over it). */
function friendlyMessage(issue: RawIssue): string | undefined {
  const raw = issue as RawIssue & {
    expected?: string;
    origin?: string;
    minimum?: number | bigint;
    maximum?: number | bigint;
    values?: unknown[];
    format?: string;
  };
  if ((raw.code === 'invalid_type' || raw.code === 'invalid_value') && raw.input === undefined) return 'required';
  switch (raw.code) {
    case 'invalid_type':
      return `must be ${article(raw.expected ?? 'value')}, got ${describe(raw.input)}`;
    case 'too_small':
      if (raw.origin === 'string')
        return Number(raw.minimum) === 1 ? 'must not be empty' : `must be at least ${raw.minimum} characters`;
      if (raw.origin === 'array')
        return `must have at least ${raw.minimum} item${Number(raw.minimum) === 1 ? '' : 's'}`;
      return `must be at least ${raw.minimum}`;
    case 'too_big':
      if (raw.origin === 'string') return `must be at most ${raw.maximum} characters`;
      if (raw.origin === 'array') return `must have at most ${raw.maximum} items`;
      return `must be at most ${raw.maximum}`;
    case 'invalid_value':
      return `must be one of ${(raw.values ?? []).map((v) => JSON.stringify(v)).join(', ')}, got ${JSON.stringify(raw.input)}`;
    case 'invalid_format':
      if (raw.format === 'date') return 'must be a date such as 2026-03-02';
      if (raw.format === 'email') return 'must be an email address';
      return undefined;
    default:
      return undefined;
  }
}

function article(noun: string): string {
  return `${/^[aeiou]/.test(noun) ? 'an' : 'a'} ${noun}`;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)}`;
}

/** `path: message` for every issue; unknown fields one problem each, with the fields the object takes. */
function problemsOf(issues: readonly Issue[], schema: z.ZodType): string[] {
  const problems: string[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      const allowed = fieldsAt(schema, issue.path);
      for (const key of issue.keys) {
        const close = closest(key, allowed);
        problems.push(
          `${pathText([...issue.path, key])}: unknown field${close ? ` (did you mean "${close}"?)` : ''}${allowed.length > 0 ? ` (allowed: ${allowed.join(', ')})` : ''}`,
        );
      }
    } else {
      problems.push(`${pathText(issue.path)}: ${issue.message}`);
    }
  }
  return [...new Set(problems)];
}

function pathText(path: readonly PropertyKey[]): string {
  let out = 'payload';
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : `.${String(key)}`;
  return out;
}

/** The field names of the object schema at `path` (through arrays, optionals and refinements). */
function fieldsAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let current: unknown = schema;
  for (const key of [...path, undefined]) {
    // Unwrap wrappers until an object or array.
    for (let guard = 0; guard < 10; guard++) {
      const def = (current as { def?: { type?: string; innerType?: unknown; element?: unknown } }).def;
      if (def?.type === 'optional' || def?.type === 'nullable' || def?.type === 'default' || def?.type === 'pipe')
        current = def.innerType ?? (def as { in?: unknown }).in;
      else break;
    }
    if (key === undefined) break;
    const def = (current as { def?: { type?: string; element?: unknown; shape?: Record<string, unknown> } }).def;
    if (typeof key === 'number' && def?.type === 'array') current = def.element;
    else if (typeof key === 'string' && def?.type === 'object') current = def.shape?.[key];
    else return [];
  }
  const shape = (current as { def?: { type?: string; shape?: Record<string, unknown> } }).def;
  return shape?.type === 'object' && shape.shape ? Object.keys(shape.shape) : [];
}
