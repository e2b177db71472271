/**
 * Worker Deployment Versioning for operators (`treadle deployments`, `client.workers.deployments`): a deployment's
 * versions, which is current or ramping, which drain, and how many open work items each still holds; and making a
 * version current (docs/deploy.md, "Upgrading workers with Worker Deployment Versioning").
 *
 * Versions and their states come from `DescribeWorkerDeployment`; open items from visibility, through the system
 * search attribute `TemporalWorkerDeploymentVersion` (`<deployment>:<build id>`), which the server sets on every
 * versioned workflow: a pinned item's version, or an auto-upgrading one's last. Eventually consistent, like every
 * visibility count.
 */
import type { Client } from '@temporalio/client';
import { TreadleError } from './errors';

/** Where a version stands in its deployment. */
export type DeploymentVersionState = 'current' | 'ramping' | 'draining' | 'drained' | 'inactive';

/** One build of a deployment. */
export interface DeploymentVersion {
  buildId: string;
  state: DeploymentVersionState;
  /** The share of new work a ramping version takes (percent); absent otherwise. */
  rampPercentage?: number;
  /** When a worker of this build first polled (ISO 8601). */
  createdAt: string | null;
  /** When the server last checked whether a draining version still has open workflows (ISO 8601). */
  drainageCheckedAt?: string;
  /** Open work items on this version (their fan-outs, TDD nodes and loop stages included), from visibility. */
  openItems: number;
}

/** A deployment and its versions, newest first. */
export interface DeploymentListing {
  deployment: string;
  createdAt: string | null;
  versions: DeploymentVersion[];
}

/** gRPC status codes the deployment calls answer with. */
const GRPC = { NOT_FOUND: 5, PERMISSION_DENIED: 7, UNIMPLEMENTED: 12 } as const;

/** Server enum values (temporal.api.enums.v1): a version's status and its drainage. */
const VERSION_STATUS: Readonly<Record<number, DeploymentVersionState>> = {
  1: 'inactive',
  2: 'current',
  3: 'ramping',
  4: 'draining',
  5: 'drained',
};
const DRAINAGE_STATUS: Readonly<Record<number, DeploymentVersionState>> = { 1: 'draining', 2: 'drained' };

/** The names of the deployments in the client's namespace. */
export async function deploymentNames(client: Client): Promise<string[]> {
  const names: string[] = [];
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await call(client, () =>
      client.workflowService.listWorkerDeployments({
        namespace: client.options.namespace,
        ...(nextPageToken ? { nextPageToken } : {}),
      }),
    );
    for (const summary of page.workerDeployments ?? []) if (summary.name) names.push(summary.name);
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return names.sort();
}

/** One deployment's versions, newest first, with their open work items; a `not_found` error for an unknown name. */
export async function describeDeployment(client: Client, deployment: string): Promise<DeploymentListing> {
  const info = await describe(client, deployment);
  const routing = info.routingConfig;
  const versions = await Promise.all(
    (info.versionSummaries ?? []).map(async (summary): Promise<DeploymentVersion> => {
      const buildId = summary.deploymentVersion?.buildId ?? summary.version?.split(':').slice(1).join(':') ?? '';
      const ramping = routing?.rampingDeploymentVersion?.buildId === buildId;
      const checked = isoOf(summary.drainageInfo?.lastCheckedTime);
      return {
        buildId,
        state: stateOf(summary, buildId, routing?.currentDeploymentVersion?.buildId, ramping),
        ...(ramping ? { rampPercentage: routing?.rampingVersionPercentage ?? 0 } : {}),
        createdAt: isoOf(summary.createTime),
        ...(checked ? { drainageCheckedAt: checked } : {}),
        openItems: await openItemsOn(client, deployment, buildId),
      };
    }),
  );
  versions.sort((a, b) => (b.createdAt ?? '').localeCompare(a.createdAt ?? ''));
  return { deployment, createdAt: isoOf(info.createTime), versions };
}

/**
 * Makes `buildId` the deployment's current version: new work items (and every auto-upgrading workflow) go to it,
 * pinned items stay where they are. A `not_found` error names the known build ids when `buildId` is not one.
 */
