/**
 * The English text handling every document stage shares: word tokens, a stopword list, a light suffix
 * stemmer, sentence splitting, word counts and the token estimate used for chunk budgets. Everything is
 * deterministic and local, so the same document always yields the same concepts, chunks and index.
 */

/**
 * Function words that carry no topic: the usual English stopword list (articles, pronouns, auxiliaries,
 * prepositions, conjunctions, common adverbs) plus a few words frequent in reports but never a concept.
 */
export const STOPWORDS: ReadonlySet<string> = new Set(
  `a about above after again against all almost also although am among an and another any anyone anything are
  aren't around as at be became because become been before being below between both but by can cannot can't
  could couldn't did didn't do does doesn't doing don't done down during each either else enough etc even ever
  every few for from further get gets got had hadn't has hasn't have haven't having he he'd he'll her here
  here's hers herself he's him himself his how however how's i i'd i'll i'm into is isn't it its it's itself
  i've just least less let let's like made make many may me might more most much must mustn't my myself need
  needs neither never no nor not now of off often on once one only onto or other others otherwise ought our
  ours ourselves out over own per perhaps please quite rather really same shall shan't she she'd she'll she's
  should shouldn't since so some such than that that's the their theirs them themselves then there therefore
  there's these they they'd they'll they're they've this those though through thus to too toward towards
  under until up upon us use used uses using very via was wasn't we we'd well we'll were we're weren't we've
  what what's whatever when when's where where's whether which while who whoever whole whom who's whose why
  why's will with within without won't would wouldn't yes yet you you'd you'll your you're yours yourself
  yourselves you've first second third next last new cent percent`
    .split(/\s+/)
    .filter((word) => word.length > 0),
);

/** True for a stopword; case-insensitive. */
export function isStopword(word: string): boolean {
  return STOPWORDS.has(word.toLowerCase().replace(/’/g, "'"));
}

/** A word as it appeared in the text, with its character offset. */
export interface WordToken {
  text: string;
  offset: number;
}

// A word starts with a letter or digit and may hold inner hyphens and apostrophes ("on-call", "team's").
const WORD = /[\p{L}\p{N}]+(?:['’-][\p{L}\p{N}]+)*/gu;

/** Splits text into words, keeping their original spelling and position; punctuation is dropped. */
export function wordTokens(text: string): WordToken[] {
  const out: WordToken[] = [];
  for (const match of text.matchAll(WORD)) out.push({ text: match[0], offset: match.index });
  return out;
}

/** Number of words in text; markdown punctuation (`#`, `|`, `---`, bullets) does not count. */
export function countWords(text: string): number {
  let count = 0;
  for (const piece of text.split(/\s+/)) if (/[\p{L}\p{N}]/u.test(piece)) count++;
  return count;
}

/**
 * English text averages about 1.3 subword tokens per whitespace-separated word in the BPE vocabularies of
 * current embedding and chat models (the familiar "a token is three quarters of a word"). Chunk budgets
 * are checked against this estimate, never against a real tokenizer, so the stages stay offline.
 */
export const TOKENS_PER_WORD = 1.3;
const TENTHS_PER_WORD = Math.round(TOKENS_PER_WORD * 10);

/** Estimated model tokens of a text: whitespace-separated pieces × {@link TOKENS_PER_WORD}, rounded up. */
export function estimateTokens(text: string): number {
  return tokensForWords(text.split(/\s+/).filter((piece) => piece.length > 0).length);
}

/** {@link estimateTokens} for a known number of words. */
export function tokensForWords(words: number): number {
  // Integer tenths, so 10 words are exactly 13 tokens rather than 13.000000000000002 rounded up to 14.
  return Math.ceil((words * TENTHS_PER_WORD) / 10);
}

/** The most words whose estimate stays within a token budget. */
export function wordsWithinTokens(tokens: number): number {
  return Math.floor((tokens * 10) / TENTHS_PER_WORD);
}

const VOWEL = /[aeiouy]/;

/**
 * A light suffix-stripping stemmer (plural, -ing, -ed, final -e), in the spirit of Porter's step 1
 * without its later steps: enough to make "indexes", "indexing" and "indexed" meet at "index" while
 * staying predictable. Expects a lowercase word; words of three letters or fewer are returned unchanged.
 */
export function stem(word: string): string {
  let w = word.replace(/’/g, "'").replace(/'s$/, '');
  if (w.length <= 3 || !/^[a-z]/.test(w)) return w;
  if (w.endsWith('sses')) w = w.slice(0, -2);
  else if (w.endsWith('ies') && w.length > 4) w = `${w.slice(0, -3)}y`;
  else if (/(?:x|ch|sh|ss|zz)es$/.test(w)) w = w.slice(0, -2);
  else if (w.endsWith('s') && !/(?:ss|us|is)$/.test(w)) w = w.slice(0, -1);

  if (w.endsWith('eed')) w = w.slice(0, -1);
  for (const suffix of ['ing', 'ed']) {
    if (!w.endsWith(suffix)) continue;
    const base = w.slice(0, -suffix.length);
    if (base.length >= 3 && VOWEL.test(base)) {
      // "running" -> "run", but keep the double letters English writes doubled ("install", "press").
      w = /([b-df-hj-kmnp-rtv-z])\1$/.test(base) && !/(?:ll|ss|zz|ff)$/.test(base) ? base.slice(0, -1) : base;
    }
    break;
  }
  // Drop a final e so "configure" and "configured" (-> "configur") meet.
  if (w.endsWith('e') && w.length > 3) w = w.slice(0, -1);
  return w;
}

/**
 * Search and matching terms of a text: lowercase words, stopwords and single characters removed, stemmed.
 * Numbers are kept (they name versions, quarters and error codes).
 */
export function indexTerms(text: string): string[] {
  const out: string[] = [];
  for (const { text: word } of wordTokens(text)) {
    const lower = word.toLowerCase();
    if (lower.length < 2 || isStopword(lower)) continue;
    out.push(stem(lower));
  }
  return out;
}

/**
 * Splits prose into sentences at `.`, `!` or `?` followed by whitespace and a capital letter, digit or
 * opening quote; decimals ("99.5%") and lowercase continuations stay inside one sentence.
 */
export function splitSentences(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+(?=["'“([]?[\p{Lu}\p{N}])/u)
    .map((sentence) => sentence.trim())
    .filter((sentence) => sentence.length > 0);
}

/** A URL- and id-friendly slug: lowercase ASCII letters and digits joined by single hyphens. */
export function slugify(text: string): string {
  const slug = text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return slug.length > 0 ? slug : 'untitled';
}

/** Orders strings by UTF-16 code units, not by locale, so every worker sorts alike. */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
