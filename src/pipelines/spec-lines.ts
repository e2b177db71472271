/**
 * Where a problem is in a pipeline file: the line of a field, found from its path in the spec, so that
 * `treadle validate` prints `file:line: field: problem`. Loaded with the loop-file reader and by
 * `validate` when there are problems to place; the YAML parser loads with the first `SpecLines`.
 */
import type * as Yaml from 'yaml';
import { load } from './lazy-modules';

/** Finds lines in one file's text (YAML or JSON, which YAML reads too). */
export class SpecLines {
  private readonly yaml: typeof Yaml;
  private readonly doc: Yaml.Document.Parsed;
  private readonly counter: Yaml.LineCounter;

  constructor(text: string) {
    this.yaml = load.yaml();
    this.counter = new this.yaml.LineCounter();
    this.doc = this.yaml.parseDocument(text, { lineCounter: this.counter });
  }

  /**
   * The line (1-based) of the field at `at` (its key's line), or of the nearest enclosing field the file
   * has; undefined for the whole file. Keys match as written or in snake_case (the spec is read camelCase).
   */
  lineOf(at: readonly (string | number)[]): number | undefined {
    let node: unknown = this.doc.contents;
    let line: number | undefined;
    for (const key of at) {
      if (this.yaml.isSeq(node) && typeof key === 'number') {
        const item = node.items[key];
        if (item === undefined) break;
        line = this.lineAt(item) ?? line;
        node = item;
      } else if (this.yaml.isMap(node)) {
        const pair = node.items.find((p) => {
          const name = this.yaml.isScalar(p.key) ? String(p.key.value) : String(p.key);
          return name === String(key) || name === snake(String(key));
        });
        if (pair === undefined) break;
        line = this.lineAt(pair.key) ?? line;
        node = pair.value;
      } else break;
    }
    return line;
  }

  private lineAt(node: unknown): number | undefined {
    const range = (node as { range?: [number, number, number] } | null)?.range;
    return range ? this.counter.linePos(range[0]).line : undefined;
  }
}

function snake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}
