/**
 * The built-in document pipeline (examples/documents), its implementations called directly with
 * hand-made contexts. Cases:
 * - the spec: builder and examples/documents/pipeline.yaml agree; every implementation is registered;
 * - each sample driven through its gated stages with the engine's own retry decisions: report rejected for
 *   table loss then accepted, memo accepted at once, tiny uncertain until escalation;
 * - conversion details (page furniture, hyphenation, headings, glued footers, markdown passthrough) and
 *   non-retryable failures for bad input and config;
 * - concept graph extraction, the concept_graph gate (orphans, types, dangling edges, too few nodes) and the
 *   retry settings feedback produces;
 * - chunk budgets, overlap, unit-length deterministic vectors; BM25 ranking; cross references; the review packet.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import YAML from 'yaml';
import {
  Registry,
  type GateContext,
  type GateImplementation,
  type StageContext,
  type StageImplementation,
} from '../../src/activities/registry';
import { stageContext } from '../support/contexts';
import { decideAfterAttempt } from '../../src/engine/stage-policy';
import { gateLeaves, type StageSpec } from '../../src/model/pipeline';
import { validatePipeline } from '../../src/kinds/pipeline';
import type { Json, QualityFeedback, QualityVerdict, StageOutput } from '../../src/model/shapes';
import {
  DOCUMENT_PIPELINE,
  EMBEDDING_DIMENSIONS,
  buildFtsIndex,
  buildSearchIndex,
  chooseStrategy,
  conceptGraph,
  conceptOptionsFor,
  connectedComponents,
  cosineSimilarity,
  crossReference,
  documentPipeline,
  embedText,
  extractConcepts,
  finalReview,
  generateEmbeddings,
  markdownQuality,
  orphanNodes,
  pdfToMarkdown,
  registerDocumentPipeline,
  search,
  type ConceptGraph,
  type CrossReferenceArtefact,
  type EmbeddingsArtefact,
  type MarkdownArtefact,
  type ReviewPacket,
  type SearchIndex,
} from '../../examples/documents';
import { estimateTokens } from '../../examples/documents/language';

const EXAMPLES = path.join(__dirname, '..', '..', 'examples', 'documents');

function sample(name: 'report' | 'memo' | 'tiny'): { title: string; source: string } {
  return JSON.parse(readFileSync(path.join(EXAMPLES, `${name}.json`), 'utf8')) as { title: string; source: string };
}

function makeContext(overrides: Partial<StageContext> = {}): StageContext {
  return stageContext({ pipeline: DOCUMENT_PIPELINE, ...overrides });
}

function makeGateContext(output: StageOutput, overrides: Partial<GateContext> = {}): GateContext {
  const { feedback: _feedback, ...base } = makeContext(overrides);
  return { ...base, output, ...overrides };
}

function spec(stage: string): StageSpec {
  const found = documentPipeline().stages.find((s) => s.name === stage);
  if (!found) throw new Error(`no stage ${stage}`);
  return found;
}

/** Attempts of one gated stage, decided by the engine's own policy (retry, escalate, complete). */
async function runGatedStage(
  stage: string,
  impl: StageImplementation,
  gate: GateImplementation,
  context: Partial<StageContext>,
): Promise<{
  attempts: { verdict: QualityVerdict; output: StageOutput }[];
  decision: string;
  artefact: Json | undefined;
}> {
  const { retryBudget, reviewPolicy, gate: gateRef, with: config } = spec(stage);
  const attempts: { verdict: QualityVerdict; output: StageOutput }[] = [];
  let feedback: QualityFeedback | null = null;
  for (let attempt = 1; ; attempt++) {
    const ctx = makeContext({ ...context, stage, attempt, maxAttempts: retryBudget.maxAttempts, feedback, config });
    const output = await impl(ctx);
    const verdict = await gate(
      makeGateContext(output, { ...context, stage, attempt, config: gateLeaves(gateRef)[0]?.with }),
    );
    attempts.push({ verdict, output });
    const decision = decideAfterAttempt({
      attempt,
      budget: retryBudget,
      policy: reviewPolicy,
      outcome: { kind: 'output', output, verdict },
    });
    if (decision.action !== 'retry') return { attempts, decision: decision.action, artefact: output.artefact };
    feedback = decision.feedback;
  }
}

async function run(impl: StageImplementation, context: Partial<StageContext>): Promise<StageOutput> {
  return impl(makeContext(context));
}

