/**
 * Markdown → vector entries (seed 000, use case B, stage 3). Chunks follow the document's structure: a chunk
 * never spans two sections, whole blocks are packed together, and a block too big for the budget is split
 * at sentences (then at words). Consecutive chunks of a section overlap by a few words so a sentence cut at
 * a boundary is still retrievable. Each chunk is embedded locally as a hashed bag of words: no model, fully
 * deterministic, and good enough for lexical similarity between chunks.
 */
import type { EmbeddingChunk } from './artefacts';
import { isStopword, splitSentences, tokensForWords, wordTokens, wordsWithinTokens } from './language';
import { parseMarkdown, type MarkdownBlock } from './markdown';

/** Size of the hashed vectors. */
export const EMBEDDING_DIMENSIONS = 256;
/** Name recorded in the artefact, so vectors from different schemes are never compared. */
export const EMBEDDING_MODEL = `hashed-bow-${EMBEDDING_DIMENSIONS}-v1`;

/** Chunk size limits, in estimated tokens (see `estimateTokens`). */
export interface ChunkOptions {
  maxTokens: number;
  overlapTokens: number;
}

/** Defaults: the seed's "chunks must each be under 512 tokens", with about 10% overlap. */
export const DEFAULT_CHUNK_OPTIONS: ChunkOptions = { maxTokens: 512, overlapTokens: 48 };

/** Below this, chunks would hold a phrase rather than a passage. */
export const MIN_CHUNK_WORDS = 12;

/** A chunk before embedding. */
export interface TextChunk {
  id: string;
  section: string;
  heading: string;
  text: string;
  /** Estimated tokens of heading and text together: what the embedding model would read. */
  tokens: number;
}

/**
 * Splits markdown into chunks of at most `maxTokens` estimated tokens, the section heading included.
 * A heading longer than a quarter of the budget is shortened in the chunk to leave room for text.
 */
export function chunkMarkdown(markdown: string, options: ChunkOptions = DEFAULT_CHUNK_OPTIONS): TextChunk[] {
  if (!Number.isInteger(options.maxTokens) || wordsWithinTokens(options.maxTokens) < MIN_CHUNK_WORDS) {
    throw new RangeError(
      `maxTokens must be a whole number of at least ${tokensForWords(MIN_CHUNK_WORDS)}, got ${options.maxTokens}`,
    );
  }
  const chunks: TextChunk[] = [];
  for (const section of parseMarkdown(markdown)) {
    const pieces = section.blocks.flatMap((block) => blockPieces(block));
    if (pieces.length === 0) continue;
    const maxWords = wordsWithinTokens(options.maxTokens);
    const headingWords = section.heading
      .split(/\s+/)
      .filter(Boolean)
      .slice(0, Math.floor(maxWords / 4));
    const heading = headingWords.join(' ');
    const budget = maxWords - headingWords.length;
    const overlap = Math.min(wordsWithinTokens(options.overlapTokens), Math.floor(budget / 2));

    const texts: string[][] = [];
    let current: string[] = [];
    for (const piece of pieces.flatMap((p) => fitPiece(p, budget))) {
      const words = piece.split(/\s+/).filter(Boolean);
      if (current.length + words.length <= budget) {
        current.push(...(current.length > 0 ? ['\n', ...words] : words));
        continue;
      }
      texts.push(current);
      const tail = overlap > 0 ? current.filter((w) => w !== '\n').slice(-overlap) : [];
      current = tail.length + words.length <= budget ? [...tail, '\n', ...words] : words;
    }
    if (current.length > 0) texts.push(current);

    texts.forEach((words, index) => {
      const text = words
        .join(' ')
        .replace(/ ?\n ?/g, '\n')
        .trim();
      const counted = words.filter((w) => w !== '\n').length + headingWords.length;
      chunks.push({
        id: `${section.id}/${index + 1}`,
        section: section.id,
        heading,
        text,
        tokens: tokensForWords(counted),
      });
    });
  }
  return chunks;
}

/** A block as text to pack; {@link fitPiece} splits it when it does not fit. */
function blockPieces(block: MarkdownBlock): string[] {
  // Lines of a paragraph are one run of prose; lines of lists and tables are their split points.
  return [block.kind === 'paragraph' ? block.text.replace(/\s*\n\s*/g, ' ') : block.text];
}

function fitPiece(piece: string, budget: number): string[] {
  const words = piece.split(/\s+/).filter(Boolean);
  if (words.length <= budget) return [piece];
  // Too big whole: at sentences for prose, at lines for lists and tables, at words as a last resort.
  const parts = piece.includes('\n') ? piece.split('\n') : splitSentences(piece);
  if (parts.length > 1) return parts.flatMap((part) => fitPiece(part, budget));
  const out: string[] = [];
  for (let i = 0; i < words.length; i += budget) out.push(words.slice(i, i + budget).join(' '));
  return out;
}

/**
 * Embeds text as a {@link EMBEDDING_DIMENSIONS}-dimensional hashed bag of words (feature hashing, Weinberger
 * et al. 2009): lowercase content words and adjacent-word bigrams are hashed to a dimension and a sign,
 * weighted 1 + ln(count) (bigrams half), and the vector is L2-normalised and rounded to 4 decimals. The
 * signed hash keeps collisions from adding up in expectation. Text without content words gives the zero
 * vector.
 */
export function embedText(text: string): number[] {
  const words = wordTokens(text)
    .map((token) => token.text.toLowerCase())
    .filter((word) => !isStopword(word));
  const occurrences = new Map<string, number>();
  const add = (feature: string): void => {
    occurrences.set(feature, (occurrences.get(feature) ?? 0) + 1);
  };
  words.forEach((word, i) => {
    add(`w:${word}`);
    if (i > 0) add(`b:${words[i - 1]} ${word}`);
  });
  const vector = new Array<number>(EMBEDDING_DIMENSIONS).fill(0);
  for (const [feature, count] of occurrences) {
    const hash = featureHash(feature);
    const weight = (feature.startsWith('b:') ? BIGRAM_WEIGHT : 1) * (1 + Math.log(count));
    const dimension = hash % EMBEDDING_DIMENSIONS;
    vector[dimension] = (vector[dimension] ?? 0) + (hash & 0x80000000 ? -weight : weight);
  }
  const norm = Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
  return vector.map((v) => (norm === 0 ? 0 : Math.round((v / norm) * 10_000) / 10_000));
}

// Bigrams add word order and phrases, but should not outweigh the words themselves.
const BIGRAM_WEIGHT = 0.5;

/** 32-bit FNV-1a over UTF-16 code units, finished with MurmurHash3's avalanche so every bit is usable. */
function featureHash(feature: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < feature.length; i++) {
    h ^= feature.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Cosine similarity of two vectors of equal length (their dot product when both are unit length). */
export function cosineSimilarity(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** Chunks and embeds a markdown document. */
export function embedMarkdown(markdown: string, options: ChunkOptions = DEFAULT_CHUNK_OPTIONS): EmbeddingChunk[] {
  return chunkMarkdown(markdown, options).map((chunk) => ({
    ...chunk,
    vector: embedText(`${chunk.heading}\n${chunk.text}`),
  }));
}
