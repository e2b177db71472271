/**
 * The scorers of an evaluation (`treadle eval run --scorer`): each turns a case's output into a score from 0 to 1.
 * A scorer that cannot score (a schema that does not compile, a judge's malformed reply, a module that throws)
 * throws, and the case's score is null with the reason: it never stops the run. Scorers run in the process that
 * runs the evaluation (the CLI), never on a worker. Loaded on first use (./lazy-modules.ts): it loads the
 * Anthropic SDK, which no other client call needs.
 */
import Anthropic from '@anthropic-ai/sdk';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import type { Json } from '../model/shapes';
import { outputSchemaChecks } from '../agents/output-schema-checks-lazy';

/** What a scorer sees of one case on one variant. */
export interface ScoredCase {
  id: string;
  variant: string;
  input: Json;
  expected?: Json;
  /** The output stage's artefact (blob references followed); undefined when the stage produced none. */
  output: Json | undefined;
  outcome: 'completed' | 'failed' | 'cancelled';
}

/** A scorer: a name, the score a case must reach to pass, and the scoring itself (0..1, or a throw saying why not). */
export interface EvalScorer {
  name: string;
  passMark: number;
  score(scored: ScoredCase): Promise<number>;
}

/** `exact`: 1 when the output deep-equals the case's `expected`, else 0; a case without `expected` cannot be scored. */
export function exactScorer(): EvalScorer {
  return {
    name: 'exact',
    passMark: 1,
    score: async (c) => {
      if (c.expected === undefined) throw new Error('the case has no "expected" to compare with');
      return isDeepStrictEqual(c.output, c.expected) ? 1 : 0;
    },
  };
}

/** `json-schema`: 1 when the output is valid against the schema in `file` (JSON Schema 2020-12), else 0. */
export function jsonSchemaScorer(file: string): EvalScorer {
  const schema = readJson(file);
  const checks = outputSchemaChecks();
  const problem = typeof schema === 'object' && schema !== null ? checks.outputSchemaProblem(schema) : undefined;
  if (problem !== undefined) throw new Error(`${file} is not a usable JSON schema: ${problem}`);
  return {
    name: 'json-schema',
    passMark: 1,
    score: async (c) => (c.output !== undefined && checks.checkOutput(schema, c.output).length === 0 ? 1 : 0),
  };
}

/** Settings of the `llm-judge` scorer; the key and address as the anthropic agent reads them. */
export interface JudgeOptions {
  model?: string;
  /** What the judge is told to look for (default: whether the output meets the expected answer and the input). */
  rubric?: string;
  apiKey?: string;
  baseURL?: string;
  passMark?: number;
}

/** The judge's default model, the anthropic agent's (src/agents/anthropic.ts). */
export const JUDGE_DEFAULT_MODEL = 'claude-sonnet-4-6';
const JUDGE_TOOL = 'record_score';
const JudgeReply = z.object({ score: z.number().min(0).max(1), reason: z.string() });
const DEFAULT_RUBRIC = 'Judge whether the output does what the input asks and agrees with the expected answer.';
const JUDGE_MAX_TOKENS = 512;

/**
 * `llm-judge`: asks a model through `@anthropic-ai/sdk`, as the anthropic agent does (`ANTHROPIC_API_KEY`,
 * `ANTHROPIC_BASE_URL`, `TREADLE_MODEL`), to score the output with its `record_score` tool. A reply without the
 * tool, or whose score is not a number from 0 to 1, is the case's null score with the reason.
 */
export function llmJudgeScorer(options: JudgeOptions = {}, env: NodeJS.ProcessEnv = process.env): EvalScorer {
  const apiKey = options.apiKey || env.ANTHROPIC_API_KEY;
  if (!apiKey) throw new Error('the llm-judge scorer needs an API key: set ANTHROPIC_API_KEY');
  const client = new Anthropic({
    apiKey,
    // null, not undefined: the SDK would read ANTHROPIC_BASE_URL itself, bypassing `env`.
    baseURL: options.baseURL || env.ANTHROPIC_BASE_URL || null,
    maxRetries: 2,
  });
  const model = options.model || env.TREADLE_MODEL || JUDGE_DEFAULT_MODEL;
  const rubric = options.rubric ?? DEFAULT_RUBRIC;
  return {
    name: 'llm-judge',
    passMark: options.passMark ?? 0.5,
    score: async (c) => {
      const message = await client.messages.create({
        model,
        max_tokens: JUDGE_MAX_TOKENS,
        system: `You grade the output of an AI pipeline. ${rubric} Give a score from 0 (wrong) to 1 (right) with ${JUDGE_TOOL}.`,
        messages: [{ role: 'user', content: judgePrompt(c) }],
        tools: [
          {
            name: JUDGE_TOOL,
            description: 'Records the score of the output.',
            input_schema: {
              type: 'object',
              properties: { score: { type: 'number', minimum: 0, maximum: 1 }, reason: { type: 'string' } },
              required: ['score', 'reason'],
            },
          },
        ],
        tool_choice: { type: 'tool', name: JUDGE_TOOL },
      });
      const use = message.content.find((block) => block.type === 'tool_use' && block.name === JUDGE_TOOL);
      if (!use || use.type !== 'tool_use') throw new Error(`the judge replied without ${JUDGE_TOOL}`);
      const parsed = JudgeReply.safeParse(use.input);
      if (!parsed.success)
        throw new Error(
          `the judge's reply is malformed: ${parsed.error.issues
            .slice(0, 3)
            .map((i) => `${i.path.join('.') || 'reply'}: ${i.message}`)
            .join('; ')}`,
        );
      return parsed.data.score;
    },
  };
}

