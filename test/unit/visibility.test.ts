/**
 * The lean visibility reader (`src/client/visibility.ts`) against raw service pages shaped as the server sends
 * them: paging to the end, `json/plain` memo and search attributes decoded, anything else decoded by the SDK
 * through `describe()`. The real listings run against the dev server in the integration tests.
 */
import type { Client } from '@temporalio/client';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { listExecutions } from '../../src/client/visibility';
import {
  explainSearchAttributeError,
  SEARCH_ATTRIBUTE_DEFINITIONS,
  searchAttributeCommands,
} from '../../src/model/search-attributes';

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const json = (value: unknown, type?: string) => ({
  metadata: { encoding: bytes('json/plain'), ...(type ? { type: bytes(type) } : {}) },
  data: bytes(JSON.stringify(value)),
});

function execution(id: string, fields: { memo?: Record<string, unknown>; attributes?: Record<string, unknown> } = {}) {
  return {
    execution: { workflowId: id, runId: `run-${id}` },
    // protobufjs decodes int64 seconds as a Long (anything with toNumber()).
    startTime: { seconds: { toNumber: () => 1_795_594_797 }, nanos: 943_426_000 },
    memo: { fields: fields.memo ?? {} },
    searchAttributes: { indexedFields: fields.attributes ?? {} },
  };
}

/** The server's words (dev server 1.29.1) for a query, and for a start, naming an attribute it lacks. */
const UNKNOWN_IN_QUERY =
  "3 INVALID_ARGUMENT: invalid query: invalid expression: column name 'TreadlePendingReviews' is not a valid search attribute";
const UNKNOWN_AT_START =
  '3 INVALID_ARGUMENT: Namespace default has no mapping defined for search attribute TreadlePipeline';

/** A client whose service answers from `pages` (one per call, linked by page tokens) and records requests. */
function fakeClient(pages: unknown[][], described: Record<string, Record<string, unknown>> = {}) {
  const requests: { query: string; nextPageToken?: Uint8Array; pageSize?: number }[] = [];
  const describes: string[] = [];
  const client = {
    options: { namespace: 'default' },
    workflowService: {
      listWorkflowExecutions: async (request: { query: string; nextPageToken?: Uint8Array; pageSize?: number }) => {
        requests.push(request);
        const index = request.nextPageToken ? Number(new TextDecoder().decode(request.nextPageToken)) : 0;
        const next = index + 1 < pages.length ? bytes(String(index + 1)) : new Uint8Array(0);
        return { executions: pages[index] ?? [], nextPageToken: next };
      },
    },
    workflow: {
      getHandle: (id: string) => ({
        describe: async () => {
          describes.push(id);
          return { memo: described[id] };
        },
      }),
    },
  } as unknown as Client;
  return { client, requests, describes };
}

async function all(client: Client, query: string, pageSize?: number) {
  const out = [];
  for await (const e of listExecutions(client, query, pageSize)) out.push(e);
  return out;
}

