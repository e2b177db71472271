/**
 * Where a list-taking stage kind (approval, fan_out) finds its list: the `items` path in the artefact of
 * the `from` dependency (default: the only dependency; with none, the work item's input). Shared so that
 * both kinds read the same spec words the same way and report the same problems.
 */
import type { Artefact, Json } from '../model/shapes';
import { resolveArtefact, type BlobStore } from '../storage/blob-store';

export interface ListSource {
  /** The upstream stage holding the list; default the only dependency. */
  from?: string;
  /** A dotted path to the list in that artefact; without it, the artefact itself (a non-list is one element). */
  items?: string;
}

/** The elements, and a label naming where they came from (`extract.emails`) for problems. */
export async function resolveList(
  source: ListSource,
  upstream: Record<string, Json>,
  input: Json,
  blobs: BlobStore,
): Promise<{ elements: Json[]; label: string } | { problem: string }> {
  const deps = Object.keys(upstream);
  let root: Json;
  let label: string;
  if (source.from !== undefined) {
    if (!(source.from in upstream))
      return {
        problem: `from: stage "${source.from}" is not among the stage's dependencies (${deps.join(', ') || 'none'}); add it to depends_on`,
      };
    root = (await resolveArtefact(upstream[source.from] as Artefact, blobs)) ?? null;
    label = source.from;
  } else if (deps.length === 1) {
    root = (await resolveArtefact(upstream[deps[0]!] as Artefact, blobs)) ?? null;
    label = deps[0]!;
  } else if (deps.length === 0) {
    root = (await resolveArtefact(input as Artefact, blobs)) ?? null;
    label = 'input';
  } else {
    return { problem: `from: the stage depends on ${deps.join(', ')}; say which one holds the list` };
  }
  if (source.items !== undefined) {
    const value = valueAt(root, source.items);
    label = `${label}.${source.items}`;
    if (!Array.isArray(value))
      return {
        problem: `items: ${label} is ${value === undefined ? 'missing' : `not a list (${value === null ? 'null' : typeof value})`}`,
      };
    return { elements: value, label };
  }
  return { elements: Array.isArray(root) ? root : root === null ? [] : [root], label };
}

/** The value at a dotted path, or undefined when a step is missing. */
export function valueAt(root: Json | undefined, dotted: string): Json | undefined {
  let cursor = root;
  for (const key of dotted.split('.')) cursor = isRecord(cursor) ? cursor[key] : undefined;
  return cursor;
}

export function isRecord(value: Json | undefined): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
