/**
 * The Prometheus setting's parts that need no server (src/worker/metrics.ts): reading TREADLE_METRICS_PROMETHEUS,
 * and installing the exporter in a process whose Temporal runtime already exists (an SDK worker that connected
 * before runWorker), which fails naming the setting and the fix rather than with the SDK's own words.
 * test/integration/worker-metrics.test.ts scrapes a running `treadle worker`.
 */
import { Runtime } from '@temporalio/worker';
import { installPrometheusMetrics, prometheusAddressFromEnv } from '../../src/worker/metrics';

it('reads the address from TREADLE_METRICS_PROMETHEUS, none when unset or blank', () => {
  expect(prometheusAddressFromEnv({ TREADLE_METRICS_PROMETHEUS: ' 127.0.0.1:9464 ' })).toBe('127.0.0.1:9464');
  expect(prometheusAddressFromEnv({ TREADLE_METRICS_PROMETHEUS: '' })).toBeUndefined();
  expect(prometheusAddressFromEnv({})).toBeUndefined();
});

it('refuses a host name before touching the runtime', () => {
  expect(() => installPrometheusMetrics('metrics.internal:9464')).toThrow(
    'TREADLE_METRICS_PROMETHEUS: metrics.internal:9464 is not an ip:port to listen on',
  );
});

it('says what to do when the process made its runtime first', async () => {
  // What a connection or worker made before runWorker does to the process.
  const runtime = Runtime.instance();
  try {
    let thrown: unknown;
    try {
      installPrometheusMetrics('127.0.0.1:0');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({
      code: 'config',
      message: expect.stringMatching(
        /^TREADLE_METRICS_PROMETHEUS: this process made its Temporal runtime before runWorker .*Runtime\.install\(\)/,
      ),
    });
  } finally {
    await runtime.shutdown();
  }
});
