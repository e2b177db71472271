/**
 * The worker's Prometheus endpoint: the Temporal SDK's own metrics (task slots, schedule-to-start latency,
 * workflow task and activity failures, …), served by the SDK's core at `http://<address>/metrics` when
 * `TREADLE_METRICS_PROMETHEUS` names an address (docs/deploy.md, "Monitoring").
 */
import { Runtime } from '@temporalio/worker';
import { configError, type TreadleError } from '../config/errors';

/** The setting that turns the endpoint on: an `ip:port` to listen on, e.g. `127.0.0.1:9464`. */
const METRICS_PROMETHEUS_ENV = 'TREADLE_METRICS_PROMETHEUS';

/** The address `TREADLE_METRICS_PROMETHEUS` names, or undefined when it is unset or empty (no endpoint). */
export function prometheusAddressFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const value = env[METRICS_PROMETHEUS_ENV]?.trim();
  return value ? value : undefined;
}

/**
 * Installs the process's Temporal runtime with a Prometheus exporter listening on `address`. The runtime is one
 * per process and made by its first connection, so this must come before any `NativeConnection`. Throws a
 * configuration error naming the setting when the address cannot be used or the runtime already exists.
 */
export function installPrometheusMetrics(address: string): void {
  if (!/^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]):\d{1,5}$/.test(address))
    throw metricsError(`${address} is not an ip:port to listen on (e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464)`);
  try {
    Runtime.install({ telemetryOptions: { metrics: { prometheus: { bindAddress: address } } } });
  } catch (error) {
    const message = (error as Error).message;
    // The SDK's own words ("already been instantiated") do not say which setting needs the runtime.
    if (/already been (installed|instantiated)/.test(message))
      throw metricsError(
        'this process made its Temporal runtime before runWorker (a connection or worker of its own): ' +
          'unset it and pass telemetryOptions.metrics.prometheus to Runtime.install() before that first connection',
      );
    throw metricsError(`cannot serve metrics on ${address}: ${message}`);
  }
}

function metricsError(why: string): TreadleError {
  return configError(`${METRICS_PROMETHEUS_ENV}: ${why}`);
}
