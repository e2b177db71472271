/**
 * The document pipeline's stage implementations: thin shells that read the work item, the `with:` config,
 * upstream artefacts and the previous attempt's feedback, call the local algorithms, and report one line.
 * Bad input or config fails non-retryably (see `artefacts.ts`); everything else is deterministic.
 */
import { z } from 'zod';
import type { StageImplementation } from '../../src/activities/registry';
import type { QualityFeedback, StageOutput } from '../../src/model/shapes';
import {
  CONCEPT_TYPES,
  readConfig,
  readDocumentInput,
  readUpstream,
  type ConceptGraph,
  type CrossReferenceArtefact,
  type EmbeddingsArtefact,
  type MarkdownArtefact,
  type SearchIndex,
} from './artefacts';
import { DEFAULT_CONCEPT_OPTIONS, extractConceptGraph, orphanNodes, type ConceptOptions } from './concepts';
import { convertToMarkdown, type ConversionStrategy } from './conversion';
import { crossReference as crossReferenceConcepts } from './cross-reference';
import {
  DEFAULT_CHUNK_OPTIONS,
  EMBEDDING_DIMENSIONS,
  EMBEDDING_MODEL,
  MIN_CHUNK_WORDS,
  embedMarkdown,
} from './embeddings';
import { tokensForWords } from './language';
import { assembleReviewPacket, describeReviewPacket, type ReviewPacket } from './review-packet';
import { buildSearchIndex } from './search-index';

const PdfToMarkdownConfig = z.object({ strategy: z.enum(['plain', 'layout']).default('plain') }).strict();

/**
 * The conversion strategy of an attempt: the one the gate's guidance names; else `layout` after any
 * rejection (the plain reading was judged inadequate, and layout is the stronger reading); else the
 * configured one (default `plain`, the cheap reading that is right for documents without tables).
 */
export function chooseStrategy(
  feedback: QualityFeedback | null,
  configured: 'plain' | 'layout' = 'plain',
): 'plain' | 'layout' {
  const guided = guidance(feedback).strategy;
  if (guided === 'plain' || guided === 'layout') return guided;
  return feedback ? 'layout' : configured;
}

/** `pdf_to_markdown`: extracted PDF text → markdown; artefact {@link MarkdownArtefact}. */
export const pdfToMarkdown: StageImplementation = async (ctx) => {
  ctx.signal.throwIfAborted();
  const input = readDocumentInput(ctx);
  const config = readConfig(ctx, PdfToMarkdownConfig, 'pdf_to_markdown');
  const strategy: ConversionStrategy =
    input.format === 'markdown' ? 'passthrough' : chooseStrategy(ctx.feedback, config.strategy);
  const conversion = convertToMarkdown(input.title, input.source, strategy);
  const artefact: MarkdownArtefact = {
    title: input.title,
    markdown: conversion.markdown,
    strategy,
    stats: conversion.stats,
  };
  const { words, headings, tables } = conversion.stats;
  ctx.log.info('converted document to markdown', {
    itemId: ctx.itemId,
    attempt: ctx.attempt,
    strategy,
    words,
    headings,
    tables,
  });
  return completed(
    artefact,
    `markdown: ${words} words, ${plural(headings, 'heading')}, ${plural(tables, 'table')} (strategy ${strategy})`,
  );
};

const ExtractConceptsConfig = z
  .object({
    min_term_count: z.number().int().min(1).default(DEFAULT_CONCEPT_OPTIONS.minTermCount),
    min_phrase_count: z.number().int().min(1).default(DEFAULT_CONCEPT_OPTIONS.minPhraseCount),
    max_nodes: z.number().int().min(1).default(DEFAULT_CONCEPT_OPTIONS.maxNodes),
  })
  .strict();

/**
 * Extraction settings for an attempt, from config and the previous attempt's feedback: too few nodes lowers
 * the mention thresholds by one per retry (down to 1); orphans or a disconnected graph switch to paragraph
 * linking. Guidance may set `linking` and `min_term_count` directly.
 */
export function conceptOptionsFor(
  config: z.output<typeof ExtractConceptsConfig>,
  feedback: QualityFeedback | null,
  attempt: number,
): ConceptOptions {
  const options: ConceptOptions = {
    minTermCount: config.min_term_count,
    minPhraseCount: config.min_phrase_count,
    maxNodes: config.max_nodes,
    linking: 'sentence',
  };
  if (!feedback) return options;
  const failed = new Set(feedback.failedCriteria.filter((c) => !c.passed).map((c) => c.name));
  const hint = guidance(feedback);
  if (failed.has('min_nodes')) {
    const relief = Math.max(1, attempt - 1);
    options.minTermCount = Math.max(1, options.minTermCount - relief);
    options.minPhraseCount = Math.max(1, options.minPhraseCount - relief);
  }
  if (typeof hint.min_term_count === 'number' && hint.min_term_count >= 1)
    options.minTermCount = Math.floor(hint.min_term_count);
  if (failed.has('no_orphans') || failed.has('connected') || hint.linking === 'paragraph')
    options.linking = 'paragraph';
  return options;
}

