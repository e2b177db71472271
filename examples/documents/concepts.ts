/**
 * Markdown → concept graph (seed 000, use case B, stage 2), without a model: candidate concepts are section
 * headings, all-capital abbreviations, capitalised multi-word names ("Search Indexer") and frequent content
 * words; the ones mentioned often enough become nodes; two nodes are linked when a sentence mentions both.
 * Mentions are matched on stemmed words, longest concept first, so "Search Indexer" is not also counted as
 * "search" and "indexer".
 */
import type { ConceptEdge, ConceptGraph, ConceptNode, ConceptType } from './artefacts';
import { compareText, isStopword, slugify, splitSentences, stem, wordTokens } from './language';
import { parseMarkdown, type MarkdownSection } from './markdown';

/** Thresholds and linking mode of one extraction. */
export interface ConceptOptions {
  /** Mentions a single word needs to become a concept. */
  minTermCount: number;
  /** Mentions a multi-word name or an acronym needs. */
  minPhraseCount: number;
  /** At most this many nodes; headings first, then by mentions. */
  maxNodes: number;
  /**
   * `sentence`: edges only where a sentence mentions both concepts. `paragraph`: in addition, a concept no
   * sentence links is linked to the concepts of the paragraphs that mention it, and a heading to the
   * concepts of its section: weaker evidence, used when the gate found orphans.
   */
  linking: 'sentence' | 'paragraph';
}

/** First-attempt settings: strict enough that the graph holds what the document is about. */
export const DEFAULT_CONCEPT_OPTIONS: ConceptOptions = {
  minTermCount: 3,
  minPhraseCount: 2,
  maxNodes: 40,
  linking: 'sentence',
};

interface Token {
  surface: string;
  stem: string;
  /** Function words take part in names ("Bank of England") but are never a concept alone. */
  stop: boolean;
  /** Offset in the sentence, to tell words separated by a space from words separated by punctuation. */
  offset: number;
}

interface Sentence {
  tokens: Token[];
  text: string;
  /** Headings and all-capital lines give no casing evidence. */
  caseless: boolean;
  passage: number;
  section: string;
}

interface Candidate {
  key: string[];
  type: ConceptType;
  /** Spellings seen, with how often; the label is chosen from them. */
  surfaces: Map<string, number>;
  /** The heading's text, for heading concepts. */
  heading?: string;
}

interface Mention {
  key: string;
  sentence: number;
}

const TYPE_RANK: Record<ConceptType, number> = { heading: 3, acronym: 2, term: 1 };
const ACRONYM = /^[A-Z][A-Z0-9]{1,5}s?$/;
const ROMAN_NUMERAL = /^[IVXLCDM]+$/;
const NUMBERING = /^\d+(?:\.\d+)*\.?\s+/;

/** Builds the concept graph of a markdown document. */
export function extractConceptGraph(
  title: string,
  markdown: string,
  options: ConceptOptions = DEFAULT_CONCEPT_OPTIONS,
): ConceptGraph {
  const sections = parseMarkdown(markdown).filter((section) => section.level !== 1 || section.blocks.length > 0);
  const sentences = readSentences(sections);
  const candidates = findCandidates(sections, sentences);

  // Dropping a weak candidate frees its words for others, so select until the set stops changing.
  let selected = [...candidates.values()];
  for (let round = 0; round < 5; round++) {
    const counts = countBy(matchMentions(sentences, selected), (m) => m.key);
    const kept = selected.filter((c) => keeps(c, counts.get(c.key.join(' ')) ?? 0, options));
    const done = kept.length === selected.length;
    selected = kept;
    if (done) break;
  }
  const firstCounts = countBy(matchMentions(sentences, selected), (m) => m.key);
  selected = selected
    .map((candidate) => ({ candidate, count: firstCounts.get(candidate.key.join(' ')) ?? 0 }))
    .sort(
      (a, b) =>
        TYPE_RANK[b.candidate.type] - TYPE_RANK[a.candidate.type] ||
        b.count - a.count ||
        b.candidate.key.length - a.candidate.key.length ||
        compareText(a.candidate.key.join(' '), b.candidate.key.join(' ')),
    )
    .slice(0, options.maxNodes)
    .map(({ candidate }) => candidate);

  const mentions = matchMentions(sentences, selected);
  const ids = assignIds(selected);
  const nodes: ConceptNode[] = selected.map((candidate) => {
    const key = candidate.key.join(' ');
    const mine = mentions.filter((m) => m.key === key);
    return {
      id: ids.get(key)!,
      label: labelOf(candidate),
      type: candidate.type,
      count: mine.length,
      sections: unique(mine.map((m) => sentences[m.sentence]!.section)),
    };
  });
  const edges = linkConcepts(
    nodes,
    mentions.map((m) => ({ id: ids.get(m.key)!, sentence: sentences[m.sentence]! })),
    sections,
    options.linking,
  );
  nodes.sort((a, b) => b.count - a.count || compareText(a.id, b.id));
  return {
    title,
    linking: options.linking,
    sections: sections.map((section) => ({ id: section.id, heading: section.heading })),
    nodes,
    edges,
  };
}

