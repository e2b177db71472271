/**
 * Quality gates of the document pipeline (seed 000 "Quality is evaluated against explicit criteria"). Each
 * gate checks named criteria and, when any fails, rejects with every failed criterion (expected vs actual)
 * and guidance the stage acts on in its next attempt. A gate that cannot judge says so (`uncertain`).
 */
import { z } from 'zod';
import type { GateContext, GateImplementation } from '../../src/activities/registry';
import type { CriterionResult, Json, QualityVerdict } from '../../src/model/shapes';
import { CONCEPT_TYPES, ConceptGraphSchema, MarkdownArtefactSchema, readConfig, readDocumentInput } from './artefacts';
import { connectedComponents, orphanNodes } from './concepts';
import { countPipeTables, countSourceTables, findPageMarkers, removePageLayout } from './conversion';
import { countWords } from './language';

/** Below this many words in the source, a conversion cannot be told apart from a failed one. */
export const MIN_JUDGEABLE_WORDS = 20;

const MarkdownQualityConfig = z
  .object({
    require_tables: z.boolean().default(true),
    min_word_count: z.number().int().min(0).default(100),
  })
  .strict();

/**
 * `markdown_quality`: judges a `pdf_to_markdown` artefact against its source. Criteria: `word_count`
 * (≥ `min_word_count`), `table_preservation` (when `require_tables` and the source has tables: as many
 * markdown pipe tables), `no_residual_page_markers`. Uncertain when the source has fewer than
 * {@link MIN_JUDGEABLE_WORDS} words. Rejections carry guidance `{ strategy: 'layout' }`.
 */
export const markdownQuality: GateImplementation = async (ctx) => {
  const config = readConfig(ctx, MarkdownQualityConfig, 'markdown_quality');
  const input = readDocumentInput(ctx);
  const artefact = MarkdownArtefactSchema.safeParse(ctx.output.artefact);
  if (!artefact.success)
    return shapeRejection('markdown_artefact', '{ title, markdown } with markdown text', ctx.output.artefact, {
      strategy: 'layout',
    });

  const sourceWords = countWords(removePageLayout(input.source, 'layout').join('\n'));
  if (sourceWords < MIN_JUDGEABLE_WORDS) {
    return {
      kind: 'uncertain',
      reason: `the source has only ${sourceWords} words (fewer than ${MIN_JUDGEABLE_WORDS}): too little text to tell a faithful conversion from a failed extraction; compare with the original document`,
    };
  }

  const { markdown } = artefact.data;
  const words = countWords(markdown);
  const criteria: CriterionResult[] = [
    {
      name: 'word_count',
      expected: `≥ ${config.min_word_count}`,
      actual: `${words}`,
      passed: words >= config.min_word_count,
    },
  ];
  const sourceTables = countSourceTables(input.source);
  if (config.require_tables && sourceTables > 0) {
    const tables = countPipeTables(markdown);
    criteria.push({
      name: 'table_preservation',
      expected: `${plural(sourceTables, 'table')} of the source as markdown pipe tables`,
      actual: tables === 0 ? 'no pipe tables (tables flattened into text)' : `${plural(tables, 'pipe table')}`,
      passed: tables >= sourceTables,
    });
  }
  const markers = findPageMarkers(markdown);
  criteria.push({
    name: 'no_residual_page_markers',
    expected: 'no page headers or footers',
    actual: markers.length === 0 ? 'none' : `${markers.length} (first: "${markers[0]}")`,
    passed: markers.length === 0,
  });
  return verdictOf(criteria, {
    strategy: 'layout',
    hint: 'use the column-aware layout reading: recover tables from column gutters and strip footers glued to text lines',
  });
};

const ConceptGraphConfig = z
  .object({
    min_nodes: z.number().int().min(0).default(5),
    require_connected: z.boolean().default(true),
  })
  .strict();

/**
 * `concept_graph`: judges an `extract_concepts` artefact. Criteria: `min_nodes`, `typed_nodes` (every node
 * is a heading, acronym or term), `edge_endpoints` (edges join existing nodes) and, when
 * `require_connected`, `no_orphans` and `connected` (one component). Rejections carry guidance naming what
 * to change: `linking: 'paragraph'` for orphans or components, `relax_thresholds` for too few nodes.
 */
