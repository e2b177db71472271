/**
 * Checks an edited artefact against a stage's output schema (JSON Schema 2020-12) before a reviewer's edit is
 * sent, checks that a spec's `output_schema:` compiles (spec validation: clients, `treadle validate`, the
 * worker's prepare step), and parses the JSON text a reviewer typed with the line and column of a syntax error.
 * Never in workflow code: Ajv must not reach the workflow bundle (test/unit/workflow-lint.test.ts).
 */
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { canonicalJson, sha256Hex } from '../model/hashing';

/** One way a value breaks its schema: a JSON Pointer to the offending place (`''` for the whole) and why. */
export interface SchemaProblem {
  path: string;
  message: string;
}

const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats(ajv);
/**
 * The spec's check: unknown keywords and formats are errors (a misspelt `requird` would otherwise accept
 * anything); the type-coherence rules stay off, they refuse valid schemas. No `loadSchema`: nothing is fetched.
 */
const strictAjv = new Ajv2020({
  allErrors: true,
  strictSchema: true,
  strictNumbers: true,
  strictTypes: false,
  strictTuples: false,
  strictRequired: false,
});
addFormats(strictAjv);

/**
 * What compiling a schema gave, by the hash of its canonical JSON (the same whatever the key order): a page that
 * checks every keystroke compiles a schema once, and so does validation, which runs on every worker prepare step,
 * CLI start and fan-out child (10,000 children of one spec share its schemas).
 */
interface CompiledSchema {
  /** The lenient compile, for checking values; set on first use. */
  validate?: ValidateFunction;
  /** The strict compile's verdict, for specs: why the schema cannot be used, or null when it can; set on first use. */
  problem?: string | null;
}
const compiled = new Map<string, CompiledSchema>();
const MAX_COMPILED = 200;

/** The cache entry of `schema`, the oldest dropped past {@link MAX_COMPILED}; a schema that is not JSON is not kept. */
function compiledEntry(schema: unknown): CompiledSchema {
  let key: string;
  try {
    key = sha256Hex(canonicalJson(schema));
  } catch {
    return {};
  }
  let entry = compiled.get(key);
  if (!entry) {
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
    entry = {};
    compiled.set(key, entry);
  }
  return entry;
}

function validatorFor(schema: unknown): ValidateFunction {
  const entry = compiledEntry(schema);
  if (entry.validate) return entry.validate;
  try {
    return (entry.validate = ajv.compile(schema as object));
  } catch (error) {
    throw new Error(`the output schema does not compile: ${(error as Error).message}`, { cause: error });
  } finally {
    forget(ajv, schema);
  }
}

/**
 * The problems of `value` against `schema` (empty when it conforms). An absent schema (`undefined`, `null`,
 * `true`) accepts any JSON. Throws when the schema itself does not compile.
 */
export function checkOutput(schema: unknown, value: unknown): SchemaProblem[] {
  if (schema === undefined || schema === null || schema === true) return [];
  const validate = validatorFor(schema);
  if (validate(value)) return [];
  return (validate.errors ?? []).map((error) => ({
    path: error.instancePath,
    message:
      error.keyword === 'additionalProperties'
        ? `${error.message ?? 'is not allowed'}: ${String((error.params as { additionalProperty?: string }).additionalProperty)}`
        : (error.message ?? error.keyword),
  }));
}

/**
 * Why `schema` cannot be a stage's output schema (it does not compile under the strict rules, or it refers to
 * a document it does not contain), or undefined when it compiles.
 */
export function outputSchemaProblem(schema: object): string | undefined {
  const entry = compiledEntry(schema);
  if (entry.problem === undefined) entry.problem = strictCompileProblem(schema) ?? null;
  return entry.problem ?? undefined;
}

/** {@link outputSchemaProblem}, uncached. */
function strictCompileProblem(schema: object): string | undefined {
  try {
    // Ajv's compile reads `$id` before it checks the schema against its meta-schema, and fails on one that is not
    // a string with a bare TypeError: check first, so the problem says which keyword is wrong.
    if (!strictAjv.validateSchema(schema))
      throw new Error(`schema is invalid: ${strictAjv.errorsText(strictAjv.errors)}`);
    strictAjv.compile(schema);
    return undefined;
  } catch (error) {
    // Ajv names places in the schema `data/…` (the schema as its meta-schema's data): say them as JSON Pointers.
    const message = (error as Error).message.replace(/^strict mode: /, '').replace(/\bdata\//g, '/');
    return /can't resolve reference/.test(message)
      ? `${message} (references to other documents are not fetched: put the definition under $defs)`
      : `does not compile: ${message}`;
  } finally {
    forget(strictAjv, schema);
  }
}

/**
 * Drops `schema` from `instance` after a compile: two schemas may share a `$id` (a schema's next version), so the
 * instance keeps neither by it. Ajv's `removeSchema` throws for an `$id` that is truthy but not a string (which its
 * `compile` refused before keeping the schema) and for a boolean schema (the instance keeps at most the two), so
 * those are left alone: a throw in a `finally` would replace the problem being reported.
 */
function forget(instance: Ajv2020, schema: unknown): void {
  if (typeof schema !== 'object' || schema === null) return;
  const id = (schema as { $id?: unknown }).$id;
  if (id && typeof id !== 'string') return;
  instance.removeSchema(schema);
}

/** JSON text that does not parse, with where (1-based line and column) when the parser says. */
export class JsonTextError extends Error {
  constructor(
    message: string,
    readonly line?: number,
    readonly column?: number,
  ) {
    super(message);
    this.name = 'JsonTextError';
  }
}

/** Parses JSON text a reviewer typed; a syntax error says its line and column. */
export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    const reason = (error as Error).message;
    // Node 20's messages do not always carry a position: find the first bad character by scanning.
    const offset = Number(/position (\d+)/.exec(reason)?.[1] ?? syntaxErrorOffset(text));
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    const column = offset - before.lastIndexOf('\n');
    throw new JsonTextError(`not JSON at line ${line}, column ${column}: ${reason}`, line, column);
  }
}

/** The offset of the first character that cannot continue valid JSON text (a small recursive-descent scan). */
function syntaxErrorOffset(text: string): number {
  let i = 0;
  const fail = (): never => {
    throw i;
  };
  const space = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const literal = (word: string): void => {
    for (const char of word) {
      if (text[i] !== char) fail();
      i++;
    }
  };
  const value = (): void => {
    space();
    const char = text[i];
    if (char === '{') {
      i++;
      space();
      if (text[i] === '}') return void i++;
      for (;;) {
        space();
        if (text[i] !== '"') fail();
        string();
        space();
        if (text[i] !== ':') fail();
        i++;
        value();
        space();
        if (text[i] === '}') return void i++;
        if (text[i] !== ',') fail();
        i++;
      }
    } else if (char === '[') {
      i++;
      space();
      if (text[i] === ']') return void i++;
      for (;;) {
        value();
        space();
        if (text[i] === ']') return void i++;
        if (text[i] !== ',') fail();
        i++;
      }
    } else if (char === '"') string();
    else if (char === 't') literal('true');
    else if (char === 'f') literal('false');
    else if (char === 'n') literal('null');
    else {
      const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
      if (!match) fail();
      i += match![0].length;
    }
  };
  const string = (): void => {
    i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i]! < ' ') fail();
      i += text[i] === '\\' ? 2 : 1;
    }
    if (i >= text.length) fail();
    i++;
  };
  try {
    value();
    space();
    return i;
  } catch (offset) {
    return offset as number;
  }
}