async function convert(name: 'report' | 'memo', feedback: QualityFeedback | null = null): Promise<MarkdownArtefact> {
  const output = await run(pdfToMarkdown, { stage: 'pdf_to_markdown', input: sample(name), feedback });
  return output.artefact as MarkdownArtefact;
}

const LAYOUT_FEEDBACK: QualityFeedback = {
  summary: 'tables lost',
  failedCriteria: [{ name: 'table_preservation', expected: '1', actual: '0', passed: false }],
  guidance: { strategy: 'layout' },
};

describe('document pipeline spec', () => {
  it('is the same in YAML as from the builder', () => {
    const yaml: unknown = YAML.parse(readFileSync(path.join(EXAMPLES, 'pipeline.yaml'), 'utf8'));
    const result = validatePipeline(yaml);
    if (!result.ok) throw new Error(result.problems.join('\n'));
    expect(result.spec).toEqual(documentPipeline());
  });

  it('has the DAG, gates, budgets and policies of seed 000', () => {
    const stages = Object.fromEntries(documentPipeline().stages.map((s) => [s.name, s]));
    expect(stages.final_review?.dependsOn).toEqual(['cross_reference', 'generate_embeddings', 'build_fts_index']);
    expect(stages.cross_reference?.dependsOn).toEqual(['extract_concepts']);
    expect(stages.pdf_to_markdown?.gate).toEqual({
      run: 'markdown_quality',
      with: { require_tables: true, min_word_count: 100 },
    });
    expect(stages.extract_concepts?.gate).toEqual({
      run: 'concept_graph',
      with: { min_nodes: 5, require_connected: true },
    });
    expect(stages.pdf_to_markdown?.retryBudget).toEqual({
      maxAttempts: 3,
      delayMs: 0,
      attemptTimeoutMs: 120_000,
      onExhausted: 'escalate',
    });
    expect(stages.extract_concepts?.retryBudget).toEqual({
      maxAttempts: 2,
      delayMs: 0,
      attemptTimeoutMs: 60_000,
      onExhausted: 'escalate',
    });
    expect([
      stages.final_review?.reviewPolicy,
      stages.pdf_to_markdown?.reviewPolicy,
      stages.extract_concepts?.reviewPolicy,
    ]).toEqual(['always', 'on_escalation', 'on_escalation']);
  });

  it('registers every implementation the spec names', () => {
    const registry = registerDocumentPipeline(new Registry());
    expect(registry.names()).toEqual({
      checkConfig: expect.any(Function),
      // The document pipeline registers no output schemas; every registry can check a spec's.
      outputSchemas: {},
      outputSchemaProblem: expect.any(Function),
      stages: [
        'build_fts_index',
        'cross_reference',
        'extract_concepts',
        'final_review',
        'generate_embeddings',
        'pdf_to_markdown',
      ],
      gates: ['concept_graph', 'markdown_quality'],
      validators: ['llm'],
      revisers: ['llm'],
    });
    const yaml: unknown = YAML.parse(readFileSync(path.join(EXAMPLES, 'pipeline.yaml'), 'utf8'));
    expect(validatePipeline(yaml, registry.names())).toMatchObject({ ok: true });
    expect(validatePipeline(yaml, { stages: ['pdf_to_markdown'], gates: [] })).toMatchObject({ ok: false });
  });
});