export async function setCurrentVersion(
  client: Client,
  deployment: string,
  buildId: string,
): Promise<{ previous: string | null }> {
  const info = await describe(client, deployment);
  const known = (info.versionSummaries ?? []).map((summary) => summary.deploymentVersion?.buildId ?? '');
  if (!known.includes(buildId))
    throw new TreadleError(
      `no build ${buildId} in deployment ${deployment}: a version exists once a worker of that build polls ` +
        `(known: ${known.join(', ') || 'none'})`,
      'not_found',
    );
  const response = await call(client, () =>
    client.workflowService.setWorkerDeploymentCurrentVersion({
      namespace: client.options.namespace,
      deploymentName: deployment,
      buildId,
      identity: client.options.identity ?? 'treadle',
    }),
  );
  return { previous: response.previousDeploymentVersion?.buildId || null };
}

/**
 * The workflows a version must keep serving: work items, their children, and the TDD trees and loop stages started
 * on their own (`treadle tdd`, `treadle loop`). Not the limiter and notifier, which move to the current build.
 */
const ITEM_WORKFLOW_TYPES = ['workItem', 'fanOut', 'tddNode', 'loopStage'];

/** Counts the open work items (and their children, TDD trees, loop stages) on version `deployment:buildId`. */
async function openItemsOn(client: Client, deployment: string, buildId: string): Promise<number> {
  const version = `${deployment}:${buildId}`.replace(/'/g, "''");
  const types = ITEM_WORKFLOW_TYPES.map((type) => `'${type}'`).join(', ');
  const query = `ExecutionStatus = 'Running' AND WorkflowType IN (${types}) AND TemporalWorkerDeploymentVersion = '${version}'`;
  const { count } = await client.workflow.count(query);
  return count;
}

/** A version's state: the server's own status where it gives one, else from the routing and drainage. */
function stateOf(
  summary: { status?: number | null; drainageStatus?: number | null; drainageInfo?: { status?: number | null } | null },
  buildId: string,
  current: string | null | undefined,
  ramping: boolean,
): DeploymentVersionState {
  const status = VERSION_STATUS[summary.status ?? 0];
  if (status) return status;
  if (current === buildId) return 'current';
  if (ramping) return 'ramping';
  return DRAINAGE_STATUS[summary.drainageInfo?.status ?? summary.drainageStatus ?? 0] ?? 'inactive';
}

/** The deployment's description; a `not_found` error for a name the namespace has no deployment of. */
async function describe(client: Client, deployment: string) {
  const { namespace } = client.options;
  let response;
  try {
    response = await call(client, () =>
      client.workflowService.describeWorkerDeployment({ namespace, deploymentName: deployment }),
    );
  } catch (error) {
    if ((error as { code?: unknown }).code !== GRPC.NOT_FOUND) throw error;
    // Server 1.29 answers NOT_FOUND here even with deployment versions off: listing says which it is.
    await deploymentNames(client);
  }
  if (!response?.workerDeploymentInfo)
    throw new TreadleError(
      `no deployment ${deployment} in namespace ${namespace}: it exists once a worker with TREADLE_DEPLOYMENT and ` +
        'TREADLE_BUILD_ID set polls (names: `treadle deployments`)',
      'not_found',
    );
  return response.workerDeploymentInfo;
}

/** Runs a deployment call, turning the server's refusals into one-line Treadle errors. */
async function call<T>(client: Client, request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    const e = error as { code?: unknown; details?: unknown; message?: string };
    const details = typeof e.details === 'string' ? e.details : (e.message ?? '');
    // No `cause`: a PERMISSION_DENIED in it would read as refused credentials (config/connection.ts).
    // Server 1.29 answers PERMISSION_DENIED "Worker Deployment Versions are disabled on this namespace" when
    // `system.enableDeploymentVersions` is off; an older server does not know the call.
    if (e.code === GRPC.UNIMPLEMENTED || (e.code === GRPC.PERMISSION_DENIED && /disabled/i.test(details)))
      throw new TreadleError(
        `this Temporal server does not offer Worker Deployment Versioning (${details.split('\n')[0]}): it needs ` +
          'server 1.28 or later with system.enableDeploymentVersions on, its default (docs/deploy.md)',
        'failed',
      );
    throw error;
  }
}

/** A protobuf timestamp as ISO 8601, or null. */
function isoOf(timestamp: { seconds?: unknown; nanos?: number | null } | null | undefined): string | null {
  if (!timestamp || timestamp.seconds === undefined || timestamp.seconds === null) return null;
  // `seconds` is a Long, whose decimal string Number reads (Number(long) itself is NaN).
  const seconds = Number(String(timestamp.seconds));
  return new Date(seconds * 1000 + Math.floor((timestamp.nanos ?? 0) / 1e6)).toISOString();
}
