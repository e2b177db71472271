/**
 * The items of a contract in the producer's artefact: the list at `contract.items`, read and checked (objects
 * with unique ids), and the dotted-path reads and writes that find it and keep an item's id.
 */
import type { ContractSpec } from './spec';
import type { Json } from '../../model/shapes';

/** The list at `contract.items` in the producer's artefact, each item an object with a unique id. */
export function readItems(
  source: Json,
  contract: ContractSpec,
): { ok: true; items: Json[]; ids: string[] } | { ok: false; problems: string[] } {
  const label = `contract ${contract.from} → ${contract.to}`;
  const list = contract.items === '' ? source : getPath(source, contract.items);
  if (!Array.isArray(list))
    return {
      ok: false,
      problems: [
        `${label}: ${contract.items === '' ? `${contract.from}'s artefact` : `"${contract.items}" in ${contract.from}'s artefact`} is not a list (it is ${list === undefined ? 'missing' : list === null ? 'null' : typeof list})`,
      ],
    };
  const problems: string[] = [];
  const ids: string[] = [];
  const first = new Map<string, number>();
  list.forEach((item, i) => {
    const id =
      item !== null && typeof item === 'object' && !Array.isArray(item) ? getPath(item, contract.itemId) : undefined;
    if (item === null || typeof item !== 'object' || Array.isArray(item))
      problems.push(`${label}: item ${i} is not an object`);
    else if (typeof id !== 'string' && typeof id !== 'number')
      problems.push(`${label}: item ${i} has no "${contract.itemId}" (the contract's item_id)`);
    else if (first.has(String(id)))
      problems.push(
        `${label}: items ${first.get(String(id))} and ${i} share the ${contract.itemId} "${String(id)}"; ids must be unique`,
      );
    else first.set(String(id), i);
    ids.push(id === undefined || id === null ? '' : String(id));
  });
  if (problems.length > 0)
    return {
      ok: false,
      problems:
        problems.length > 10 ? [...problems.slice(0, 10), `${label}: … and ${problems.length - 10} more`] : problems,
    };
  return { ok: true, items: list as Json[], ids };
}

/** The value at a dotted path, undefined when any step is missing or not an object. */
export function getPath(value: Json | undefined, path: string): Json | undefined {
  let cursor: Json | undefined = value;
  for (const key of path.split('.')) {
    if (cursor === null || typeof cursor !== 'object' || Array.isArray(cursor)) return undefined;
    cursor = (cursor as Record<string, Json>)[key];
  }
  return cursor;
}

/** A copy of `value` with the dotted path set to `to` (objects made along the way). */
export function setPath(value: Json, path: string, to: Json): Json {
  const [key, ...rest] = path.split('.');
  const base =
    value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, Json>) : {};
  return { ...base, [key!]: rest.length === 0 ? to : setPath(base[key!] ?? {}, rest.join('.'), to) };
}
