/**
 * OpenTelemetry tracing for a worker and its clients (see `index.ts`): one trace per work item,
 * client start → workflow → activities → model calls, through Temporal's OpenTelemetry plugin.
 *
 * OpenTelemetry's SDK and Temporal's plugin are optional peer dependencies (src/config/optional-packages.ts): they are
 * loaded only when tracing is configured, and this module's types name none of them, so Treadle's types compile
 * without them.
 */
// Types only at the top (the packages load through ./lazy-modules.ts): a worker without tracing (the default)
// never loads OpenTelemetry's SDK (~0.1-0.2 s).
import type * as TraceBase from '@opentelemetry/sdk-trace-base';
import type { ClientPlugin } from '@temporalio/client';
import type { WorkerPlugin } from '@temporalio/worker';
import { loadOptional } from '../config/optional-packages';
import { load } from './lazy-modules';

/** What a worker and a client need to trace: the plugin (interceptors, workflow span sink) and a way to flush. */
export interface TreadleTracing {
  /** Temporal's `OpenTelemetryPlugin`, typed by what the client and the worker take of it. */
  plugin: ClientPlugin & WorkerPlugin;
  /** Flushes pending spans and stops the provider. */
  shutdown(): Promise<void>;
}

/**
 * An OpenTelemetry `SpanProcessor` (`@opentelemetry/sdk-trace-base`), such as a `BatchSpanProcessor` or, in tests,
 * a `SimpleSpanProcessor` over an `InMemorySpanExporter`. Only its shape is declared here, so that Treadle's types
 * do not name the optional package.
 */
export interface TracingSpanProcessor {
  onStart(span: unknown, parentContext: unknown): void;
  onEnd(span: unknown): void;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** The workflow interceptors' module, in Temporal's plugin package. */
const WORKFLOW_INTERCEPTORS = '@temporalio/interceptors-opentelemetry/lib/workflow-interceptors';

/**
 * The workflow interceptor module a workflow bundle must include for workflow spans (prebuilt bundles): its path
 * when the plugin is installed, else the bare module name (bundling it then fails naming the package, and a
 * tracing worker would have stopped earlier, at {@link createTracing}).
 */
export const WORKFLOW_TRACING_MODULE = resolvedOr(WORKFLOW_INTERCEPTORS);

function resolvedOr(specifier: string): string {
  try {
    return require.resolve(specifier);
  } catch {
    return specifier;
  }
}

/**
 * Tracing that sends spans to `spanProcessor`. The provider is registered globally (with Node's async
 * context), so Treadle's own spans (model calls) join the activity's trace.
 * @throws a configuration error naming the packages to install when OpenTelemetry's SDK or Temporal's plugin is
 * missing (optional peer dependencies).
 */
export function createTracing(options: { spanProcessor: TracingSpanProcessor; serviceName?: string }): TreadleTracing {
  const { Resource } = loadOptional('tracing', load.resources);
  const { NodeTracerProvider } = loadOptional('tracing', load.traceNode);
  const { OpenTelemetryPlugin } = loadOptional('tracing', load.temporalPlugin);
  // The declared shape stands for the SDK's class (see TracingSpanProcessor).
  const spanProcessor = options.spanProcessor as TraceBase.SpanProcessor;
  const resource = new Resource({ 'service.name': options.serviceName ?? 'treadle' });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register();
  const plugin = new OpenTelemetryPlugin({
    resource,
    spanProcessor,
    tracer: provider.getTracer('treadle'),
  });
  return { plugin, shutdown: () => provider.shutdown() };
}

/**
 * Tracing over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set
 * (the exporter reads the standard OTEL_* variables); otherwise none. Throws as {@link createTracing} does when
 * the tracing packages are not installed.
 */
export function tracingFromEnv(env: NodeJS.ProcessEnv = process.env): TreadleTracing | undefined {
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return undefined;
  const { OTLPTraceExporter } = loadOptional('tracing', load.otlpHttp);
  const { BatchSpanProcessor } = loadOptional('tracing', load.traceBase);
  return createTracing({
    spanProcessor: new BatchSpanProcessor(new OTLPTraceExporter()),
    serviceName: env.OTEL_SERVICE_NAME ?? 'treadle',
  });
}
