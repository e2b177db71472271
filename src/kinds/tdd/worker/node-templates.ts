/**
 * The TDD nodes' prompts (seed 001): renders a node's Jinja template (`../prompt-templates.ts`) with the
 * node's input.
 *
 * The six templates are Treadle's own, copied from the seed; they are never taken from a spec file or a
 * request. That is why they may run on nunjucks, a full Jinja-like engine that can reach JavaScript: spec
 * templates are untrusted and go through the locked-down Liquid engine of `src/pipelines/llm/template.ts`.
 * Nothing here ever compiles a template that is not in `TDD_TEMPLATES`.
 *
 * nunjucks is made to render these templates as Jinja2 would: it gets Jinja2's `map` filter, and every
 * `{% if %}`/`{% elif %}` condition is tested with Python's truthiness (an empty list or object is false,
 * where JavaScript would call it true). A value printed with `{{ }}` that is null or missing prints as
 * nothing, as Jinja2's Undefined does (Jinja2 would print `None` for a null).
 */
import nunjucks from 'nunjucks';
import type {
  Critique,
  ImplResult,
  InitWorkPayload,
  MergeComplete,
  MergeEvent,
  NodeInfo,
  ParentContext,
  Spec,
  TDDApproval,
  TddNodeName,
  TestsReadyPayload,
} from '../spec';
import { TDD_TEMPLATES } from '../prompt-templates';

// ---------------------------------------------------------------------------------------------------------
// Template variables: each node's Input type in the seed, plus the node memory its template reads.

/** Scaffold's variables: the seed's `ScaffoldInput`. */
export interface ScaffoldVars {
  spec: Spec;
  /** Present for a child node only. */
  parentContext?: ParentContext | null;
}

/** TDDWriteTests' variables: the seed's `TDDWriteTestsInput` plus `TDDMem.coveredCriteria`. */
export interface TDDWriteTestsVars {
  spec: Spec;
  scaffold: InitWorkPayload;
  /** Criterion ids that already have passing tests. */
  coveredCriteria: string[];
}

/** Impl's variables: the seed's `ImplInput`. */
export interface ImplVars {
  spec: Spec;
  scaffold: InitWorkPayload;
  testsReady: TestsReadyPayload;
  /** The children's merges, when the node has children. */
  childMerges?: MergeComplete[] | null;
  /** 1-based; the orchestrator counts it. */
  attemptCount: number;
  /** The reviewer's critiques after `MoreTests`. */
  critiqueList?: Critique[] | null;
}

/** TDDReviewImpl's variables: the seed's `TDDReviewImplInput` (`diff` is the diff since the scaffold). */
export interface TDDReviewImplVars {
  spec: Spec;
  scaffold: InitWorkPayload;
  implResult: ImplResult;
  diff: string;
}

/** Merger's variables: the seed's `MergerInput`. */
export interface MergerVars {
  parentNode: NodeInfo;
  childNode: NodeInfo;
  tddApproval: TDDApproval;
  contractSuite: string;
}

/** Rebaser's variables: the seed's `RebaserInput`. */
export interface RebaserVars {
  node: NodeInfo;
  parentBranch: string;
  newParentHead: string;
  mergeEvent: MergeEvent;
}

/** Each node's template variables, by node name. */
export interface NodeTemplateVars {
  scaffold: ScaffoldVars;
  tddWriteTests: TDDWriteTestsVars;
  impl: ImplVars;
  tddReviewImpl: TDDReviewImplVars;
  merger: MergerVars;
  rebaser: RebaserVars;
}

// ---------------------------------------------------------------------------------------------------------
// Rendering

/** Name of the filter that gives `{% if %}` Python's truthiness; {@link jinjaConditions} inserts it. */
const TRUTHY_FILTER = 'jinja_truthy';
/**
 * The conditions the seed's templates use: a variable path, or a path compared with a string. Anything else
 * (`not`, `and`, `or`, inline `if`) would need truthiness inside the expression, so it is refused.
 */
const SIMPLE_CONDITION = /^[A-Za-z_][\w.]*(?:\s*==\s*"[^"\\]*")?$/;

