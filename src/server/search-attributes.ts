/**
 * Registers Treadle's search attributes on a server that lacks them (a plain `temporal server start-dev`,
 * a shared cluster), so that starting work items and listing reviews work everywhere.
 */
import type { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { SEARCH_ATTRIBUTE_DEFINITIONS } from '../model/search-attributes';
import { DECISIONS_ENGINE, FAILED_WORKFLOW_ENGINE } from '../model/state';

const TYPES = { Keyword: 'KEYWORD', KeywordList: 'KEYWORD_LIST', Datetime: 'DATETIME' } as const;

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

/**
 * The engine a worker configured for `configured` starts items on, given whether the namespace is known to
 * have every Treadle search attribute (undefined: not checked yet). Engine 7 upserts `TreadleDecisionAt`, and
 * a server that does not know it rejects the command, failing every such item's workflow task; so until the
 * attributes are confirmed items start on engine 6, which never names it.
 */
export function engineForAttributes(configured: number, attributesConfirmed: boolean | undefined): number {
  return configured >= DECISIONS_ENGINE && attributesConfirmed !== true ? FAILED_WORKFLOW_ENGINE : configured;
}
