/**
 * Registers Treadle's search attributes on a server that lacks them (a plain `temporal server start-dev`,
 * a shared cluster), so that starting work items and listing reviews work everywhere.
 */
import type { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { SEARCH_ATTRIBUTE_DEFINITIONS } from '../model/search-attributes';

const TYPES = { Keyword: 'KEYWORD', KeywordList: 'KEYWORD_LIST' } as const;

/** Adds whichever of Treadle's search attributes the namespace lacks; returns the names it added. */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<string[]> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set([
    ...Object.keys(existing.customAttributes ?? {}),
    ...Object.keys(existing.systemAttributes ?? {}),
  ]);
  const missing = Object.entries(SEARCH_ATTRIBUTE_DEFINITIONS).filter(([name]) => !known.has(name));
  if (missing.length === 0) return [];
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(
      missing.map(([name, type]) => [name, encodeSearchAttributeIndexedValueType(TYPES[type])!]),
    ),
  });
  return missing.map(([name]) => name);
}