/** `extract_concepts`: markdown → concept graph; artefact {@link ConceptGraph}. */
export const extractConcepts: StageImplementation = async (ctx) => {
  ctx.signal.throwIfAborted();
  const { title, markdown } = readUpstream(ctx, 'pdf_to_markdown');
  const options = conceptOptionsFor(
    readConfig(ctx, ExtractConceptsConfig, 'extract_concepts'),
    ctx.feedback,
    ctx.attempt,
  );
  const graph: ConceptGraph = extractConceptGraph(title, markdown, options);
  const orphans = orphanNodes(graph).length;
  ctx.log.info('extracted concept graph', {
    itemId: ctx.itemId,
    attempt: ctx.attempt,
    nodes: graph.nodes.length,
    edges: graph.edges.length,
    orphans,
    ...options,
  });
  const breakdown = CONCEPT_TYPES.map((type) =>
    plural(graph.nodes.filter((node) => node.type === type).length, type),
  ).join(', ');
  return completed(
    graph,
    `concepts: ${plural(graph.nodes.length, 'node')} (${breakdown}), ${plural(graph.edges.length, 'edge')}, ${plural(orphans, 'orphan')} (${options.linking} linking)`,
  );
};

const GenerateEmbeddingsConfig = z
  .object({
    max_tokens: z.number().int().min(tokensForWords(MIN_CHUNK_WORDS)).default(DEFAULT_CHUNK_OPTIONS.maxTokens),
    overlap_tokens: z.number().int().min(0).default(DEFAULT_CHUNK_OPTIONS.overlapTokens),
  })
  .strict()
  .refine((c) => c.overlap_tokens < c.max_tokens / 2, {
    message: 'overlap_tokens must be less than half of max_tokens',
    path: ['overlap_tokens'],
  });

/** `generate_embeddings`: markdown → chunks with hashed bag-of-words vectors; artefact {@link EmbeddingsArtefact}. */
export const generateEmbeddings: StageImplementation = async (ctx) => {
  ctx.signal.throwIfAborted();
  const { markdown } = readUpstream(ctx, 'pdf_to_markdown');
  const config = readConfig(ctx, GenerateEmbeddingsConfig, 'generate_embeddings');
  const chunks = embedMarkdown(markdown, { maxTokens: config.max_tokens, overlapTokens: config.overlap_tokens });
  const artefact: EmbeddingsArtefact = {
    model: EMBEDDING_MODEL,
    dimensions: EMBEDDING_DIMENSIONS,
    maxTokens: config.max_tokens,
    overlapTokens: config.overlap_tokens,
    chunks,
  };
  const largest = chunks.reduce((max, chunk) => Math.max(max, chunk.tokens), 0);
  ctx.log.info('embedded chunks', { itemId: ctx.itemId, chunks: chunks.length, largest, maxTokens: config.max_tokens });
  return completed(
    artefact,
    `embeddings: ${plural(chunks.length, 'chunk')} ≤ ${largest} tokens (budget ${config.max_tokens}), ${EMBEDDING_DIMENSIONS} dimensions`,
  );
};

/** `build_fts_index`: markdown → inverted index with one document per section; artefact {@link SearchIndex}. */
export const buildFtsIndex: StageImplementation = async (ctx) => {
  ctx.signal.throwIfAborted();
  const { markdown } = readUpstream(ctx, 'pdf_to_markdown');
  const index: SearchIndex = buildSearchIndex(markdown);
  const terms = Object.keys(index.terms).length;
  const postings = Object.values(index.terms).reduce((sum, list) => sum + list.length, 0);
  ctx.log.info('built search index', { itemId: ctx.itemId, sections: index.documents.length, terms, postings });
  return completed(
    index,
    `fts index: ${plural(index.documents.length, 'section')}, ${plural(terms, 'term')}, ${plural(postings, 'posting')}`,
  );
};

/** `cross_reference`: concept graph → concepts linked through shared sections; artefact {@link CrossReferenceArtefact}. */
export const crossReference: StageImplementation = async (ctx) => {
  ctx.signal.throwIfAborted();
  const artefact: CrossReferenceArtefact = crossReferenceConcepts(readUpstream(ctx, 'extract_concepts'));
  ctx.log.info('cross-referenced concepts', {
    itemId: ctx.itemId,
    concepts: artefact.links.length,
    crossSection: artefact.crossSection.length,
    unlinked: artefact.unlinked.length,
  });
  return completed(
    artefact,
    `cross references: ${plural(artefact.links.length, 'concept')} over ${plural(artefact.sections.length, 'section')}, ${artefact.crossSection.length} span several sections, ${artefact.unlinked.length} unlinked`,
  );
};

/** `final_review`: the packet a person signs off (the stage's review policy is `always`); artefact {@link ReviewPacket}. */
export const finalReview: StageImplementation = async (ctx) => {
  ctx.signal.throwIfAborted();
  const packet: ReviewPacket = assembleReviewPacket({
    title: readDocumentInput(ctx).title,
    crossReference: readUpstream(ctx, 'cross_reference'),
    embeddings: readUpstream(ctx, 'generate_embeddings'),
    index: readUpstream(ctx, 'build_fts_index'),
  });
  ctx.log.info('assembled review packet', {
    itemId: ctx.itemId,
    concepts: packet.concepts.total,
    chunks: packet.embeddings.chunks,
    attention: packet.attention.length,
  });
  return completed(packet, describeReviewPacket(packet));
};

function completed(artefact: StageOutput['artefact'], summary: string): StageOutput {
  return { outcome: 'completed', artefact, summary };
}

function guidance(feedback: QualityFeedback | null): Record<string, unknown> {
  const value = feedback?.guidance;
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : {};
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

/** Every stage implementation of the document pipeline, by registered name. */
export const DOCUMENT_STAGES: Readonly<Record<string, StageImplementation>> = {
  pdf_to_markdown: pdfToMarkdown,
  extract_concepts: extractConcepts,
  generate_embeddings: generateEmbeddings,
  build_fts_index: buildFtsIndex,
  cross_reference: crossReference,
  final_review: finalReview,
};
