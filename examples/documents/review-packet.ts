/**
 * The final review packet (seed 000, use case B, "final concept graph review"): what a person needs to sign
 * off a processed document without opening every artefact — counts, the main concepts, chunk sizes, index
 * size, a sample search run against the index, and the findings worth a look.
 */
import { search, type SearchHit } from './search-index';
import type { SearchIndex } from './artefacts';
import { compareText } from './language';

/** The upstream artefacts the packet is made from, as far as it reads them. */
export interface ReviewSources {
  title: string;
  crossReference: {
    links: { concept: string; label: string; type: string; count: number; sections: string[] }[];
    crossSection: string[];
    unlinked: string[];
  };
  embeddings: { dimensions: number; model?: unknown; maxTokens?: unknown; chunks: { id: string; tokens: number }[] };
  index: SearchIndex;
}

/** Artefact of `final_review`. */
export type ReviewPacket = {
  title: string;
  concepts: {
    total: number;
    byType: Record<string, number>;
    top: { id: string; label: string; type: string; count: number; sections: number }[];
    crossSection: number;
    unlinked: string[];
  };
  embeddings: {
    chunks: number;
    dimensions: number;
    maxChunkTokens: number;
    meanChunkTokens: number;
    budget: number | null;
  };
  index: { sections: number; terms: number; postings: number; avgLength: number };
  sampleSearch: { query: string; hits: SearchHit[] } | null;
  /** Findings the reviewer should check, one sentence each; empty when nothing stands out. */
  attention: string[];
};

/** Concepts listed in the packet. */
const TOP_CONCEPTS = 5;

/** Assembles the review packet. */
export function assembleReviewPacket(sources: ReviewSources): ReviewPacket {
  const { crossReference, embeddings, index } = sources;
  const byType: Record<string, number> = {};
  for (const link of crossReference.links) byType[link.type] = (byType[link.type] ?? 0) + 1;
  const ranked = [...crossReference.links].sort((a, b) => b.count - a.count || compareText(a.concept, b.concept));
  const top = ranked.slice(0, TOP_CONCEPTS).map((link) => ({
    id: link.concept,
    label: link.label,
    type: link.type,
    count: link.count,
    sections: link.sections.length,
  }));

  // Search for the most mentioned concept that is not a heading: a heading trivially finds its own section.
  const probe = ranked.find((link) => link.type !== 'heading') ?? ranked[0];
  const sampleSearch = probe ? { query: probe.label, hits: search(index, probe.label, { limit: 3 }) } : null;

  const tokens = embeddings.chunks.map((chunk) => chunk.tokens);
  const budget = typeof embeddings.maxTokens === 'number' ? embeddings.maxTokens : null;
  const postings = Object.values(index.terms).reduce((sum, list) => sum + list.length, 0);

  const attention: string[] = [];
  if (crossReference.unlinked.length > 0) {
    attention.push(
      `${crossReference.unlinked.length} concept(s) share no section with any other: ${crossReference.unlinked.join(', ')}.`,
    );
  }
  if (budget !== null) {
    const over = embeddings.chunks.filter((chunk) => chunk.tokens > budget);
    if (over.length > 0)
      attention.push(
        `${over.length} chunk(s) exceed the ${budget}-token budget: ${over.map((chunk) => chunk.id).join(', ')}.`,
      );
  }
  if (sampleSearch && sampleSearch.hits.length === 0)
    attention.push(
      `Searching the index for "${sampleSearch.query}" finds nothing, though it is the most mentioned concept.`,
    );
  if (embeddings.chunks.length === 0) attention.push('The document produced no chunks to embed.');
  if (crossReference.links.length === 0) attention.push('The concept graph is empty.');

  return {
    title: sources.title,
    concepts: {
      total: crossReference.links.length,
      byType,
      top,
      crossSection: crossReference.crossSection.length,
      unlinked: crossReference.unlinked,
    },
    embeddings: {
      chunks: embeddings.chunks.length,
      dimensions: embeddings.dimensions,
      maxChunkTokens: tokens.length > 0 ? Math.max(...tokens) : 0,
      meanChunkTokens: tokens.length > 0 ? Math.round(tokens.reduce((a, b) => a + b, 0) / tokens.length) : 0,
      budget,
    },
    index: {
      sections: index.documents.length,
      terms: Object.keys(index.terms).length,
      postings,
      avgLength: index.avgLength,
    },
    sampleSearch,
    attention,
  };
}

/** One line for the history and the reviewer's list. */
export function describeReviewPacket(packet: ReviewPacket): string {
  const search = packet.sampleSearch
    ? `; search "${packet.sampleSearch.query}" → ${packet.sampleSearch.hits[0]?.heading || packet.sampleSearch.hits[0]?.id || 'no hits'}`
    : '';
  const notes = packet.attention.length > 0 ? `; ${packet.attention.length} finding(s) to check` : '';
  return (
    `review packet for "${packet.title}": ${packet.concepts.total} concepts (${packet.concepts.crossSection} span sections), ` +
    `${packet.embeddings.chunks} chunks ≤ ${packet.embeddings.maxChunkTokens} tokens, ` +
    `${packet.index.terms} index terms over ${packet.index.sections} sections${search}${notes}`
  );
}
