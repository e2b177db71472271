/**
 * The limits file (docs/configuration.md "Model capacity"): which provider, model and key may have how many calls
 * in flight and how many requests and tokens a minute, and how capacity is shared between fairness keys.
 *
 * ```yaml
 * limits:
 *   - provider: anthropic
 *     model: claude-sonnet-4-5      # or * for every model of the provider
 *     key: ANTHROPIC_API_KEY        # the variable holding the key; the provider's usual one by default
 *     concurrency: 8
 *     tokens_per_minute: 60000
 *     lease: 60s
 * fairness:
 *   weights: { acme: 3 }
 *   default_weight: 1
 * ```
 *
 * {@link parseLimits} takes the file as parsed (YAML or JSON) and lists every problem with its path at once.
 */
import { z } from 'zod';
import { parseDuration } from '../model/duration';
import { describeIssue } from '../model/spec-problems';
import { DEFAULT_LEASE_MS, PROVIDER_KEY_ENV, type CapacityLimit, type CapacityLimits } from './shapes';

export * from './shapes';

/** The limits a limit may set; a limit must set at least one. */
const RATE_FIELDS = [
  'concurrency',
  'requests_per_minute',
  'tokens_per_minute',
  'input_tokens_per_minute',
  'output_tokens_per_minute',
] as const;
const LIMIT_FIELDS = ['provider', 'model', 'key', ...RATE_FIELDS, 'lease'] as const;
const FILE_FIELDS = ['limits', 'fairness'] as const;
const FAIRNESS_FIELDS = ['weights', 'default_weight'] as const;

const count = z.number().int('must be a whole number').min(1, 'must be 1 or more');
const lease = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const parsed = parseDuration(value);
  if ('error' in parsed) {
    ctx.addIssue({ code: 'custom', message: parsed.error });
    return z.NEVER;
  }
  if (parsed.ms < 1_000) {
    ctx.addIssue({ code: 'custom', message: 'must be at least 1s (a renewal must have time to arrive)' });
    return z.NEVER;
  }
  return parsed.ms;
});
const weight = z.number().positive('must be more than 0').max(1_000, 'must be at most 1000');

const LimitInput = z
  .object({
    provider: z.string().refine((name) => PROVIDER_KEY_ENV[name] !== undefined, {
      message: `must be one of ${Object.keys(PROVIDER_KEY_ENV).join(', ')}: the providers whose calls Treadle makes itself (claude-code sessions and scripted replies are not limited)`,
    }),
    model: z.string().min(1, 'must not be empty (use * for every model of the provider)'),
    key: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must name an environment variable (e.g. ANTHROPIC_API_KEY), not hold a key')
      .optional(),
    concurrency: count.optional(),
    requests_per_minute: count.optional(),
    tokens_per_minute: count.optional(),
    input_tokens_per_minute: count.optional(),
    output_tokens_per_minute: count.optional(),
    lease: lease.optional(),
  })
  .strict()
  .superRefine((limit, ctx) => {
    if (RATE_FIELDS.every((field) => limit[field] === undefined))
      ctx.addIssue({ code: 'custom', message: `sets no limit; give at least one of ${RATE_FIELDS.join(', ')}` });
  });

const LimitsFileInput = z
  .object({
    limits: z.array(LimitInput).default([]),
    fairness: z
      .object({ weights: z.record(z.string(), weight).default({}), default_weight: weight.default(1) })
      .strict()
      .default({ weights: {}, default_weight: 1 }),
  })
  .strict();

/** What a required field is for, said when it is missing. */
const FIELD_HINTS = {
  provider: 'the provider whose calls are limited, e.g. anthropic',
  model: 'the model name, or * for every model of the provider',
};

/** The fields the object at `path` takes (for unknown fields and their did-you-mean). */
function fieldsAt(path: readonly PropertyKey[]): readonly string[] | undefined {
  if (path.length === 0) return FILE_FIELDS;
  if (path[0] === 'limits' && path.length === 2) return LIMIT_FIELDS;
  if (path[0] === 'fairness' && path.length === 1) return FAIRNESS_FIELDS;
  return undefined;
}

/** The parsed file, or every problem as `path: what is wrong; fix` (`(the file)` for the whole file). */
export type LimitsParse = { ok: true; limits: CapacityLimits } | { ok: false; problems: string[] };

/** Checks the limits file as parsed from YAML or JSON; returns the canonical limits or every problem found. */
export function parseLimits(raw: unknown): LimitsParse {
  const input = raw ?? {};
  const parsed = LimitsFileInput.safeParse(input);
  if (!parsed.success) {
    const field = (path: PropertyKey[]) => path.map(String).join('.') || '(the file)';
    const lines = parsed.error.issues.flatMap((issue) =>
      describeIssue(issue, input, { fieldsAt, required: FIELD_HINTS }).map((d) => `${field(d.path)}: ${d.message}`),
    );
    return { ok: false, problems: [...new Set(lines)] };
  }
  const limits: CapacityLimit[] = parsed.data.limits.map((l) => ({
    provider: l.provider,
    model: l.model,
    key: l.key ?? PROVIDER_KEY_ENV[l.provider] ?? '',
    ...(l.concurrency !== undefined && { concurrency: l.concurrency }),
    ...(l.requests_per_minute !== undefined && { requestsPerMinute: l.requests_per_minute }),
    ...(l.tokens_per_minute !== undefined && { tokensPerMinute: l.tokens_per_minute }),
    ...(l.input_tokens_per_minute !== undefined && { inputTokensPerMinute: l.input_tokens_per_minute }),
    ...(l.output_tokens_per_minute !== undefined && { outputTokensPerMinute: l.output_tokens_per_minute }),
    leaseMs: l.lease ?? DEFAULT_LEASE_MS,
  }));
  const problems = duplicateProblems(limits);
  if (problems.length > 0) return { ok: false, problems };
  const { weights, default_weight } = parsed.data.fairness;
  return { ok: true, limits: { limits, fairness: { weights, defaultWeight: default_weight } } };
}

/** Two limits for the same provider, model and key: which one holds would be a guess. */
function duplicateProblems(limits: readonly CapacityLimit[]): string[] {
  const seen = new Map<string, number>();
  const problems: string[] = [];
  limits.forEach((l, i) => {
    const scope = `${l.provider} ${l.model} ${l.key}`;
    const first = seen.get(scope);
    if (first === undefined) seen.set(scope, i);
    else
      problems.push(
        `limits.${i}: repeats limits.${first} (provider ${l.provider}, model ${l.model}, key ${l.key}); merge them into one`,
      );
  });
  return problems;
}