function keeps(candidate: Candidate, count: number, options: ConceptOptions): boolean {
  if (candidate.type === 'heading') return true;
  if (candidate.type === 'acronym' || candidate.key.length > 1) return count >= options.minPhraseCount;
  return count >= options.minTermCount;
}

/** Sentences of every section, numbered by passage (a paragraph, list, table or heading). */
function readSentences(sections: MarkdownSection[]): Sentence[] {
  const out: Sentence[] = [];
  let passage = 0;
  const add = (text: string, section: string, caseless: boolean): void => {
    const tokens = wordTokens(text).map(({ text: surface, offset }) => toToken(surface, offset));
    if (tokens.length > 0) out.push({ tokens, text, caseless, passage, section: section });
  };
  for (const section of sections) {
    if (section.level >= 2) {
      add(headingLabel(section.heading), section.id, true);
      passage++;
    }
    for (const block of section.blocks) {
      if (block.kind === 'code') continue;
      for (const unit of block.units) {
        const caseless = isAllCapitals(unit);
        for (const sentence of block.kind === 'table' ? [unit] : splitSentences(unit))
          add(sentence, section.id, caseless);
      }
      passage++;
    }
  }
  return out;
}

function toToken(surface: string, offset: number): Token {
  return { surface, offset, stem: stemOf(surface), stop: isStopword(surface) };
}

function stemOf(surface: string): string {
  // "APIs" is the plural of the acronym "API", not a word "apis".
  const word = ACRONYM.test(surface) && surface.endsWith('s') ? surface.slice(0, -1) : surface;
  return stem(word.toLowerCase());
}

function isAllCapitals(text: string): boolean {
  const letters = text.replace(/[^\p{L}]/gu, '');
  return letters.length >= 4 && letters === letters.toUpperCase();
}

/** A heading as a concept label: numbering removed, shouting turned into title case. */
function headingLabel(heading: string): string {
  const text = heading.replace(NUMBERING, '').trim();
  if (!isAllCapitals(text)) return text;
  return text
    .toLowerCase()
    .replace(/(^|[\s-])(\p{L})/gu, (_, before: string, letter: string) => before + letter.toUpperCase());
}

function isAcronym(surface: string): boolean {
  const bare = surface.endsWith('s') ? surface.slice(0, -1) : surface;
  return ACRONYM.test(surface) && (bare.match(/[A-Z]/g) ?? []).length >= 2 && !ROMAN_NUMERAL.test(bare);
}

function findCandidates(sections: MarkdownSection[], sentences: Sentence[]): Map<string, Candidate> {
  const candidates = new Map<string, Candidate>();
  const offer = (tokens: Token[], type: ConceptType, surface: string): void => {
    const key = tokens.map((t) => t.stem);
    const id = key.join(' ');
    const existing = candidates.get(id);
    const candidate = existing ?? { key, type, surfaces: new Map<string, number>() };
    if (!existing) candidates.set(id, candidate);
    if (TYPE_RANK[type] > TYPE_RANK[candidate.type]) candidate.type = type;
    if (type === 'heading') candidate.heading ??= surface;
    candidate.surfaces.set(surface, (candidate.surfaces.get(surface) ?? 0) + 1);
  };

  for (const section of sections) {
    if (section.level < 2) continue;
    const label = headingLabel(section.heading);
    const tokens = wordTokens(label).map(({ text, offset }) => toToken(text, offset));
    // A heading of only function words ("Other") names nothing.
    if (tokens.some((token) => !isStopword(token.surface))) offer(tokens, 'heading', label);
  }

  // Words that also occur in lowercase are ordinary words, even when a sentence starts with them.
  const lowercaseWords = new Set<string>();
  for (const sentence of sentences)
    for (const token of sentence.tokens) if (/^\p{Ll}/u.test(token.surface)) lowercaseWords.add(token.surface);

  for (const sentence of sentences) {
    sentence.tokens.forEach((token, i) => {
      if (isAcronym(token.surface) && !sentence.caseless) offer([token], 'acronym', token.surface.replace(/s$/, ''));
      else if (/\p{L}/u.test(token.surface) && token.surface.length >= 3 && !token.stop && !/^\d/.test(token.surface)) {
        // A capital that only starts the sentence says nothing about the word.
        offer([token], 'term', i === 0 || sentence.caseless ? token.surface.toLowerCase() : token.surface);
      }
    });
    if (sentence.caseless) continue;
    for (const name of capitalisedNames(sentence, lowercaseWords)) offer(name, 'term', sentenceSlice(sentence, name));
  }
  return candidates;
}