describe('listExecutions', () => {
  it('reads every page, passing the token back, and stops at an empty token', async () => {
    const { client, requests } = fakeClient([[execution('a'), execution('b')], [execution('c')], []]);
    const listed = await all(client, "TreadlePipeline = 'x'");
    expect(listed.map((e) => e.workflowId)).toEqual(['a', 'b', 'c']);
    expect(requests).toHaveLength(3);
    expect(requests.map((r) => r.query)).toEqual(Array(3).fill("TreadlePipeline = 'x'"));
    expect(requests[0]!.nextPageToken).toBeUndefined();
    expect(new TextDecoder().decode(requests[1]!.nextPageToken)).toBe('1');
  });

  it('passes a page size through when asked', async () => {
    const { client, requests } = fakeClient([[execution('a')]]);
    await all(client, 'q', 2);
    expect(requests[0]!.pageSize).toBe(2);
  });

  it('decodes start time, json/plain memo and keyword attributes without the SDK', async () => {
    const reviews = { pipeline: 'p', reviews: [{ stage: 'draft', reason: 'always' }], omitted: 0 };
    const { client, describes } = fakeClient([
      [
        execution('a', {
          memo: { treadleReviews: json(reviews) },
          attributes: {
            TreadlePipeline: json('p', 'Keyword'),
            TreadlePendingReviews: json(['draft', 'edit'], 'KeywordList'),
          },
        }),
      ],
    ]);
    const [a] = await all(client, 'q');
    expect(a!.startTime.toISOString()).toBe('2026-11-25T08:19:57.943Z');
    expect(await a!.memo('treadleReviews')).toEqual(reviews);
    expect(await a!.memo('absent')).toBeUndefined();
    expect(a!.keyword('TreadlePipeline')).toBe('p');
    expect(a!.keywordList('TreadlePendingReviews')).toEqual(['draft', 'edit']);
    expect(a!.keyword('TreadleStatus')).toBeUndefined();
    expect(a!.keywordList('TreadleApprovals')).toEqual([]);
    expect(describes).toEqual([]);
  });

  it('reads a cleared attribute (json null) as absent', async () => {
    const { client } = fakeClient([
      [
        execution('a', {
          attributes: { TreadlePendingReviews: json(null, 'KeywordList'), TreadlePipeline: json(null, 'Keyword') },
        }),
      ],
    ]);
    const [a] = await all(client, 'q');
    expect(a!.keywordList('TreadlePendingReviews')).toEqual([]);
    expect(a!.keyword('TreadlePipeline')).toBeUndefined();
  });

  it('lets the SDK decode a memo in any other encoding (an external-storage reference) through describe()', async () => {
    const reference = {
      metadata: {
        encoding: bytes('json/protobuf'),
        messageType: bytes('temporal.api.sdk.v1.ExternalStorageReference'),
      },
      data: bytes('{}'),
    };
    const { client, describes } = fakeClient([[execution('big', { memo: { treadleReviews: reference } })]], {
      big: { treadleReviews: { reviews: [{ stage: 's' }] } },
    });
    const [big] = await all(client, 'q');
    expect(await big!.memo('treadleReviews')).toEqual({ reviews: [{ stage: 's' }] });
    expect(describes).toEqual(['big']);
  });
});

describe("a server without Treadle's search attributes", () => {
  it('gets one registration command per attribute (the CLI adds only the first of several --name flags)', () => {
    const commands = searchAttributeCommands();
    expect(commands).toHaveLength(Object.keys(SEARCH_ATTRIBUTE_DEFINITIONS).length);
    expect(commands).toContain(
      'temporal operator search-attribute create --name TreadlePendingReviews --type KeywordList',
    );
    expect(commands).toContain('temporal operator search-attribute create --name TreadlePipeline --type Keyword');
  });

  it('are the commands the deployment docs give, for the temporal CLI and for tcld (Temporal Cloud)', () => {
    const deployment = readFileSync(path.join(__dirname, '..', '..', 'docs', 'deploy.md'), 'utf8');
    for (const command of searchAttributeCommands()) expect(deployment).toContain(`\n${command}\n`);
    const tcld = /\ntcld namespace search-attributes add [^`]*/.exec(deployment)?.[0] ?? '';
    const named = [...tcld.matchAll(/--search-attribute (\w+)=(\w+)/g)].map(([, name, type]) => [name, type]);
    expect(Object.fromEntries(named)).toEqual(SEARCH_ATTRIBUTE_DEFINITIONS);
  });

  it('explains both refusals with the commands, and leaves other messages alone', () => {
    for (const message of [UNKNOWN_IN_QUERY, UNKNOWN_AT_START]) {
      const explained = explainSearchAttributeError(message);
      expect(explained.startsWith(message)).toBe(true);
      expect(explained).toContain("the server does not have Treadle's search attributes");
      for (const command of searchAttributeCommands()) expect(explained).toContain(command);
    }
    expect(explainSearchAttributeError('14 UNAVAILABLE: connection refused')).toBe(
      '14 UNAVAILABLE: connection refused',
    );
  });

  it("makes a listing fail with the query, the server's reason and the fix", async () => {
    const client = {
      options: { namespace: 'default' },
      workflowService: {
        listWorkflowExecutions: async () => {
          throw new Error(UNKNOWN_IN_QUERY);
        },
      },
    } as unknown as Client;
    await expect(all(client, 'TreadlePendingReviews IS NOT NULL')).rejects.toThrow(
      `the visibility query [TreadlePendingReviews IS NOT NULL] failed: ${UNKNOWN_IN_QUERY} (the server does not have Treadle's search attributes`,
    );
  });
});
