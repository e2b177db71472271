/**
 * Seed 003's example, the email and meeting triage: extract → classify → dedup → route → approval to create
 * tasks. `extract` and `classify` are `llm` steps (the scripted agent offline, a real model with a key);
 * the two deterministic steps are registered here:
 *
 * - `triage_dedup` merges the classified items whose titles are the same once case, punctuation and spacing
 *   are ignored (the first keeps its place; the others are listed as its duplicates);
 * - `triage_route` turns each item into the action its kind calls for: a `task` into `create_task`, a
 *   `meeting` into `add_busy_block`, a `reply` into `send_message`; `info` needs no action.
 *
 * The pipeline is `examples/triage/pipeline.yaml`, with a sample inbox beside it.
 */
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import type { Registry, StageImplementation } from '../../src/activities/registry';
import type { Json } from '../../src/model/shapes';

/** What `classify` says about one extracted item (its output schema in the example). */
const ClassifiedSchema = z.object({
  title: z.string().min(1),
  kind: z.enum(['task', 'meeting', 'reply', 'info']),
  priority: z.enum(['low', 'normal', 'high', 'urgent']).default('normal'),
  due: z.string().optional(),
  start: z.string().optional(),
  end: z.string().optional(),
  to: z.string().optional(),
  body: z.string().optional(),
  source: z.string().optional(),
});
type Classified = z.infer<typeof ClassifiedSchema>;

/** The classified items of a fan-out's results (completed elements only; failed ones are reported). */
function classifiedItems(upstream: Json | undefined): { items: Classified[]; problems: string[] } {
  const results = (
    upstream as { results?: { index: number; status: string; artefact?: Json; error?: string }[] } | undefined
  )?.results;
  if (!Array.isArray(results))
    throw ApplicationFailure.nonRetryable(
      'triage_dedup needs the results of a fan_out step (classify) as its dependency',
      'InvalidInput',
    );
  const items: Classified[] = [];
  const problems: string[] = [];
  for (const r of results) {
    if (r.status !== 'completed') {
      problems.push(`element ${r.index} was not classified: ${r.error ?? r.status}`);
      continue;
    }
    const parsed = ClassifiedSchema.safeParse(r.artefact);
    if (parsed.success) items.push(parsed.data);
    else
      problems.push(
        `element ${r.index}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
      );
  }
  return { items, problems };
}

const normalized = (title: string): string =>
  title
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();

export const triageDedup: StageImplementation = async (ctx) => {
  const [from] = Object.keys(ctx.upstream);
  const { items, problems } = classifiedItems(from !== undefined ? ctx.upstream[from] : undefined);
  const kept = new Map<string, Classified & { duplicates: string[] }>();
  for (const item of items) {
    const key = normalized(item.title);
    const first = kept.get(key);
    if (first) first.duplicates.push(item.source ?? item.title);
    else kept.set(key, { ...item, duplicates: [] });
  }
  const unique = [...kept.values()];
  const merged = items.length - unique.length;
  return {
    outcome: 'completed',
    artefact: { items: unique, skipped: problems } as unknown as Json,
    summary: `${unique.length} distinct item${unique.length === 1 ? '' : 's'} (${merged} duplicate${merged === 1 ? '' : 's'} merged${problems.length ? `, ${problems.length} unclassified` : ''})`,
  };
};

export const triageRoute: StageImplementation = async (ctx) => {
  const [from] = Object.keys(ctx.upstream);
  const items = (
    (from !== undefined ? ctx.upstream[from] : undefined) as
      { items?: (Classified & { duplicates: string[] })[] } | undefined
  )?.items;
  if (!Array.isArray(items))
    throw ApplicationFailure.nonRetryable(
      'triage_route needs the items of triage_dedup as its dependency',
      'InvalidInput',
    );
  const actions: Json[] = [];
  for (const item of items) {
    const context = [item.source, item.duplicates.length ? `also in: ${item.duplicates.join(', ')}` : '']
      .filter(Boolean)
      .join(' — ');
    if (item.kind === 'task') {
      actions.push({
        action_type: 'create_task',
        payload: {
          title: item.title,
          priority: item.priority,
          ...(item.due ? { due: item.due } : {}),
          ...(item.source ? { notes: `From ${item.source}` } : {}),
        },
        context,
      });
    } else if (item.kind === 'meeting' && item.start && item.end) {
      actions.push({
        action_type: 'add_busy_block',
        payload: { title: item.title, start: item.start, end: item.end },
        context,
      });
    } else if (item.kind === 'reply' && item.to && item.body) {
      actions.push({
        action_type: 'send_message',
        payload: { channel: 'email', to: item.to, subject: `Re: ${item.title}`, body: item.body },
        context,
      });
    }
  }
  return {
    outcome: 'completed',
    artefact: { actions },
    summary: `${actions.length} action${actions.length === 1 ? '' : 's'} to approve from ${items.length} item${items.length === 1 ? '' : 's'}`,
  };
};

/** Registers the triage example's deterministic steps. */
export function registerTriage(registry: Registry): Registry {
  return registry.stage('triage_dedup', triageDedup).stage('triage_route', triageRoute);
}