describe('samples through their gated stages', () => {
  it('report: tables lost by the plain reading are rejected, the layout reading is accepted on attempt 2', async () => {
    const { attempts, decision, artefact } = await runGatedStage('pdf_to_markdown', pdfToMarkdown, markdownQuality, {
      input: sample('report'),
    });
    expect(attempts.map((a) => a.verdict.kind)).toEqual(['rejected', 'accepted']);
    expect(decision).toBe('complete');

    const [first, second] = attempts;
    expect(first?.output.summary).toBe('markdown: 498 words, 6 headings, 0 tables (strategy plain)');
    const rejection = first?.verdict;
    if (rejection?.kind !== 'rejected') throw new Error('expected a rejection');
    expect(rejection.feedback.failedCriteria).toEqual([
      {
        name: 'table_preservation',
        expected: '1 table of the source as markdown pipe tables',
        actual: 'no pipe tables (tables flattened into text)',
        passed: false,
      },
    ]);
    expect(rejection.feedback.guidance).toMatchObject({ strategy: 'layout' });
    expect(second?.output.summary).toBe('markdown: 498 words, 6 headings, 1 table (strategy layout)');
    expect((artefact as MarkdownArtefact).markdown).toContain(
      [
        '| Service | Incidents | MTTR (min) | Availability |',
        '| --- | --- | --- | --- |',
        '| Ingestion API | 4 | 38 | 99.82% |',
      ].join('\n'),
    );
  });

  it('memo: no tables, accepted on attempt 1 with the plain reading', async () => {
    const { attempts, decision, artefact } = await runGatedStage('pdf_to_markdown', pdfToMarkdown, markdownQuality, {
      input: sample('memo'),
    });
    expect(attempts.map((a) => a.verdict.kind)).toEqual(['accepted']);
    expect(decision).toBe('complete');
    expect((artefact as MarkdownArtefact).strategy).toBe('plain');
    expect((artefact as MarkdownArtefact).markdown).toContain('- **From:** Priya Raman, Head of Platform');
  });

  it('tiny: too short to judge, uncertain on every attempt, then escalated to review', async () => {
    const { attempts, decision } = await runGatedStage('pdf_to_markdown', pdfToMarkdown, markdownQuality, {
      input: sample('tiny'),
    });
    expect(attempts.map((a) => a.verdict.kind)).toEqual(['uncertain', 'uncertain', 'uncertain']);
    expect(attempts[0]?.verdict).toEqual({
      kind: 'uncertain',
      reason: expect.stringContaining('the source has only 10 words (fewer than 20)'),
    });
    expect(attempts.map((a) => (a.output.artefact as MarkdownArtefact).strategy)).toEqual([
      'plain',
      'layout',
      'layout',
    ]);
    expect(decision).toBe('review');
  });

  it.each(['report', 'memo'] as const)(
    '%s: the concept graph has orphan headings at first and is connected on attempt 2',
    async (name) => {
      const markdown = await convert(name, LAYOUT_FEEDBACK);
      const { attempts, decision, artefact } = await runGatedStage('extract_concepts', extractConcepts, conceptGraph, {
        input: sample(name),
        upstream: { pdf_to_markdown: markdown },
      });
      expect(attempts.map((a) => a.verdict.kind)).toEqual(['rejected', 'accepted']);
      expect(decision).toBe('complete');
      const first = attempts[0]!.verdict;
      if (first.kind !== 'rejected') throw new Error('expected a rejection');
      expect(first.feedback.failedCriteria.map((c) => c.name)).toEqual(['no_orphans', 'connected']);
      expect(first.feedback.guidance).toEqual({ linking: 'paragraph' });
      const firstGraph = attempts[0]!.output.artefact as ConceptGraph;
      // Only headings lack sentence co-occurrence in these samples: their words are not used in the text.
      expect(orphanNodes(firstGraph).map((id) => firstGraph.nodes.find((n) => n.id === id)?.type)).toEqual(
        orphanNodes(firstGraph).map(() => 'heading'),
      );
      const graph = artefact as ConceptGraph;
      expect(graph.linking).toBe('paragraph');
      expect(connectedComponents(graph)).toHaveLength(1);
      expect(graph.nodes.length).toBeGreaterThanOrEqual(5);
    },
  );
});

