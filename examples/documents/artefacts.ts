/**
 * What the document stages exchange: the work item's input and each stage's artefact. Artefacts are plain
 * JSON types (they cross activity boundaries and may be replaced by a reviewer's edits), so every stage
 * reads its input and upstream artefacts through a zod schema and reports a bad shape as a non-retryable
 * failure: retrying cannot fix malformed input, a person has to.
 */
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import type { StageContext } from '../../src/activities/registry';
import type { Json } from '../../src/model/shapes';

/** Failure type of input no attempt can process; names it in the history and for `nonRetryableErrorTypes`. */
export const INVALID_INPUT = 'InvalidInput';
/** Failure type of a stage or gate `with:` configuration that does not fit the implementation. */
export const INVALID_CONFIG = 'InvalidConfig';

/** A work item of the document pipeline: a document's extracted text. */
export const DocumentInputSchema = z.object({
  title: z.string().trim().min(1, 'title must not be empty'),
  /** The text layer of the PDF (or markdown when `format` says so). */
  source: z.string(),
  format: z.enum(['text', 'markdown']).default('text'),
});
/** A parsed work item, `format` defaulted to `text`. */
export type DocumentInput = z.output<typeof DocumentInputSchema>;

/** Artefact of `pdf_to_markdown`. */
export type MarkdownArtefact = {
  title: string;
  markdown: string;
  strategy: 'plain' | 'layout' | 'passthrough';
  stats: { words: number; headings: number; tables: number };
};
/** What readers of a {@link MarkdownArtefact} need; lenient, as a reviewer's edited artefact may drop the bookkeeping. */
export const MarkdownArtefactSchema = z.object({ title: z.string(), markdown: z.string() }).loose();

/** How a concept was found: from a heading, an all-capitals abbreviation, or the text (words and names). */
export const CONCEPT_TYPES = ['heading', 'acronym', 'term'] as const;
export type ConceptType = (typeof CONCEPT_TYPES)[number];

/** A node of the concept graph. */
export type ConceptNode = {
  /** The slug of its label (`-2`, `-3`… on collision); stable for the same document and settings. */
  id: string;
  label: string;
  type: ConceptType;
  /** Mentions in the document. */
  count: number;
  /** Ids of the markdown sections that mention it. */
  sections: string[];
};

/** An undirected, weighted edge; `source` < `target`. */
export type ConceptEdge = {
  source: string;
  target: string;
  /** Sentences (or, for weaker evidence, paragraphs or sections) in which both concepts occur. */
  weight: number;
  /** The strongest evidence for the edge. */
  basis: 'sentence' | 'paragraph' | 'section';
};

/** Artefact of `extract_concepts`. */
export type ConceptGraph = {
  title: string;
  /** `sentence`: edges from sentence co-occurrence only; `paragraph`: orphans also linked by paragraph and section. */
  linking: 'sentence' | 'paragraph';
  sections: { id: string; heading: string }[];
  nodes: ConceptNode[];
  edges: ConceptEdge[];
};
/** The shape a concept graph must have to be read; types are checked by the gate, not here. */
export const ConceptGraphSchema = z.object({
  title: z.string().default(''),
  sections: z.array(z.object({ id: z.string(), heading: z.string() })).default([]),
  nodes: z.array(
    z.object({
      id: z.string().min(1),
      label: z.string(),
      type: z.string(),
      count: z.number().int().nonnegative().default(0),
      sections: z.array(z.string()).default([]),
    }),
  ),
  edges: z.array(z.object({ source: z.string(), target: z.string(), weight: z.number().default(1) })),
});
/** A concept graph as read from an artefact, before its types are checked. */
export type ConceptGraphInput = z.output<typeof ConceptGraphSchema>;

/** One embedded chunk. */
export type EmbeddingChunk = {
  id: string;
  /** Id of the markdown section the chunk comes from. */
  section: string;
  heading: string;
  text: string;
  /** Estimated tokens of heading and text together (see `estimateTokens`). */
  tokens: number;
  vector: number[];
};

/** Artefact of `generate_embeddings`. */
export type EmbeddingsArtefact = {
  model: string;
  dimensions: number;
  maxTokens: number;
  overlapTokens: number;
  chunks: EmbeddingChunk[];
};
const EmbeddingsSchema = z
  .object({
    dimensions: z.number().int().positive(),
    chunks: z.array(
      z.object({ id: z.string(), heading: z.string(), tokens: z.number(), vector: z.array(z.number()) }).loose(),
    ),
  })
  .loose();

