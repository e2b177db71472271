/**
 * Markdown → full-text search entries (seed 000, use case B, stage 4): an inverted index with one indexed
 * document per markdown section (heading and body), terms normalised by {@link indexTerms} (lowercase,
 * stopwords removed, light stemming), postings with term frequencies, and Okapi BM25 ranking over it.
 */
import type { SearchIndex } from './artefacts';
import { compareText, indexTerms } from './language';
import { parseMarkdown } from './markdown';

/** Recorded in the artefact: queries must be normalised the same way the index was. */
export const TOKENIZER = 'lowercase+stopwords+light-stem/v1';

/** Builds the inverted index of a markdown document, one document per section that has text. */
export function buildSearchIndex(markdown: string): SearchIndex {
  const documents: SearchIndex['documents'] = [];
  const postings = new Map<string, [number, number][]>();
  // A heading with no text under it (the title, a heading straight before its first subheading) has
  // nothing to show as a result.
  for (const section of parseMarkdown(markdown).filter((s) => s.blocks.length > 0)) {
    const body = section.blocks.flatMap((block) => block.units).join('\n');
    const terms = indexTerms(`${section.heading}\n${body}`);
    if (terms.length === 0) continue;
    const index = documents.length;
    documents.push({ id: section.id, heading: section.heading, length: terms.length });
    const frequencies = new Map<string, number>();
    for (const term of terms) frequencies.set(term, (frequencies.get(term) ?? 0) + 1);
    for (const [term, tf] of frequencies) {
      const list = postings.get(term) ?? [];
      list.push([index, tf]);
      postings.set(term, list);
    }
  }
  const total = documents.reduce((sum, doc) => sum + doc.length, 0);
  return {
    tokenizer: TOKENIZER,
    documents,
    // Object.fromEntries defines own properties, so terms such as "constructor" are plain keys.
    terms: Object.fromEntries([...postings].sort(([a], [b]) => compareText(a, b))),
    avgLength: documents.length === 0 ? 0 : Math.round((total / documents.length) * 100) / 100,
  };
}

/** BM25 parameters; the common defaults (Robertson & Zaragoza 2009). */
export interface Bm25Options {
  k1: number;
  b: number;
  limit: number;
}

/** One ranked section (a type alias, so it stays assignable to JSON in artefacts). */
export type SearchHit = {
  id: string;
  heading: string;
  score: number;
};

const DEFAULT_BM25: Bm25Options = { k1: 1.2, b: 0.75, limit: 5 };

/**
 * Ranks the index's sections for a free-text query with Okapi BM25:
 * score = Σ idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·len/avgLength)), idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5)).
 * Sections matching no query term are not returned; ties keep index order.
 */
export function search(index: SearchIndex, query: string, options: Partial<Bm25Options> = {}): SearchHit[] {
  const { k1, b, limit } = { ...DEFAULT_BM25, ...options };
  const n = index.documents.length;
  const scores = new Map<number, number>();
  for (const term of new Set(indexTerms(query))) {
    if (!Object.hasOwn(index.terms, term)) continue;
    const postings = index.terms[term] ?? [];
    const idf = Math.log(1 + (n - postings.length + 0.5) / (postings.length + 0.5));
    for (const [doc, tf] of postings) {
      const length = index.documents[doc]?.length ?? 0;
      const norm = index.avgLength > 0 ? 1 - b + (b * length) / index.avgLength : 1;
      scores.set(doc, (scores.get(doc) ?? 0) + (idf * tf * (k1 + 1)) / (tf + k1 * norm));
    }
  }
  return [...scores]
    .sort((x, y) => y[1] - x[1] || x[0] - y[0])
    .slice(0, limit)
    .flatMap(([doc, score]) => {
      const document = index.documents[doc];
      return document ? [{ id: document.id, heading: document.heading, score: Math.round(score * 1000) / 1000 }] : [];
    });
}
