/** Parsing the CLI's arguments (numbers, `--input`) and listing problems the way every CLI error does. */
import { InvalidArgumentError } from 'commander';
import { parseDuration } from '../model/duration';
import { fairnessKeyProblem, fairnessWeightProblem, priorityProblem } from '../model/priority';
import type { Json } from '../model/shapes';
import { oneLine, readJsonFile } from '../pipelines/catalog';

/** A commander argument parser for whole numbers in [min, max], with the message shown otherwise. */
export const wholeNumber =
  (min: number, message: string, max = Number.MAX_SAFE_INTEGER) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(message);
    return n;
  };
/** A commander argument parser for TCP ports. */
export const port = wholeNumber(1, 'must be a port number', 65_535);

/** A commander argument parser for durations (`30m`, `24h`, `7d`, `1h30m`): their milliseconds. */
export function duration(value: string): number {
  const parsed = parseDuration(value);
  if ('error' in parsed) throw new InvalidArgumentError(parsed.error);
  return parsed.ms;
}

/** A commander argument parser for `--priority`: 1 (first) to 5 (src/model/priority.ts). */
export function priorityLevel(value: string): number {
  const n = numeric(value);
  const problem = priorityProblem(n);
  if (problem) throw new InvalidArgumentError(problem);
  return n as number;
}

/** A commander argument parser for `--fairness-key`: a tenant or a team, at most 64 bytes. */
export function fairnessKey(value: string): string {
  const problem = fairnessKeyProblem(value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
}

/** A commander argument parser for `--fairness-weight`: the key's share, 0.001 to 1000. */
export function fairnessWeight(value: string): number {
  const n = numeric(value);
  const problem = fairnessWeightProblem(n);
  if (problem) throw new InvalidArgumentError(problem);
  return n as number;
}

/** `value` as a number when it reads as one, else as written (so the message shows what was given). */
function numeric(value: string): number | string {
  const n = Number(value);
  return value.trim() !== '' && Number.isFinite(n) ? n : value;
}

/** Reads `--input`: inline JSON, or `@file`. */
export function readInput(value: string | undefined, fallback: Json): Json {
  if (value === undefined) return fallback;
  if (value.startsWith('@')) return readJsonFile(value.slice(1));
  try {
    return JSON.parse(value) as Json;
  } catch (error) {
    throw new Error(`--input is not valid JSON (${oneLine((error as Error).message)}); pass JSON or @file.json`);
  }
}

/** Problems as the indented list every multi-problem error uses. */
export const listed = (problems: string[]): string => problems.map((p) => `  - ${p}`).join('\n');
