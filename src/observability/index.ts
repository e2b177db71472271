/**
 * Correlation and tracing (seed 003 "Correlation ID"). Every work item has a correlation id, a UUID made
 * when it starts; it is in the item's state, its `TreadleCorrelationId` search attribute, every activity's
 * input, every model call record and every log line the workflow and its activities write.
 *
 * Tracing is Temporal's OpenTelemetry integration (`@temporalio/interceptors-opentelemetry`): the client's
 * start, the workflow, each activity and each model call are spans of one trace per work item. It is off
 * unless configured: with `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set,
 * `treadle worker` and the CLI export spans over OTLP/HTTP; from TypeScript, pass {@link TreadleTracing}
 * to `createWorker` and `TreadleClient.connect`.
 */
import type { Context as ActivityContext } from '@temporalio/activity';
import type {
  ActivityInboundCallsInterceptor,
  ActivityInterceptorsFactory,
  ActivityOutboundCallsInterceptor,
  GetLogAttributesInput,
  Next,
  ActivityExecuteInput,
} from '@temporalio/worker';
import { trace, SpanStatusCode, type Tracer } from '@opentelemetry/api';

/** The tracer Treadle's own spans (model calls) use: the global provider's, a no-op until one is registered. */
export function treadleTracer(): Tracer {
  return trace.getTracer('treadle');
}

/** Span attribute and log attribute names. */
export const CORRELATION_ATTRIBUTE = 'treadle.correlation_id';

const correlationOf = new WeakMap<ActivityContext, string>();

/**
 * Puts the work item's correlation id (the activity input's `correlationId`) on every log line the activity
 * writes and on its span.
 */
export const correlationInterceptors: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(
      input: ActivityExecuteInput,
      next: Next<ActivityInboundCallsInterceptor, 'execute'>,
    ): Promise<unknown> {
      const first = input.args[0] as { correlationId?: unknown } | undefined;
      if (typeof first?.correlationId === 'string') {
        correlationOf.set(ctx, first.correlationId);
        trace.getActiveSpan()?.setAttribute(CORRELATION_ATTRIBUTE, first.correlationId);
      }
      return next(input);
    },
  },
  outbound: {
    getLogAttributes(
      input: GetLogAttributesInput,
      next: Next<ActivityOutboundCallsInterceptor, 'getLogAttributes'>,
    ): Record<string, unknown> {
      const correlationId = correlationOf.get(ctx);
      return next(correlationId === undefined ? input : { ...input, correlationId });
    },
  },
});

/** Runs `fn` in a span of Treadle's tracer (a child of the activity's span), recording its failure. */
export async function inSpan<T>(
  name: string,
  attributes: Record<string, string | number | boolean>,
  fn: () => Promise<T>,
  after?: (result: T) => Record<string, string | number | boolean>,
): Promise<T> {
  return treadleTracer().startActiveSpan(name, { attributes }, async (span) => {
    try {
      const result = await fn();
      if (after) span.setAttributes(after(result));
      return result;
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}
