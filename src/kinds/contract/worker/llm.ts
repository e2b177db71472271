/**
 * The built-in `llm` validator and reviser: one agent call judges every item of a round against the
 * consumer's criteria; one call per rejected item revises it with the reason.
 */
import { UnparsableRevision, type ContractReviser, type ContractValidator } from './validators';
import type { Json } from '../../../model/shapes';

/** The structured reply the llm validator asks for: a verdict per item id. */
const VALIDATION_SCHEMA: Json = {
  type: 'object',
  properties: {
    results: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          id: { type: 'string' },
          verdict: { type: 'string', enum: ['accepted', 'rejected'] },
          reason: { type: 'string' },
        },
        required: ['id', 'verdict'],
      },
    },
  },
  required: ['results'],
};

/** One call for every item: the criteria, the items by id, and a verdict per id back. */
export const llmValidator: ContractValidator = async (ctx) => {
  const criteria = String((ctx.config as { criteria?: unknown } | undefined)?.criteria ?? '');
  const prompt = [
    `You are the ${ctx.contract.to} stage. Before you work on them, judge the items the ${ctx.contract.from} stage produced against your acceptance criteria.`,
    '',
    '## Acceptance criteria',
    criteria,
    '',
    `## Items (each named by its "${ctx.contract.itemId}")`,
    ...ctx.items.map(({ id, item }) => `### ${id}\n${JSON.stringify(item, null, 2)}`),
    '',
    'Answer with one result per item: {"results": [{"id": "<id>", "verdict": "accepted" | "rejected", "reason": "<why, for the producer to fix>"}]}. A rejection must say what to change.',
  ].join('\n');
  const model = (ctx.config as { model?: unknown } | undefined)?.model;
  const result = await ctx.agent().run({
    messages: [{ role: 'user', content: prompt }],
    outputSchema: VALIDATION_SCHEMA,
    correlationId: `${ctx.itemId}/${ctx.contract.to}/validate/${ctx.round}`,
    signal: ctx.signal,
    ...(typeof model === 'string' ? { model } : {}),
  });
  if (result.output === undefined)
    return {
      rejected: [],
      malformed: result.invalidOutput
        ? `the validator's reply did not match its schema: ${result.invalidOutput.issues.join('; ')}`
        : 'the validator gave no structured reply',
    };
  const results = (result.output as { results: { id: string; verdict: string; reason?: string }[] }).results;
  return {
    rejected: results.filter((r) => r.verdict === 'rejected').map((r) => ({ id: r.id, reason: r.reason ?? '' })),
    accepted: results.filter((r) => r.verdict === 'accepted').map((r) => r.id),
  };
};

/** One call for one item: the criteria, the rejection's reason, the item; the revised item back as JSON. */
export const llmReviser: ContractReviser = async (ctx) => {
  const criteria = String((ctx.config as { criteria?: unknown } | undefined)?.criteria ?? '');
  const prompt = [
    `You are the ${ctx.contract.from} stage. The ${ctx.contract.to} stage rejected one of your items. Revise it so that it meets the criteria; keep what was right.`,
    '',
    '## Criteria',
    criteria,
    '',
    '## Why it was rejected',
    ctx.reason,
    '',
    '## The item',
    JSON.stringify(ctx.item, null, 2),
    '',
    'Answer with the whole revised item as one JSON object, and nothing else.',
  ].join('\n');
  const model = (ctx.config as { model?: unknown } | undefined)?.model;
  const result = await ctx.agent().run({
    messages: [{ role: 'user', content: prompt }],
    correlationId: `${ctx.itemId}/${ctx.contract.to}/revise/${ctx.id}/${ctx.round}`,
    signal: ctx.signal,
    ...(typeof model === 'string' ? { model } : {}),
  });
  const text = result.text.trim().replace(/^```(?:json)?\s*([\s\S]*?)\s*```$/, '$1');
  try {
    return JSON.parse(text) as Json;
  } catch (error) {
    throw new UnparsableRevision(`the revision is not JSON: ${(error as Error).message}`);
  }
};