/** Runs of two or more capitalised words (or acronyms) separated only by spaces, inner "of" allowed. */
function capitalisedNames(sentence: Sentence, lowercaseWords: Set<string>): Token[][] {
  const names: Token[][] = [];
  let run: Token[] = [];
  const close = (): void => {
    let name = trimStopwords(run);
    while (name.length > 0 && name[0] === sentence.tokens[0] && lowercaseWords.has(name[0]!.surface.toLowerCase()))
      name = trimStopwords(name.slice(1));
    if (name.length >= 2) names.push(name);
    run = [];
  };
  sentence.tokens.forEach((token, i) => {
    const previous = sentence.tokens[i - 1];
    const adjacent =
      previous !== undefined &&
      /^\s+$/.test(sentence.text.slice(previous.offset + previous.surface.length, token.offset));
    const capital = /^\p{Lu}/u.test(token.surface);
    const joiner = token.surface === 'of' && run.length > 0;
    if (run.length > 0 && !adjacent) close();
    if (capital || joiner) run.push(token);
    else close();
  });
  close();
  return names;
}

function trimStopwords(tokens: Token[]): Token[] {
  let start = 0;
  let end = tokens.length;
  while (start < end && tokens[start]!.stop) start++;
  while (end > start && tokens[end - 1]!.stop) end--;
  return tokens.slice(start, end);
}

function sentenceSlice(sentence: Sentence, tokens: Token[]): string {
  const first = tokens[0]!;
  const last = tokens[tokens.length - 1]!;
  return sentence.text.slice(first.offset, last.offset + last.surface.length);
}

/** Finds mentions, longest concept first, each word belonging to at most one mention. */
function matchMentions(sentences: Sentence[], concepts: Candidate[]): Mention[] {
  const byFirst = new Map<string, Candidate[]>();
  for (const concept of concepts) {
    const list = byFirst.get(concept.key[0]!) ?? [];
    list.push(concept);
    byFirst.set(concept.key[0]!, list);
  }
  for (const list of byFirst.values()) list.sort((a, b) => b.key.length - a.key.length);
  const mentions: Mention[] = [];
  sentences.forEach((sentence, index) => {
    const stems = sentence.tokens.map((t) => t.stem);
    for (let i = 0; i < stems.length;) {
      const stop = sentence.tokens[i]!.stop;
      const match = (byFirst.get(stems[i]!) ?? []).find(
        (c) => !(stop && c.key.length === 1) && c.key.every((part, k) => stems[i + k] === part),
      );
      if (match) {
        mentions.push({ key: match.key.join(' '), sentence: index });
        i += match.key.length;
      } else i++;
    }
  });
  return mentions;
}

function assignIds(concepts: Candidate[]): Map<string, string> {
  const ids = new Map<string, string>();
  const used = new Set<string>();
  for (const concept of concepts) {
    const base = slugify(labelOf(concept));
    let id = base;
    for (let n = 2; used.has(id); n++) id = `${base}-${n}`;
    used.add(id);
    ids.set(concept.key.join(' '), id);
  }
  return ids;
}

/**
 * A heading concept is labelled with its heading; other concepts with their most frequent spelling, where a
 * single word written in lowercase somewhere is labelled in lowercase (it is a word, not a name).
 */
