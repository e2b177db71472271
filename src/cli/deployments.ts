/**
 * `treadle deployments` and `treadle deployments set-current <build-id>`: the worker deployment's versions with
 * their open work items, and promoting a build (src/client/deployments.ts; docs/deploy.md, "Upgrading workers with
 * Worker Deployment Versioning").
 */
import type { Command } from 'commander';
import type { DeploymentListing } from '../client/deployments';
import { UsageError } from './exit-codes';
import { table } from './render';
import type { WithClient } from './with-client';

/** The deployment a command is about: `--deployment`, else the worker's own setting. */
function deploymentOf(opts: { deployment?: string }): string | undefined {
  return opts.deployment ?? (process.env.TREADLE_DEPLOYMENT?.trim() || undefined);
}

/** A name or build id the server does not know is something the command was given wrong: exit 2. */
async function given<T>(request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    if ((error as { code?: unknown }).code === 'not_found')
      throw new UsageError((error as Error).message, { cause: error });
    throw error;
  }
}

/** Registers `treadle deployments` and its `set-current`. */
export function registerDeploymentsCommand(program: Command, withClient: WithClient): void {
  const deployments = program
    .command('deployments')
    .description('worker deployment versions and their open work items: a drained version with none may go')
    .option('--deployment <name>', 'this deployment only (default: TREADLE_DEPLOYMENT, else every deployment)')
    .option('--json', 'as JSON: [{ deployment, createdAt, versions: [{ buildId, state, createdAt, openItems }] }]')
    .action(
      withClient(async (client, opts: { deployment?: string; json?: boolean }) => {
        const listings = await given(() => client.workers.deployments(deploymentOf(opts)));
        if (opts.json) process.stdout.write(`${JSON.stringify(listings, null, 2)}\n`);
        else process.stdout.write(rendered(listings));
      }),
    );
  deployments
    .command('set-current <build-id>')
    .description('make a build the current version: new work items start on it, pinned items stay on theirs')
    .option('--deployment <name>', 'the deployment (default: TREADLE_DEPLOYMENT)')
    .action(
      withClient(async (client, buildId: string, opts: { deployment?: string }) => {
        const deployment = deploymentOf(opts);
        if (deployment === undefined)
          throw new UsageError('which deployment? Give --deployment <name> or set TREADLE_DEPLOYMENT');
        const { previous } = await given(() => client.workers.setCurrentVersion(deployment, buildId));
        process.stdout.write(
          `${deployment}: build ${buildId} is current (before: ${previous ?? 'none'}); ` +
            'items pinned to other builds finish there, see `treadle deployments`\n',
        );
      }),
    );
}

/** The listings as tables, one per deployment. */
function rendered(listings: readonly DeploymentListing[]): string {
  if (listings.length === 0)
    return 'no worker deployments: workers declare one with TREADLE_DEPLOYMENT and TREADLE_BUILD_ID\n';
  return listings
    .map((listing) => {
      const rows = listing.versions.map((v) => [
        v.buildId,
        v.rampPercentage !== undefined ? `ramping ${v.rampPercentage}%` : v.state,
        String(v.openItems),
        (v.createdAt ?? '').slice(0, 19).replace('T', ' '),
      ]);
      return `deployment ${listing.deployment}\n${table(['BUILD', 'STATE', 'OPEN ITEMS', 'CREATED'], rows)}\n`;
    })
    .join('\n');
}
