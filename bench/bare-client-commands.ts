/**
 * The baseline of the CLI-start scenario (issue 26 §5): a bare script that loads only `@temporalio/client` and
 * makes the same Temporal calls as `treadle status`, `reviews`, `review --approve` and `approve list`, so the ratio
 * is what Treadle's CLI adds. Run as `node bare-client-commands.js <command> [id] [stage]` with TEMPORAL_ADDRESS.
 */
import { Client, Connection } from '@temporalio/client';

/** The visibility queries the CLI's listings make (src/model/search-attributes.ts). */
const LISTINGS: Record<string, string> = {
  reviews: "ExecutionStatus = 'Running' AND TreadlePendingReviews IS NOT NULL",
  'approve-list': "ExecutionStatus = 'Running' AND TreadleApprovals IS NOT NULL",
};

async function main(): Promise<void> {
  const [command, id, stage] = process.argv.slice(2);
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? 'localhost:7233' });
  const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
  try {
    if (command === 'status') {
      const handle = client.workflow.getHandle(id!);
      await handle.describe();
      process.stdout.write(`${JSON.stringify(await handle.query('state')).length}\n`);
    } else if (command === 'review') {
      const args: [unknown] = [{ stage, outcome: { kind: 'approve' }, reviewer: 'bench' }];
      await client.workflow.getHandle(id!).executeUpdate('resolveReview', { args });
    } else if (command !== undefined && command in LISTINGS) {
      let listed = 0;
      for await (const execution of client.workflow.list({ query: LISTINGS[command] })) {
        await execution.memo;
        listed++;
      }
      process.stdout.write(`${listed}\n`);
    } else {
      throw new Error(`unknown command ${command}; use status <id>, review <id> <stage>, reviews or approve-list`);
    }
  } finally {
    await connection.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});
