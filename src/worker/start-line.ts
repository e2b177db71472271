/** What `treadle worker`'s start line says beyond its queue and server: the settings an operator checks. */
import type { CapacityLimits } from '../capacity/shapes';
import type { WorkerDeployment } from '../config/deployment';
import type { WorkerNotifications } from '../notify/worker/settings-file';
import { describeCallLog, isPostgresUrl } from '../storage/open-call-log';

/** The settings the start line reports. */
export interface StartLineSettings {
  /** Where the Prometheus metrics are served (`TREADLE_METRICS_PROMETHEUS`). */
  metrics: string | undefined;
  /** `TREADLE_CALL_LOG`'s value. */
  callLog: string | null;
  limits: CapacityLimits | null | undefined;
  notifications: WorkerNotifications | null | undefined;
  deployment: WorkerDeployment | undefined;
}

/**
 * The start line's notes: the metrics address, the deployment version, a PostgreSQL call log, the model limits the calls share
 * (docs/deploy.md), the webhooks.
 */
export function notesOf(options: { callLog?: unknown }, settings: StartLineSettings): string {
  const scopes = (settings.limits?.limits ?? []).map((limit) => `${limit.provider}/${limit.model}`);
  const webhooks = (settings.notifications?.webhooks ?? []).map((w) => w.name);
  return (
    `${settings.metrics !== undefined ? `, metrics on http://${settings.metrics}/metrics` : ''}` +
    `${deploymentNote(settings.deployment)}${callLogNote(options, settings.callLog)}` +
    `${scopes.length > 0 ? `, model limits for ${scopes.join(', ')}` : ''}` +
    `${webhooks.length > 0 ? `, webhooks ${webhooks.join(', ')}` : ''}`
  );
}

/** The start line's note of a PostgreSQL call log (without its password): the shared state an operator checks. */
function callLogNote(options: { callLog?: unknown }, setting: string | null): string {
  if (options.callLog !== undefined || setting === null || !isPostgresUrl(setting)) return '';
  return `, call log ${describeCallLog(setting)}`;
}

/** The start line's note of a versioned worker: its deployment version and how its work items move. */
function deploymentNote(deployment: WorkerDeployment | undefined): string {
  if (!deployment) return '';
  const items = deployment.workItems === 'PINNED' ? 'pinned' : 'auto-upgrade';
  return `, deployment ${deployment.name} build ${deployment.buildId} (work items ${items})`;
}
