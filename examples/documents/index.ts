/**
 * The built-in document pipeline: seed 000's use case B ("AI Document Processing") and its API example,
 * with honest local implementations — no network, no model — so it runs end to end offline.
 *
 * ```
 *                   ┌─▶ extract_concepts ─▶ cross_reference ─┐
 * pdf_to_markdown ──┼─▶ generate_embeddings ─────────────────┼─▶ final_review
 *                   └─▶ build_fts_index ─────────────────────┘
 * ```
 *
 * The same pipeline in YAML is `pipeline.yaml` beside this file, with sample work items.
 */
import type { Registry } from '../../src/activities/registry';
import { pipeline } from '../../src/kinds/builder';
import type { PipelineSpec } from '../../src/model/pipeline';
import { DOCUMENT_GATES } from './gates';
import { DOCUMENT_STAGES } from './stages';

/** Name of the pipeline {@link documentPipeline} builds. */
export const DOCUMENT_PIPELINE = 'documents';

/** Registers the document pipeline's stage and gate implementations under their pipeline names; returns the registry. */
export function registerDocumentPipeline(registry: Registry): Registry {
  for (const [name, impl] of Object.entries(DOCUMENT_STAGES)) registry.stage(name, impl);
  for (const [name, impl] of Object.entries(DOCUMENT_GATES)) registry.gate(name, impl);
  return registry;
}

/**
 * The document pipeline spec, shaped like seed 000's API example: gates on conversion and concept
 * extraction, retry budgets that escalate, reviews on escalation, and a final review that always waits
 * for a person.
 */
export function documentPipeline(): PipelineSpec {
  return pipeline(DOCUMENT_PIPELINE)
    .describe(
      'Seed 000 use case B: a PDF text layer becomes markdown, a concept graph, embeddings and a search index, reviewed by a person at the end.',
    )
    .stage('pdf_to_markdown', 'pdf_to_markdown')
    .stage('extract_concepts', 'extract_concepts')
    .stage('generate_embeddings', 'generate_embeddings')
    .stage('build_fts_index', 'build_fts_index')
    .stage('cross_reference', 'cross_reference')
    .stage('final_review', 'final_review')

    .dependency('extract_concepts', 'pdf_to_markdown')
    .dependency('generate_embeddings', 'pdf_to_markdown')
    .dependency('build_fts_index', 'pdf_to_markdown')
    .dependency('cross_reference', 'extract_concepts')
    .dependency('final_review', 'cross_reference')
    .dependency('final_review', 'generate_embeddings')
    .dependency('final_review', 'build_fts_index')

    .qualityGate('pdf_to_markdown', 'markdown_quality', { require_tables: true, min_word_count: 100 })
    .qualityGate('extract_concepts', 'concept_graph', { min_nodes: 5, require_connected: true })

    .retryBudget('pdf_to_markdown', { maxAttempts: 3, attemptTimeout: '120s', onExhausted: 'escalate' })
    .retryBudget('extract_concepts', { maxAttempts: 2, attemptTimeout: '60s', onExhausted: 'escalate' })

    .reviewPolicy('final_review', 'always')
    .reviewPolicy('pdf_to_markdown', 'on_escalation')
    .reviewPolicy('extract_concepts', 'on_escalation')
    .build();
}

export * from './artefacts';
export {
  chooseStrategy,
  conceptOptionsFor,
  pdfToMarkdown,
  extractConcepts,
  generateEmbeddings,
  buildFtsIndex,
  crossReference,
  finalReview,
  DOCUMENT_STAGES,
} from './stages';
export { markdownQuality, conceptGraph, MIN_JUDGEABLE_WORDS, DOCUMENT_GATES } from './gates';
export {
  convertToMarkdown,
  countPipeTables,
  countSourceTables,
  findLaidOutTables,
  findPageMarkers,
  removePageLayout,
  type Conversion,
  type ConversionStrategy,
} from './conversion';
export {
  extractConceptGraph,
  connectedComponents,
  orphanNodes,
  DEFAULT_CONCEPT_OPTIONS,
  type ConceptOptions,
} from './concepts';
export {
  chunkMarkdown,
  embedMarkdown,
  embedText,
  cosineSimilarity,
  EMBEDDING_DIMENSIONS,
  EMBEDDING_MODEL,
  DEFAULT_CHUNK_OPTIONS,
  type ChunkOptions,
  type TextChunk,
} from './embeddings';
export { buildSearchIndex, search, TOKENIZER, type Bm25Options, type SearchHit } from './search-index';
export { crossReference as crossReferenceConcepts } from './cross-reference';
export { assembleReviewPacket, describeReviewPacket, type ReviewPacket } from './review-packet';
export { parseMarkdown, type MarkdownSection, type MarkdownBlock } from './markdown';
