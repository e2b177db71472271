/** "Did you mean …?" for names users type: the closest candidate within two edits. */

/**
 * The candidate closest to `word` (at most two edits away), or undefined; the first of equals wins. Failing
 * that, the one candidate that holds the word as a part of its name (`retries` → `max_retries`).
 */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const distance = editDistance(name, word);
    if (distance <= 2 && (!best || distance < best.distance)) best = { name, distance };
  }
  if (best) return best.name;
  const holding = word.length >= 4 ? candidates.filter((name) => name.toLowerCase().includes(word.toLowerCase())) : [];
  return holding.length === 1 ? holding[0] : undefined;
}

/** Levenshtein distance. */
export function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = current;
    }
  }
  return row[b.length]!;
}