describe('pdf_to_markdown', () => {
  it('removes page furniture, joins hyphenated words and marks headings', async () => {
    const { markdown, stats } = await convert('report', LAYOUT_FEEDBACK);
    expect(markdown.startsWith('# Q3 Platform Reliability Report\n\n## 1. Introduction\n')).toBe(true);
    expect(markdown).toContain('\n### 2.1 Queue Latency\n');
    expect(markdown).not.toMatch(/Page \d of \d/);
    expect(markdown).not.toContain('Northwind Data Platform · Q3 Reliability Report');
    expect(markdown).not.toContain('\f');
    expect(markdown).toContain('briefly disagreed about which documents existed');
    expect(markdown).toContain('the ingestion pipeline, the incidents');
    expect(markdown).toContain(
      '\n- Reject malformed PDF uploads at the Ingestion API with a size and page-count limit before they reach the workers.\n',
    );
    expect(stats).toEqual({ words: 498, headings: 6, tables: 1 });
  });

  it('uses the guided strategy, layout after any rejection, plain otherwise', () => {
    expect(chooseStrategy(null)).toBe('plain');
    expect(chooseStrategy(null, 'layout')).toBe('layout');
    expect(chooseStrategy(LAYOUT_FEEDBACK)).toBe('layout');
    expect(chooseStrategy({ summary: 'the gate was uncertain', failedCriteria: [] })).toBe('layout');
    expect(chooseStrategy({ summary: 'x', failedCriteria: [], guidance: { strategy: 'plain' } })).toBe('plain');
  });

  it('strips footers glued to a text line only in the layout reading, and the gate notices', async () => {
    const source = [
      'The archive service stores signed contracts for seven years and answers retrieval requests from the legal team within one day.',
      'Requests outside office hours wait for the next working day.      Page 1 of 2',
      '\f',
      'Retention is enforced by a nightly job that deletes expired contracts after a final review by the records office.',
    ].join('\n');
    const input = { title: 'Archive', source };
    const config = { require_tables: true, min_word_count: 20 };
    const plain = await run(pdfToMarkdown, { stage: 'pdf_to_markdown', input });
    const verdict = await markdownQuality(makeGateContext(plain, { input, config }));
    if (verdict.kind !== 'rejected') throw new Error(`expected a rejection, got ${verdict.kind}`);
    expect(verdict.feedback.failedCriteria).toEqual([
      {
        name: 'no_residual_page_markers',
        expected: 'no page headers or footers',
        actual: '1 (first: "Page 1 of 2")',
        passed: false,
      },
    ]);

    const layout = await run(pdfToMarkdown, {
      stage: 'pdf_to_markdown',
      input,
      feedback: verdict.feedback,
      attempt: 2,
    });
    // The first page's text ends with a full stop, so the next page starts a new paragraph.
    expect((layout.artefact as MarkdownArtefact).markdown).toBe(
      '# Archive\n\nThe archive service stores signed contracts for seven years and answers retrieval requests from the legal team within one day. ' +
        'Requests outside office hours wait for the next working day.\n\nRetention is enforced by a nightly job that deletes expired contracts after a final review by the records office.\n',
    );
    expect(await markdownQuality(makeGateContext(layout, { input, config }))).toEqual({ kind: 'accepted' });
  });

  it('rejects too few words with the word_count criterion', async () => {
    const input = sample('memo');
    const output = await run(pdfToMarkdown, { stage: 'pdf_to_markdown', input });
    const verdict = await markdownQuality(
      makeGateContext(output, { input, config: { require_tables: true, min_word_count: 500 } }),
    );
    expect(verdict).toMatchObject({
      kind: 'rejected',
      feedback: { failedCriteria: [{ name: 'word_count', expected: '≥ 500', actual: '188', passed: false }] },
    });
  });

  it('passes markdown input through, tables included', async () => {
    const source = '## Limits\n\n| Plan | Requests |\n| --- | --- |\n| Free | 100 |\n\nPage 1 of 1\n';
    const output = await run(pdfToMarkdown, {
      stage: 'pdf_to_markdown',
      input: { title: 'Limits', source, format: 'markdown' },
    });
    expect(output.artefact).toEqual({
      title: 'Limits',
      markdown: '## Limits\n\n| Plan | Requests |\n| --- | --- |\n| Free | 100 |\n',
      strategy: 'passthrough',
      stats: { words: 5, headings: 1, tables: 1 },
    });
  });

  it('fails non-retryably on input without a source', async () => {
    const failure = await run(pdfToMarkdown, { stage: 'pdf_to_markdown', input: { title: 'No text' } }).catch(
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
    expect((failure as Error).message).toMatch(
      /^pdf_to_markdown: work item input must be \{ title: string, source: string.*source: /,
    );
  });

  it('fails non-retryably on unknown gate config', async () => {
    const input = sample('memo');
    const output = await run(pdfToMarkdown, { stage: 'pdf_to_markdown', input });
    const failure = await markdownQuality(makeGateContext(output, { input, config: { min_words: 10 } })).catch(
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ type: 'InvalidConfig', nonRetryable: true });
  });
});

describe('extract_concepts and concept_graph', () => {
  it('types concepts and records the sections that mention them', async () => {
    const markdown = await convert('report', LAYOUT_FEEDBACK);
    const graph = (await run(extractConcepts, { stage: 'extract_concepts', upstream: { pdf_to_markdown: markdown } }))
      .artefact as ConceptGraph;
    const byId = new Map(graph.nodes.map((node) => [node.id, node]));
    expect(byId.get('search-indexer')).toMatchObject({ label: 'Search Indexer', type: 'term', count: 7 });
    expect(byId.get('slo')).toMatchObject({ label: 'SLO', type: 'acronym', count: 3 });
    expect(byId.get('queue-latency')).toMatchObject({
      label: 'Queue Latency',
      type: 'heading',
      sections: ['2-1-queue-latency', '4-recommendations'],
    });
    // Longest match first: "Search Indexer" is one mention, not also "search" and "indexer".
    expect(byId.has('indexer')).toBe(false);
    const sectionIds = new Set(graph.sections.map((s) => s.id));
    for (const node of graph.nodes) for (const section of node.sections) expect(sectionIds.has(section)).toBe(true);
    for (const edge of graph.edges) expect(edge.source < edge.target).toBe(true);
    // "The Embedding Worker and the Search Indexer consume the queue independently…"
    expect(graph.edges.find((e) => e.source === 'embedding-worker' && e.target === 'search-indexer')).toMatchObject({
      weight: 1,
      basis: 'sentence',
    });
    // "…(SLO) of 99.5% for every service except the Search Indexer…", "…keeps the Search Indexer within the SLO…"
    expect(graph.edges.find((e) => e.source === 'search-indexer' && e.target === 'slo')).toMatchObject({
      weight: 2,
      basis: 'sentence',
    });
  });

  it('rejects a graph with an orphan, naming it and the components', async () => {
    const nodes = ['a', 'b', 'c', 'd', 'e', 'f'].map((id) => ({ id, label: id, type: 'term', count: 1, sections: [] }));
    const edges = [
      ['a', 'b'],
      ['b', 'c'],
      ['c', 'd'],
      ['d', 'e'],
    ].map(([source, target]) => ({ source: source!, target: target!, weight: 1 }));
    const verdict = await conceptGraph(
      makeGateContext(
        { outcome: 'completed', artefact: { nodes, edges } },
        { config: { min_nodes: 5, require_connected: true } },
      ),
    );
    expect(verdict).toEqual({
      kind: 'rejected',
      feedback: {
        summary: expect.stringMatching(/^2 of 5 criteria not met: no_orphans/),
        failedCriteria: [
          { name: 'no_orphans', expected: 'no node without edges', actual: '1: f', passed: false },
          { name: 'connected', expected: '1 connected component', actual: '2 components (sizes 5, 1)', passed: false },
        ],
        guidance: { linking: 'paragraph' },
      },
    });
  });

  it('rejects untyped nodes, dangling edges and too few nodes', async () => {
    const artefact = {
      nodes: [
        { id: 'a', label: 'A', type: 'thing' },
        { id: 'b', label: 'B', type: 'term' },
      ],
      edges: [
        { source: 'a', target: 'b' },
        { source: 'a', target: 'zz' },
      ],
    };
    const verdict = await conceptGraph(
      makeGateContext({ outcome: 'completed', artefact }, { config: { min_nodes: 5, require_connected: false } }),
    );
    if (verdict.kind !== 'rejected') throw new Error('expected a rejection');
    expect(verdict.feedback.failedCriteria).toEqual([
      { name: 'min_nodes', expected: '≥ 5 nodes', actual: '2', passed: false },
      {
        name: 'typed_nodes',
        expected: 'every node typed heading | acronym | term',
        actual: '1 not: a (thing)',
        passed: false,
      },
      {
        name: 'edge_endpoints',
        expected: 'every edge joins two nodes of the graph',
        actual: '1 do not: a–zz',
        passed: false,
      },
    ]);
    expect(verdict.feedback.guidance).toEqual({ relax_thresholds: true });
    expect(await conceptGraph(makeGateContext({ outcome: 'completed', artefact: 'not a graph' }))).toMatchObject({
      kind: 'rejected',
      feedback: { failedCriteria: [{ name: 'graph_shape', actual: 'string without that shape' }] },
    });
  });

  it('relaxes thresholds after too few nodes and links by paragraph after orphans', () => {
    const config = { min_term_count: 3, min_phrase_count: 2, max_nodes: 40 };
    const tooFew: QualityFeedback = {
      summary: '',
      failedCriteria: [{ name: 'min_nodes', expected: '≥ 5', actual: '2', passed: false }],
    };
    expect(conceptOptionsFor(config, null, 1)).toEqual({
      minTermCount: 3,
      minPhraseCount: 2,
      maxNodes: 40,
      linking: 'sentence',
    });
    expect(conceptOptionsFor(config, tooFew, 2)).toEqual({
      minTermCount: 2,
      minPhraseCount: 1,
      maxNodes: 40,
      linking: 'sentence',
    });
    expect(conceptOptionsFor(config, tooFew, 3)).toEqual({
      minTermCount: 1,
      minPhraseCount: 1,
      maxNodes: 40,
      linking: 'sentence',
    });
    const orphans: QualityFeedback = {
      summary: '',
      failedCriteria: [{ name: 'no_orphans', expected: '', actual: '1: f', passed: false }],
    };
    expect(conceptOptionsFor(config, orphans, 2).linking).toBe('paragraph');
  });

  it('finds more concepts on each relaxed retry of a short text', async () => {
    const markdown: MarkdownArtefact = {
      title: 'Backups',
      markdown:
        '# Backups\n\nNightly backups copy the billing database to cold storage. Restores are tested monthly from cold storage.\n',
      strategy: 'passthrough',
      stats: { words: 17, headings: 1, tables: 0 },
    };
    const upstream = { pdf_to_markdown: markdown };
    const gate = async (graph: Json | undefined) =>
      conceptGraph(
        makeGateContext(
          { outcome: 'completed', artefact: graph },
          { config: { min_nodes: 5, require_connected: true } },
        ),
      );
    const first = await run(extractConcepts, { stage: 'extract_concepts', upstream });
    expect(first.summary).toBe(
      'concepts: 0 nodes (0 headings, 0 acronyms, 0 terms), 0 edges, 0 orphans (sentence linking)',
    );
    const firstVerdict = await gate(first.artefact);
    if (firstVerdict.kind !== 'rejected') throw new Error('expected a rejection');
    expect(firstVerdict.feedback.failedCriteria.map((c) => c.name)).toEqual(['min_nodes', 'connected']);

    // Attempt 2: words mentioned twice qualify.
    const second = (
      await run(extractConcepts, { stage: 'extract_concepts', attempt: 2, feedback: firstVerdict.feedback, upstream })
    ).artefact as ConceptGraph;
    expect(second.nodes.map((n) => `${n.id}:${n.count}`)).toEqual(['cold:2', 'storage:2']);
    expect(second.edges).toEqual([{ source: 'cold', target: 'storage', weight: 2, basis: 'sentence' }]);
    const secondVerdict = await gate(second);
    if (secondVerdict.kind !== 'rejected') throw new Error('expected a rejection');

    // Attempt 3: every content word qualifies, and the graph passes.
    const third = (
      await run(extractConcepts, { stage: 'extract_concepts', attempt: 3, feedback: secondVerdict.feedback, upstream })
    ).artefact as ConceptGraph;
    expect(third.nodes.map((n) => n.label).sort()).toEqual([
      'backups',
      'billing',
      'cold',
      'copy',
      'database',
      'monthly',
      'nightly',
      'restores',
      'storage',
      'tested',
    ]);
    expect(await gate(third)).toEqual({ kind: 'accepted' });
  });
});

describe('generate_embeddings', () => {
  async function embed(config?: Json): Promise<EmbeddingsArtefact> {
    const markdown = await convert('report', LAYOUT_FEEDBACK);
    return (
      await run(generateEmbeddings, { stage: 'generate_embeddings', upstream: { pdf_to_markdown: markdown }, config })
    ).artefact as EmbeddingsArtefact;
  }

  it('keeps every chunk within max_tokens, headings included, and overlaps consecutive chunks', async () => {
    const { chunks, maxTokens } = await embed({ max_tokens: 64, overlap_tokens: 8 });
    expect(maxTokens).toBe(64);
    expect(chunks.length).toBeGreaterThan(9);
    for (const chunk of chunks) {
      expect(chunk.tokens).toBe(estimateTokens(`${chunk.heading} ${chunk.text}`));
      expect(chunk.tokens).toBeLessThanOrEqual(64);
      expect(chunk.text.length).toBeGreaterThan(0);
    }
    const [one, two] = chunks.filter((c) => c.section === '1-introduction');
    const tail = one!.text.split(/\s+/).slice(-6).join(' ');
    expect(two!.text.startsWith(tail)).toBe(true);
  });

  it('makes one chunk per section under the default 512-token budget', async () => {
    const { chunks } = await embed();
    expect(chunks.map((c) => c.id)).toEqual([
      '1-introduction/1',
      '2-ingestion-pipeline/1',
      '2-1-queue-latency/1',
      '3-incident-summary/1',
      '4-recommendations/1',
      '5-conclusion/1',
    ]);
  });

  it('embeds as deterministic unit vectors that reflect shared words', async () => {
    const { chunks, dimensions } = await embed();
    expect(dimensions).toBe(EMBEDDING_DIMENSIONS);
    for (const chunk of chunks) {
      expect(chunk.vector).toHaveLength(256);
      expect(Math.abs(Math.hypot(...chunk.vector) - 1)).toBeLessThan(1e-3);
    }
    expect((await embed()).chunks.map((c) => c.vector)).toEqual(chunks.map((c) => c.vector));
    const query = embedText('P95 queue latency of the Document Queue');
    const latency = chunks.find((c) => c.section === '2-1-queue-latency')!;
    const conclusion = chunks.find((c) => c.section === '5-conclusion')!;
    expect(cosineSimilarity(query, latency.vector)).toBeGreaterThan(cosineSimilarity(query, conclusion.vector) + 0.1);
  });

  it('refuses an overlap of half the budget or more', async () => {
    await expect(embed({ max_tokens: 64, overlap_tokens: 32 })).rejects.toMatchObject({
      type: 'InvalidConfig',
      nonRetryable: true,
    });
  });
});

describe('build_fts_index', () => {
  it('indexes each section with stemmed term frequencies', async () => {
    const markdown = await convert('report', LAYOUT_FEEDBACK);
    const index = (await run(buildFtsIndex, { stage: 'build_fts_index', upstream: { pdf_to_markdown: markdown } }))
      .artefact as SearchIndex;
    expect(index.documents.map((d) => d.id)).toEqual([
      '1-introduction',
      '2-ingestion-pipeline',
      '2-1-queue-latency',
      '3-incident-summary',
      '4-recommendations',
      '5-conclusion',
    ]);
    // "Queue Latency" heading + "Queue latency is…" + "The P95 queue latency…" in section 2.1.
    expect(index.terms.latency).toContainEqual([2, 3]);
    // "reindexing" and "checkpoints"/"checkpointed" meet their stems.
    expect(index.terms.checkpoint?.map(([doc]) => doc)).toEqual([3, 4, 5]);
    expect(index.terms.the).toBeUndefined();
    const mean = index.documents.reduce((sum, d) => sum + d.length, 0) / index.documents.length;
    expect(index.avgLength).toBeCloseTo(mean, 2);
  });

  it('ranks the relevant section first with BM25', () => {
    const index = buildSearchIndex(
      '# T\n\n## Billing\n\nInvoices are exported nightly.\n\n## Latency\n\nQueue latency rose during the migration. Latency alerts fired twice.\n\n## People\n\nThe on-call engineer restarted the queue.\n',
    );
    const hits = search(index, 'queue latency');
    expect(hits.map((h) => h.id)).toEqual(['latency', 'people']);
    expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
    expect(search(index, 'constructor')).toEqual([]);
  });

  it('finds the incident table section in the report', async () => {
    const markdown = await convert('report', LAYOUT_FEEDBACK);
    const index = buildSearchIndex(markdown.markdown);
    expect(search(index, 'mean time to recovery per service')[0]?.id).toBe('3-incident-summary');
    expect(search(index, 'queue latency')[0]?.id).toBe('2-1-queue-latency');
  });
});

describe('cross_reference and final_review', () => {
  async function artefacts() {
    const input = sample('report');
    const markdown = await convert('report', LAYOUT_FEEDBACK);
    const upstream = { pdf_to_markdown: markdown };
    const orphanFeedback: QualityFeedback = {
      summary: '',
      failedCriteria: [{ name: 'no_orphans', expected: '', actual: '', passed: false }],
    };
    const graph = (
      await run(extractConcepts, { stage: 'extract_concepts', upstream, feedback: orphanFeedback, attempt: 2 })
    ).artefact as ConceptGraph;
    const crossRef = (await run(crossReference, { stage: 'cross_reference', upstream: { extract_concepts: graph } }))
      .artefact as CrossReferenceArtefact;
    const embeddings = (await run(generateEmbeddings, { stage: 'generate_embeddings', upstream }))
      .artefact as EmbeddingsArtefact;
    const index = (await run(buildFtsIndex, { stage: 'build_fts_index', upstream })).artefact as SearchIndex;
    const review = await run(finalReview, {
      stage: 'final_review',
      input,
      upstream: { cross_reference: crossRef, generate_embeddings: embeddings, build_fts_index: index },
    });
    return { graph, crossRef, embeddings, index, review };
  }

  it('refers only to concepts and sections of the graph', async () => {
    const { graph, crossRef } = await artefacts();
    const ids = new Set(graph.nodes.map((n) => n.id));
    const sections = new Set(graph.sections.map((s) => s.id));
    expect(crossRef.links.map((l) => l.concept)).toEqual(graph.nodes.map((n) => n.id));
    for (const link of crossRef.links) {
      for (const related of link.related) expect(ids.has(related.concept)).toBe(true);
      for (const section of link.sections) expect(sections.has(section)).toBe(true);
      expect(link.related.some((r) => r.concept === link.concept)).toBe(false);
    }
    for (const id of [...crossRef.crossSection, ...crossRef.unlinked]) expect(ids.has(id)).toBe(true);
    expect(crossRef.crossSection).toContain('search-indexer');
    expect(crossRef.links.find((l) => l.concept === 'search-indexer')?.sections).toEqual([
      '1-introduction',
      '2-ingestion-pipeline',
      '2-1-queue-latency',
      '3-incident-summary',
      '4-recommendations',
      '5-conclusion',
    ]);
  });

  it('summarises every upstream artefact for the reviewer', async () => {
    const { graph, crossRef, embeddings, index, review } = await artefacts();
    const packet = review.artefact as ReviewPacket;
    expect(packet.title).toBe('Q3 Platform Reliability Report');
    expect(packet.concepts.total).toBe(graph.nodes.length);
    expect(packet.concepts.crossSection).toBe(crossRef.crossSection.length);
    expect(packet.concepts.top[0]).toMatchObject({ id: graph.nodes[0]!.id, count: graph.nodes[0]!.count });
    expect(packet.embeddings).toMatchObject({ chunks: embeddings.chunks.length, dimensions: 256, budget: 512 });
    expect(packet.index).toMatchObject({ sections: index.documents.length, terms: Object.keys(index.terms).length });
    expect(packet.sampleSearch?.query).toBe(graph.nodes.find((n) => n.type !== 'heading')!.label);
    expect(packet.sampleSearch?.hits.length).toBeGreaterThan(0);
    expect(review.summary).toBe(
      `review packet for "Q3 Platform Reliability Report": ${graph.nodes.length} concepts (${crossRef.crossSection.length} span sections), ` +
        `6 chunks ≤ ${packet.embeddings.maxChunkTokens} tokens, ${packet.index.terms} index terms over 6 sections; ` +
        `search "${packet.sampleSearch?.query}" → ${packet.sampleSearch?.hits[0]?.heading}`,
    );
  });

  it('carries an empty document through every stage without inventing content', async () => {
    const input = { title: 'Blank scan', source: '\f\fPage 1 of 2\n\fPage 2 of 2\n' };
    const converted = await run(pdfToMarkdown, { stage: 'pdf_to_markdown', input });
    expect(converted.artefact).toMatchObject({
      markdown: '# Blank scan\n',
      stats: { words: 2, headings: 0, tables: 0 },
    });
    expect(await markdownQuality(makeGateContext(converted, { input }))).toMatchObject({ kind: 'uncertain' });
    const upstream = { pdf_to_markdown: converted.artefact! };
    const graph = await run(extractConcepts, { stage: 'extract_concepts', upstream });
    const embeddings = await run(generateEmbeddings, { stage: 'generate_embeddings', upstream });
    const index = await run(buildFtsIndex, { stage: 'build_fts_index', upstream });
    expect(embeddings.artefact).toMatchObject({ chunks: [] });
    expect(index.artefact).toMatchObject({ documents: [], terms: {}, avgLength: 0 });
    const crossRef = await run(crossReference, {
      stage: 'cross_reference',
      upstream: { extract_concepts: graph.artefact! },
    });
    const review = await run(finalReview, {
      stage: 'final_review',
      input,
      upstream: {
        cross_reference: crossRef.artefact!,
        generate_embeddings: embeddings.artefact!,
        build_fts_index: index.artefact!,
      },
    });
    expect((review.artefact as ReviewPacket).attention).toEqual([
      'The document produced no chunks to embed.',
      'The concept graph is empty.',
    ]);
    expect((review.artefact as ReviewPacket).sampleSearch).toBeNull();
  });

  it('fails non-retryably when a dependency artefact is missing', async () => {
    await expect(
      run(finalReview, { stage: 'final_review', input: sample('memo'), upstream: {} }),
    ).rejects.toMatchObject({
      type: 'InvalidInput',
      nonRetryable: true,
      message: expect.stringContaining('needs the artefact of cross_reference'),
    });
  });
});
