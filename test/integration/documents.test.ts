/**
 * The document pipeline (seed 000 use case B) end to end on the real server, with the sample inputs:
 * the report's first conversion loses its table and is retried with the gate's feedback, the concept graph
 * is retried once, the three branches run, the final review waits for a person; the tiny sample's gate is
 * never sure, so the item escalates.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { eventually, startHarness, type Harness } from '../support/harness';
import { readPipelineFile } from '../../src/pipelines/catalog';

const EXAMPLES = path.join(__dirname, '..', '..', 'examples', 'documents');
const spec = readPipelineFile(path.join(EXAMPLES, 'pipeline.yaml'));
const sample = (name: string) => JSON.parse(readFileSync(path.join(EXAMPLES, `${name}.json`), 'utf8'));

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});

it('processes the report: table recovered on retry, concepts reconnected, final review approved', async () => {
  const id = h.id('report');
  await h.client.start(spec, sample('report'), { id });
  const waiting = await eventually(
    async () => {
      const s = await h.client.getState(id);
      return s.status === 'waiting_review' ? s : undefined;
    },
    60_000,
    'the final review',
  );
  expect(waiting.pendingReviews.map((r) => [r.stage, r.reason])).toEqual([['final_review', 'always']]);

  const md = waiting.stages.pdf_to_markdown!;
  expect(md.attempts).toHaveLength(2);
  const firstVerdict = md.attempts[0]!.verdict;
  expect(firstVerdict?.kind).toBe('rejected');
  expect(firstVerdict?.kind === 'rejected' && firstVerdict.feedback.failedCriteria.map((c) => c.name)).toEqual([
    'table_preservation',
  ]);
  expect(md.attempts[1]!.verdict).toEqual({ kind: 'accepted' });
  const markdown = (await h.client.readArtefact(md.artefact)) as { markdown: string; strategy: string };
  expect(markdown.strategy).toBe('layout');
  expect(markdown.markdown).toMatch(/^\|.*\|$/m);

  expect(waiting.stages.extract_concepts!.attempts.map((a) => a.verdict?.kind)).toEqual(['rejected', 'accepted']);
  for (const stage of ['generate_embeddings', 'build_fts_index', 'cross_reference'])
    expect(waiting.stages[stage]!.status).toBe('completed');

  await h.client.approve(id, 'final_review', { reviewer: 'editor' });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  expect(Object.keys(result.artefacts).sort()).toEqual([
    'build_fts_index',
    'cross_reference',
    'extract_concepts',
    'final_review',
    'generate_embeddings',
    'pdf_to_markdown',
  ]);
});

it('escalates the tiny sample, whose gate cannot judge it, after the budget is spent', async () => {
  const id = h.id('tiny');
  await h.client.start(spec, sample('tiny'), { id });
  const waiting = await eventually(
    async () => {
      const s = await h.client.getState(id);
      return s.status === 'waiting_review' ? s : undefined;
    },
    60_000,
    'escalation',
  );
  const md = waiting.stages.pdf_to_markdown!;
  expect(md.attempts.map((a) => a.verdict?.kind)).toEqual(['uncertain', 'uncertain', 'uncertain']);
  expect(waiting.pendingReviews[0]).toEqual(expect.objectContaining({ stage: 'pdf_to_markdown', reason: 'escalated' }));
  expect(waiting.stages.extract_concepts!.status).toBe('pending');
  await h.client.reject(id, 'pdf_to_markdown', 'source too short to process');
  const result = await h.client.result(id);
  expect(result.status).toBe('failed');
  const state = await h.client.getState(id);
  expect(Object.values(state.stages).filter((s) => s.status === 'skipped')).toHaveLength(5);
});
