/** The triage example's deterministic steps (seed 003): dedup by normalized title, route by kind. */
import { triageDedup, triageRoute } from '../../examples/triage/stages';
import type { Json } from '../../src/model/shapes';
import { failureOf, stageContext } from '../support/contexts';

const classified = (index: number, artefact: Json) => ({
  index,
  id: `run.classify.1.${index}`,
  status: 'completed',
  artefact,
});

it('merges items whose titles differ only in case, punctuation and spacing, keeping the first and naming the others', async () => {
  const upstream = {
    classify: {
      results: [
        classified(0, { title: 'Send the Q3 report to Ana', kind: 'task', priority: 'high', source: 'ana: Q3' }),
        classified(1, {
          title: 'Design review',
          kind: 'meeting',
          start: '2026-11-26T14:00:00Z',
          end: '2026-11-26T15:00:00Z',
        }),
        classified(2, { title: 'send the  Q3 report to ana.', kind: 'task', source: 'ben: Design review' }),
        { index: 3, id: 'run.classify.1.3', status: 'failed', error: 'model unavailable' },
        classified(4, { title: 'no kind' }),
      ],
      completed: 4,
      failed: 1,
    },
  };
  const out = await triageDedup(stageContext({ upstream }));
  expect(out.summary).toBe('2 distinct items (1 duplicate merged, 2 unclassified)');
  const artefact = out.artefact as {
    items: { title: string; duplicates: string[]; priority: string }[];
    skipped: string[];
  };
  expect(artefact.items.map((i) => [i.title, i.priority, i.duplicates])).toEqual([
    ['Send the Q3 report to Ana', 'high', ['ben: Design review']],
    ['Design review', 'normal', []],
  ]);
  expect(artefact.skipped).toEqual([
    'element 3 was not classified: model unavailable',
    'element 4: kind: Invalid option: expected one of "task"|"meeting"|"reply"|"info"',
  ]);
});

it('routes tasks to create_task, meetings to add_busy_block, replies to send_message, and info to nothing', async () => {
  const items = [
    {
      title: 'Send the Q3 report',
      kind: 'task',
      priority: 'high',
      due: '2026-11-27',
      source: 'ana: Q3',
      duplicates: ['ben: review'],
    },
    {
      title: 'Design review',
      kind: 'meeting',
      priority: 'normal',
      start: '2026-11-26T14:00:00Z',
      end: '2026-11-26T15:00:00Z',
      duplicates: [],
    },
    { title: 'Lunch', kind: 'reply', priority: 'low', to: 'cara@example.com', body: '12:30?', duplicates: [] },
    { title: 'Release notes', kind: 'info', priority: 'low', duplicates: [] },
    { title: 'Meeting without a time', kind: 'meeting', priority: 'low', duplicates: [] },
  ];
  const out = await triageRoute(stageContext({ upstream: { dedup: { items } as unknown as Json } }));
  expect(out.summary).toBe('3 actions to approve from 5 items');
  expect((out.artefact as { actions: Json[] }).actions).toEqual([
    {
      action_type: 'create_task',
      payload: { title: 'Send the Q3 report', priority: 'high', due: '2026-11-27', notes: 'From ana: Q3' },
      context: 'ana: Q3 — also in: ben: review',
    },
    {
      action_type: 'add_busy_block',
      payload: { title: 'Design review', start: '2026-11-26T14:00:00Z', end: '2026-11-26T15:00:00Z' },
      context: '',
    },
    {
      action_type: 'send_message',
      payload: { channel: 'email', to: 'cara@example.com', subject: 'Re: Lunch', body: '12:30?' },
      context: '',
    },
  ]);
});

it('says what it needs when its dependency is not what it expects', async () => {
  expect((await failureOf(() => triageDedup(stageContext({ upstream: { x: { nope: true } } })))).message).toBe(
    'triage_dedup needs the results of a fan_out step (classify) as its dependency',
  );
  expect((await failureOf(() => triageRoute(stageContext({ upstream: {} })))).message).toBe(
    'triage_route needs the items of triage_dedup as its dependency',
  );
});