export const conceptGraph: GateImplementation = async (ctx) => {
  const config = readConfig(ctx, ConceptGraphConfig, 'concept_graph');
  const parsed = ConceptGraphSchema.safeParse(ctx.output.artefact);
  if (!parsed.success)
    return shapeRejection(
      'graph_shape',
      '{ nodes: [{ id, label, type }], edges: [{ source, target }] }',
      ctx.output.artefact,
      {},
    );
  const graph = parsed.data;

  const criteria: CriterionResult[] = [
    {
      name: 'min_nodes',
      expected: `≥ ${config.min_nodes} nodes`,
      actual: `${graph.nodes.length}`,
      passed: graph.nodes.length >= config.min_nodes,
    },
  ];
  const untyped = graph.nodes.filter((node) => !(CONCEPT_TYPES as readonly string[]).includes(node.type));
  criteria.push({
    name: 'typed_nodes',
    expected: `every node typed ${CONCEPT_TYPES.join(' | ')}`,
    actual:
      untyped.length === 0
        ? 'all typed'
        : `${untyped.length} not: ${sample(untyped.map((node) => `${node.id} (${node.type || 'no type'})`))}`,
    passed: untyped.length === 0,
  });
  const ids = new Set(graph.nodes.map((node) => node.id));
  const dangling = graph.edges.filter((edge) => !ids.has(edge.source) || !ids.has(edge.target));
  criteria.push({
    name: 'edge_endpoints',
    expected: 'every edge joins two nodes of the graph',
    actual:
      dangling.length === 0
        ? 'all do'
        : `${dangling.length} do not: ${sample(dangling.map((edge) => `${edge.source}–${edge.target}`))}`,
    passed: dangling.length === 0,
  });
  if (config.require_connected) {
    const orphans = orphanNodes(graph);
    const components = connectedComponents({
      nodes: graph.nodes,
      edges: graph.edges.filter((edge) => !dangling.includes(edge)),
    });
    criteria.push({
      name: 'no_orphans',
      expected: 'no node without edges',
      actual: orphans.length === 0 ? 'none' : `${orphans.length}: ${sample(orphans)}`,
      passed: orphans.length === 0,
    });
    criteria.push({
      name: 'connected',
      expected: '1 connected component',
      actual: `${plural(components.length, 'component')}${components.length > 1 ? ` (sizes ${components.map((c) => c.length).join(', ')})` : ''}`,
      passed: components.length === 1,
    });
  }
  const failed = new Set(criteria.filter((c) => !c.passed).map((c) => c.name));
  const guidance: { [key: string]: Json } = {};
  if (failed.has('no_orphans') || failed.has('connected')) guidance.linking = 'paragraph';
  if (failed.has('min_nodes')) guidance.relax_thresholds = true;
  return verdictOf(criteria, guidance);
};

function verdictOf(criteria: CriterionResult[], guidance: { [key: string]: Json }): QualityVerdict {
  const failed = criteria.filter((c) => !c.passed);
  if (failed.length === 0) return { kind: 'accepted' };
  return {
    kind: 'rejected',
    feedback: {
      summary: `${failed.length} of ${plural(criteria.length, 'criterion', 'criteria')} not met: ${failed.map((c) => `${c.name} (expected ${c.expected}, got ${c.actual})`).join('; ')}`,
      failedCriteria: failed,
      guidance,
    },
  };
}

function shapeRejection(
  name: string,
  expected: string,
  artefact: GateContext['output']['artefact'],
  guidance: { [key: string]: Json },
): QualityVerdict {
  const actual =
    artefact === undefined
      ? 'no artefact'
      : `${Array.isArray(artefact) ? 'an array' : typeof artefact} without that shape`;
  return verdictOf([{ name, expected, actual, passed: false }], guidance);
}

function sample(items: string[], shown = 5): string {
  return items.length <= shown
    ? items.join(', ')
    : `${items.slice(0, shown).join(', ')} and ${items.length - shown} more`;
}

function plural(count: number, noun: string, nouns = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : nouns}`;
}

/** Every gate implementation of the document pipeline, by registered name. */
export const DOCUMENT_GATES: Readonly<Record<string, GateImplementation>> = {
  markdown_quality: markdownQuality,
  concept_graph: conceptGraph,
};