function judgePrompt(c: ScoredCase): string {
  const show = (value: Json | undefined): string => (value === undefined ? '(none)' : JSON.stringify(value, null, 2));
  return [
    `Input:\n${show(c.input)}`,
    ...(c.expected !== undefined ? [`Expected:\n${show(c.expected)}`] : []),
    `Output (the pipeline ${c.outcome}):\n${show(c.output)}`,
  ].join('\n\n');
}

/** What a scorer module of the evaluator's own exports. */
interface ScorerModule {
  score?: (scored: ScoredCase) => number | { score: number; reason?: string } | Promise<number | { score: number }>;
  passMark?: number;
}

/**
 * A scorer of the evaluator's own: a module (`./my-scorer.js`, resolved from `cwd`) exporting `score(case)`, which
 * returns a number from 0 to 1 or `{ score }` (sync or async), and optionally `passMark` (default 0.5).
 */
export async function moduleScorer(file: string, cwd = process.cwd()): Promise<EvalScorer> {
  const resolved = path.resolve(cwd, file);
  let loaded: ScorerModule & { default?: ScorerModule };
  try {
    loaded = (await import(pathToFileURL(resolved).href)) as ScorerModule & { default?: ScorerModule };
  } catch (error) {
    throw new Error(`cannot load the scorer ${file}: ${(error as Error).message}`);
  }
  const scorer = typeof loaded.score === 'function' ? loaded : loaded.default;
  if (typeof scorer?.score !== 'function') throw new Error(`the scorer ${file} exports no score(case) function`);
  const scoreOf = scorer.score;
  return {
    name: path.basename(file),
    passMark: typeof scorer.passMark === 'number' ? scorer.passMark : 0.5,
    score: async (c) => {
      const result = await scoreOf(c);
      const value = typeof result === 'number' ? result : (result as { score?: unknown } | null)?.score;
      if (typeof value !== 'number' || !(value >= 0 && value <= 1))
        throw new Error(`the scorer returned ${JSON.stringify(result)}, not a score from 0 to 1`);
      return value;
    },
  };
}

/** How `--scorer` names a scorer, with its settings. */
export interface ScorerChoice {
  /** `exact`, `json-schema`, `llm-judge`, or a module's path (`./my-scorer.js`). */
  scorer: string;
  schemaFile?: string;
  judge?: JudgeOptions;
  /** The pass mark instead of the scorer's own. */
  passMark?: number;
}

/** The scorer a choice names, ready to score; throws an Error saying what is missing or wrong. */
export async function scorerFor(choice: ScorerChoice, cwd = process.cwd()): Promise<EvalScorer> {
  let scorer: EvalScorer;
  if (choice.scorer === 'exact') scorer = exactScorer();
  else if (choice.scorer === 'json-schema') {
    if (!choice.schemaFile) throw new Error('the json-schema scorer needs --schema <file>');
    scorer = jsonSchemaScorer(path.resolve(cwd, choice.schemaFile));
  } else if (choice.scorer === 'llm-judge') scorer = llmJudgeScorer(choice.judge);
  else if (/[/\\]|\.[cm]?js$/.test(choice.scorer)) scorer = await moduleScorer(choice.scorer, cwd);
  else
    throw new Error(`unknown scorer "${choice.scorer}" (exact, json-schema, llm-judge, or a module: ./my-scorer.js)`);
  return choice.passMark !== undefined ? { ...scorer, passMark: choice.passMark } : scorer;
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as unknown;
  } catch (error) {
    throw new Error(`cannot read the schema ${file}: ${(error as Error).message}`);
  }
}
