/**
 * `treadle blobs gc [--dry-run] [--grace 24h]`: deletes the blobs no retained execution references (issue 26 §6,
 * bounded growth). The roots are every execution the namespace's visibility lists, open and closed within its
 * retention: each one's memo and history are scanned for `sha256:` references (src/storage/blob-gc.ts follows
 * them into the blobs and keeps the names' targets). Histories that retention has deleted reference nothing. So
 * are the schedules' descriptions: a schedule's action holds its items' input by reference (`treadle schedule`),
 * and visibility does not list the scheduler's own workflows.
 */
import { Option, type Command } from 'commander';
import type { Client } from '@temporalio/client';
import { formatDuration } from '../model/duration';
import { loadConfig } from '../config';
import { duration } from './arguments';
import { load } from './lazy-modules';
import type { WithClient } from './with-client';

/** Unreferenced blobs younger than this are kept unless `--grace` says otherwise: a day. */
const DEFAULT_GRACE_MS = 86_400_000;

/** Executions listed per visibility page. */
const PAGE_SIZE = 500;

/** Registers `blobs gc`. */
export function registerBlobsCommand(program: Command, withClient: WithClient): void {
  const blobs = program.command('blobs').description('the blob store: collect the blobs nothing references');
  blobs
    .command('gc')
    .description(
      'delete blobs that no execution in the namespace (open, or closed within retention) references and that are older than --grace',
    )
    .option('--dry-run', 'list what would be deleted, delete nothing')
    .addOption(
      new Option(
        '--grace <duration>',
        'keep unreferenced blobs younger than this (covers blobs put by running activities)',
      )
        .argParser(duration)
        .default(DEFAULT_GRACE_MS, '24h'),
    )
    .action(async (opts: { dryRun?: boolean; grace: number }) => {
      await withClient(async (client) => {
        const { collectBlobs } = load.blobGc();
        const { createBlobStore } = load.storage();
        const store = createBlobStore(loadConfig().blobStore);
        const result = await collectBlobs(store, {
          roots: rootTexts(client.client),
          graceMs: opts.grace,
          dryRun: opts.dryRun === true,
        });
        const verb = result.dryRun ? 'would delete' : 'deleted';
        if (result.dryRun)
          for (const blob of result.unreferenced)
            process.stdout.write(`${blob.ref}  ${bytes(blob.bytes)}  stored ${blob.modified.toISOString()}\n`);
        const total = result.unreferenced.reduce((sum, b) => sum + b.bytes, 0);
        process.stdout.write(
          `${verb} ${result.unreferenced.length} unreferenced blobs (${bytes(total)}); kept ${result.referenced.blobs} referenced (${bytes(result.referenced.bytes)}) and ${result.young.blobs} younger than ${formatDuration(opts.grace)} (${bytes(result.young.bytes)})\n`,
        );
      })();
    });
}

/** A byte count for people. */
function bytes(n: number): string {
  return n < 1024 ? `${n} B` : n < 1024 ** 2 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 ** 2).toFixed(1)} MiB`;
}

/** Every root: the executions' texts, then the schedules'. */
async function* rootTexts(client: Client): AsyncIterable<Buffer> {
  yield* executionTexts(client);
  yield* scheduleTexts(client);
}

/** The description of every schedule in the client's namespace (its action's input included), encoded. */
async function* scheduleTexts(client: Client): AsyncIterable<Buffer> {
  const { temporal } = load.proto();
  const namespace = client.options.namespace;
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.listSchedules({
      namespace,
      maximumPageSize: PAGE_SIZE,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    for (const { scheduleId } of page.schedules ?? []) {
      if (!scheduleId) continue;
      try {
        const described = await client.workflowService.describeSchedule({ namespace, scheduleId });
        yield Buffer.from(temporal.api.workflowservice.v1.DescribeScheduleResponse.encode(described).finish());
      } catch (error) {
        // Deleted between the listing and now: it references nothing any more.
        if ((error as { code?: number }).code !== GRPC_NOT_FOUND) throw error;
      }
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
}

/** gRPC's NOT_FOUND status code. */
const GRPC_NOT_FOUND = 5;

/** The memo and the history of every execution visibility lists in the client's namespace, encoded. */
async function* executionTexts(client: Client): AsyncIterable<Buffer> {
  const { temporal } = load.proto();
  const namespace = client.options.namespace;
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.listWorkflowExecutions({
      namespace,
      pageSize: PAGE_SIZE,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    for (const info of page.executions ?? []) {
      yield Buffer.from(temporal.api.workflow.v1.WorkflowExecutionInfo.encode(info).finish());
      const { workflowId, runId } = info.execution ?? {};
      if (!workflowId) continue;
      try {
        const history = await client.workflow.getHandle(workflowId, runId ?? undefined).fetchHistory();
        yield Buffer.from(temporal.api.history.v1.History.encode(history).finish());
      } catch (error) {
        // Deleted by retention between the listing and now: it references nothing any more.
        if ((error as Error).name !== 'WorkflowNotFoundError') throw error;
      }
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
}
