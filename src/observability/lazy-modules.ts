/**
 * OpenTelemetry's SDK and Temporal's plugin, optional peer dependencies (src/config/optional-packages.ts) loaded
 * only when tracing is configured, through `loadOptional` (docs/architecture.md "Lazy loading"): a worker without
 * tracing (the default) never loads them (~0.1-0.2 s), and Treadle's types name none of them.
 */
import type * as Resources from '@opentelemetry/resources';
import type * as TraceBase from '@opentelemetry/sdk-trace-base';
import type * as TraceNode from '@opentelemetry/sdk-trace-node';
import type * as TemporalOpenTelemetry from '@temporalio/interceptors-opentelemetry';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';

/**
 * Each package, required the first time it is asked for; pass these to `loadOptional('tracing', …)`.
 * @internal Left out of the published declarations (tsconfig.build.json `stripInternal`), which must name no
 * optional package; the table is no API.
 */
export const load = {
  resources: (): typeof Resources => require('@opentelemetry/resources'),
  traceBase: (): typeof TraceBase => require('@opentelemetry/sdk-trace-base'),
  traceNode: (): typeof TraceNode => require('@opentelemetry/sdk-trace-node'),
  temporalPlugin: (): typeof TemporalOpenTelemetry => require('@temporalio/interceptors-opentelemetry'),
  otlpHttp: (): typeof OtlpHttp => require('@opentelemetry/exporter-trace-otlp-http'),
};