function labelOf(concept: Candidate): string {
  if (concept.heading !== undefined) return concept.heading;
  const ranked = [...concept.surfaces]
    .sort((a, b) => b[1] - a[1] || compareText(a[0], b[0]))
    .map(([surface]) => surface);
  const lower = concept.key.length === 1 ? ranked.find((surface) => /^\p{Ll}/u.test(surface)) : undefined;
  return lower ?? ranked[0] ?? concept.key.join(' ');
}

/** Co-occurrence edges; see {@link ConceptOptions.linking}. */
function linkConcepts(
  nodes: ConceptNode[],
  mentions: { id: string; sentence: Sentence }[],
  sections: MarkdownSection[],
  linking: ConceptOptions['linking'],
): ConceptEdge[] {
  const edges = new Map<string, ConceptEdge>();
  const link = (a: string, b: string, basis: ConceptEdge['basis']): void => {
    if (a === b) return;
    const [source, target] = a < b ? [a, b] : [b, a];
    const id = `${source}\u0000${target}`;
    const edge = edges.get(id);
    if (!edge) edges.set(id, { source, target, weight: 1, basis });
    else {
      edge.weight++;
      if (BASIS_RANK[basis] > BASIS_RANK[edge.basis]) edge.basis = basis;
    }
  };
  const bySentence = groupBy(mentions, (m) => m.sentence);
  for (const group of bySentence.values()) pairs(unique(group.map((m) => m.id)), (a, b) => link(a, b, 'sentence'));

  if (linking === 'paragraph') {
    const linked = new Set([...edges.values()].flatMap((e) => [e.source, e.target]));
    const orphans = nodes.filter((node) => !linked.has(node.id));
    const byPassage = groupBy(mentions, (m) => m.sentence.passage);
    for (const orphan of orphans) {
      for (const group of byPassage.values()) {
        const ids = unique(group.map((m) => m.id));
        if (ids.includes(orphan.id)) for (const other of ids) link(orphan.id, other, 'paragraph');
      }
      if (orphan.type !== 'heading') continue;
      // A heading names what its section is about: link it to what the section mentions.
      const own = sections.find(
        (s) => orphan.sections.includes(s.id) && slugify(headingLabel(s.heading)) === slugify(orphan.label),
      );
      if (!own) continue;
      for (const other of unique(mentions.filter((m) => m.sentence.section === own.id).map((m) => m.id)))
        link(orphan.id, other, 'section');
    }
  }
  return [...edges.values()].sort(
    (a, b) => b.weight - a.weight || compareText(a.source, b.source) || compareText(a.target, b.target),
  );
}

const BASIS_RANK: Record<ConceptEdge['basis'], number> = { sentence: 3, paragraph: 2, section: 1 };

/** Node ids without any edge. */
export function orphanNodes(graph: { nodes: { id: string }[]; edges: { source: string; target: string }[] }): string[] {
  const linked = new Set(graph.edges.flatMap((edge) => [edge.source, edge.target]));
  return graph.nodes.filter((node) => !linked.has(node.id)).map((node) => node.id);
}

/** Connected components of the graph, largest first, each a sorted list of node ids. */
export function connectedComponents(graph: {
  nodes: { id: string }[];
  edges: { source: string; target: string }[];
}): string[][] {
  const parent = new Map(graph.nodes.map((node) => [node.id, node.id]));
  const find = (id: string): string => {
    let root = id;
    while (parent.get(root) !== root) root = parent.get(root)!;
    parent.set(id, root);
    return root;
  };
  for (const edge of graph.edges) {
    if (!parent.has(edge.source) || !parent.has(edge.target)) continue;
    parent.set(find(edge.source), find(edge.target));
  }
  const components = groupBy(
    graph.nodes.map((node) => node.id),
    find,
  );
  return [...components.values()]
    .map((ids) => ids.sort())
    .sort((a, b) => b.length - a.length || compareText(a[0]!, b[0]!));
}

function pairs(ids: string[], visit: (a: string, b: string) => void): void {
  for (let i = 0; i < ids.length; i++) for (let j = i + 1; j < ids.length; j++) visit(ids[i]!, ids[j]!);
}

function unique<T>(items: T[]): T[] {
  return [...new Set(items)];
}

function groupBy<T, K>(items: T[], keyOf: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}

function countBy<T>(items: T[], keyOf: (item: T) => string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(keyOf(item), (counts.get(keyOf(item)) ?? 0) + 1);
  return counts;
}