/** Python's `bool()` for JSON-like values: empty strings, lists, objects, 0 and None are false. */
export function jinjaTruthy(value: unknown): boolean {
  if (value === null || value === undefined) return false;
  if (typeof value === 'string' || Array.isArray(value)) return value.length > 0;
  if (typeof value === 'number') return value !== 0;
  if (typeof value === 'boolean') return value;
  if (value instanceof Map || value instanceof Set) return value.size > 0;
  // A plain object is a dict (empty is false); any other object, like a Python object, is true.
  if (typeof value === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(value)))
    return Object.keys(value).length > 0;
  return true;
}

/**
 * Rewrites each `{% if X %}` / `{% elif X %}` of a template to `{% if (X) | jinja_truthy %}`: nunjucks
 * tests conditions with JavaScript's truthiness, under which `{% if critiqueList %}` would show an empty
 * section for `[]`. The template texts themselves stay verbatim; only what nunjucks compiles is rewritten.
 */
export function jinjaConditions(template: string, name = 'template'): string {
  return template.replace(
    /\{%(-?)(\s*)(if|elif)\s+([\s\S]*?)\s*(-?)%\}/g,
    (_tag, open: string, space: string, keyword: string, condition: string, close: string) => {
      if (!SIMPLE_CONDITION.test(condition))
        throw new Error(
          `${name}: condition "${condition}" is beyond the Jinja2 subset these templates are rendered with`,
        );
      return `{%${open}${space}${keyword} (${condition}) | ${TRUTHY_FILTER} ${close}%}`;
    },
  );
}

/** nunjucks hands keyword arguments to a filter as a last object carrying this marker. */
function isKeywordArgs(value: unknown): value is Record<string, unknown> & { __keywords: true } {
  return typeof value === 'object' && value !== null && Object.prototype.hasOwnProperty.call(value, '__keywords');
}

/** What Jinja2 iterates over: a list's items, a string's characters, a mapping's keys; nothing for null. */
function iterationOf(value: unknown): unknown[] {
  if (value === null || value === undefined) return [];
  if (Array.isArray(value)) return value;
  if (typeof value === 'string') return [...value];
  if (value instanceof Map || value instanceof Set) return [...value.keys()];
  if (typeof value === 'object') return Object.keys(value);
  throw new Error(`map: cannot iterate over a ${typeof value}`);
}

/** Jinja2's attribute getter: a dotted path, digit segments index lists; own properties only. */
function attributeOf(item: unknown, path: string): unknown {
  let current = item;
  for (const part of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    const key = Array.isArray(current) && /^\d+$/.test(part) ? Number(part) : part;
    if (!Object.prototype.hasOwnProperty.call(current, key)) return undefined;
    current = (current as Record<string | number, unknown>)[key];
  }
  return current;
}

/**
 * Jinja2's `map(attribute='a.b', default=x)`, which nunjucks lacks: the attribute of each item (a missing one
 * gives `default`). `keywords` is the object nunjucks passes keyword arguments in. Jinja2's other form,
 * `map('filter')`, is not used by the templates and is refused.
 */
export function jinjaMap(value: unknown, keywords?: unknown): unknown[] {
  if (!isKeywordArgs(keywords) || keywords.attribute === undefined)
    throw new Error("map: only map(attribute='…') is supported");
  const path = String(keywords.attribute);
  return iterationOf(value).map((item) => {
    const found = attributeOf(item, path);
    return found === undefined ? keywords.default : found;
  });
}

function createEnvironment(): nunjucks.Environment {
  const env = new nunjucks.Environment(null, {
    autoescape: false,
    throwOnUndefined: false,
    trimBlocks: false,
    lstripBlocks: false,
  });
  env.addFilter(TRUTHY_FILTER, jinjaTruthy);
  env.addFilter('map', jinjaMap);
  return env;
}

const environment = createEnvironment();
const compiled = new Map<TddNodeName, nunjucks.Template>();

function templateOf(node: TddNodeName): nunjucks.Template {
  let template = compiled.get(node);
  if (!template) {
    template = new nunjucks.Template(jinjaConditions(TDD_TEMPLATES[node], node), environment, `${node}.jinja`, true);
    compiled.set(node, template);
  }
  return template;
}

/**
 * Renders a node's seed template with its variables, as Jinja2 would (see the module comment for the one
 * deliberate difference, null printing as nothing). Throws only if the variables lack what their type
 * requires (a list to join, say).
 */
export function renderNodeTemplate<N extends TddNodeName>(node: N, vars: NodeTemplateVars[N]): string {
  return templateOf(node).render({ ...vars });
}
