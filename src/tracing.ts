/**
 * OpenTelemetry tracing for a worker and its clients (see `observability.ts`): one trace per work item,
 * client start → workflow → activities → model calls, through Temporal's OpenTelemetry plugin.
 */
// Types only at the top: a worker without tracing (the default) never loads OpenTelemetry's SDK (~0.1-0.2 s).
import type * as Resources from '@opentelemetry/resources';
import type * as TraceBase from '@opentelemetry/sdk-trace-base';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type * as TraceNode from '@opentelemetry/sdk-trace-node';
import type * as TemporalOpenTelemetry from '@temporalio/interceptors-opentelemetry';
import type { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';

/** What a worker and a client need to trace: the plugin (interceptors, workflow span sink) and a way to flush. */
export interface TreadleTracing {
  plugin: OpenTelemetryPlugin;
  /** Flushes pending spans and stops the provider. */
  shutdown(): Promise<void>;
}

/** The workflow interceptor module a workflow bundle must include for workflow spans (prebuilt bundles). */
export const WORKFLOW_TRACING_MODULE =
  require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/**
 * Tracing that sends spans to `spanProcessor`. The provider is registered globally (with Node's async
 * context), so Treadle's own spans (model calls) join the activity's trace.
 */
export function createTracing(options: { spanProcessor: SpanProcessor; serviceName?: string }): TreadleTracing {
  /* eslint-disable @typescript-eslint/no-require-imports -- loaded only when tracing is configured */
  const { Resource } = require('@opentelemetry/resources') as typeof Resources;
  const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node') as typeof TraceNode;
  const { OpenTelemetryPlugin } = require('@temporalio/interceptors-opentelemetry') as typeof TemporalOpenTelemetry;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const resource = new Resource({ 'service.name': options.serviceName ?? 'treadle' });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [options.spanProcessor] });
  provider.register();
  const plugin = new OpenTelemetryPlugin({
    resource,
    spanProcessor: options.spanProcessor,
    tracer: provider.getTracer('treadle'),
  });
  return { plugin, shutdown: () => provider.shutdown() };
}

/**
 * Tracing over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set
 * (the exporter reads the standard OTEL_* variables); otherwise none.
 */
export function tracingFromEnv(env: NodeJS.ProcessEnv = process.env): TreadleTracing | undefined {
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when tracing is configured
  const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http') as typeof OtlpHttp;
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when tracing is configured
  const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base') as typeof TraceBase;
  return createTracing({
    spanProcessor: new BatchSpanProcessor(new OTLPTraceExporter()),
    serviceName: env.OTEL_SERVICE_NAME ?? 'treadle',
  });
}