/** Artefact of `build_fts_index`: an inverted index with one document per markdown section. */
export type SearchIndex = {
  tokenizer: string;
  documents: { id: string; heading: string; length: number }[];
  /** Stemmed term → postings `[document index, term frequency]`, ascending by document index. */
  terms: Record<string, [number, number][]>;
  /** Mean document length in terms, for BM25's length normalisation. */
  avgLength: number;
};
/** The shape a search index must have to be searched. */
export const SearchIndexSchema = z.object({
  tokenizer: z.string().default(''),
  documents: z.array(z.object({ id: z.string(), heading: z.string(), length: z.number().nonnegative() })),
  terms: z.record(z.string(), z.array(z.tuple([z.number().int().nonnegative(), z.number().positive()]))),
  avgLength: z.number().nonnegative(),
});

/** Where one concept is discussed and which concepts are discussed alongside it. */
export type ConceptReference = {
  concept: string;
  label: string;
  type: string;
  count: number;
  sections: string[];
  /** Concepts sharing at least one section with this one, most shared sections first (at most 8). */
  related: { concept: string; sharedSections: number }[];
};

/** Artefact of `cross_reference`. */
export type CrossReferenceArtefact = {
  sections: { id: string; heading: string; concepts: string[] }[];
  links: ConceptReference[];
  /** Concepts mentioned in two or more sections: the threads that run through the document. */
  crossSection: string[];
  /** Concepts that share no section with any other concept. */
  unlinked: string[];
};
const CrossReferenceSchema = z
  .object({
    links: z.array(
      z
        .object({
          concept: z.string(),
          label: z.string().default(''),
          type: z.string().default('term'),
          count: z.number().default(0),
          sections: z.array(z.string()).default([]),
        })
        .loose(),
    ),
    crossSection: z.array(z.string()).default([]),
    unlinked: z.array(z.string()).default([]),
  })
  .loose();

/** Reads the work item input of a document pipeline stage. */
export function readDocumentInput(ctx: Pick<StageContext, 'input' | 'stage'>): DocumentInput {
  const parsed = DocumentInputSchema.safeParse(ctx.input);
  if (parsed.success) return parsed.data;
  throw invalid(
    ctx.stage,
    'work item input must be { title: string, source: string, format?: "text" | "markdown" }',
    parsed.error,
  );
}

const UPSTREAM = {
  pdf_to_markdown: MarkdownArtefactSchema,
  extract_concepts: ConceptGraphSchema,
  generate_embeddings: EmbeddingsSchema,
  build_fts_index: SearchIndexSchema,
  cross_reference: CrossReferenceSchema,
} as const;
type UpstreamStage = keyof typeof UPSTREAM;

/** Reads a dependency's artefact by stage name, checked against the shape that stage produces. */
export function readUpstream<S extends UpstreamStage>(
  ctx: Pick<StageContext, 'upstream' | 'stage'>,
  stage: S,
): z.output<(typeof UPSTREAM)[S]> {
  const artefact: Json | undefined = ctx.upstream[stage];
  if (artefact === undefined) {
    throw ApplicationFailure.nonRetryable(
      `${ctx.stage}: needs the artefact of ${stage}, which is not among its dependencies' artefacts (${Object.keys(ctx.upstream).join(', ') || 'none'}); add depends_on: [${stage}]`,
      INVALID_INPUT,
    );
  }
  const parsed = UPSTREAM[stage].safeParse(artefact);
  if (parsed.success) return parsed.data as z.output<(typeof UPSTREAM)[S]>;
  throw invalid(ctx.stage, `the artefact of ${stage} has the wrong shape`, parsed.error);
}

/** Reads an implementation's `with:` configuration (absent means all defaults). */
export function readConfig<T extends z.ZodType>(
  ctx: Pick<StageContext, 'config' | 'stage'>,
  schema: T,
  implementation: string,
): z.output<T> {
  const parsed = schema.safeParse(ctx.config ?? {});
  if (parsed.success) return parsed.data;
  throw invalid(ctx.stage, `the with: configuration of ${implementation} is invalid`, parsed.error, INVALID_CONFIG);
}

function invalid(stage: string, what: string, error: z.ZodError, type: string = INVALID_INPUT): ApplicationFailure {
  const issues = error.issues.slice(0, 3).map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
  return ApplicationFailure.nonRetryable(`${stage}: ${what} (${issues.join('; ')})`, type);
}
