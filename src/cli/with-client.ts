/** The connection every server-talking command runs in: one client, traced when OTLP is configured, closed after. */
import type { TreadleClient } from '../client';
import { load } from './lazy-modules';

/** The type of {@link withClient}, for command modules that receive it. */
export type WithClient = <A extends unknown[]>(
  fn: (client: TreadleClient, ...args: A) => Promise<void>,
  options?: ClientChoices,
) => (...args: A) => Promise<void>;

/** What a command chooses of its client: `taskQueue` (`--task-queue`) over TREADLE_TASK_QUEUE. */
export interface ClientChoices {
  taskQueue?: string;
}

/** Runs an action with one connected client, closed afterwards (errors become one line in the catch at the end). */
export function withClient<A extends unknown[]>(
  fn: (client: TreadleClient, ...args: A) => Promise<void>,
  options: ClientChoices = {},
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    // With OTEL_EXPORTER_OTLP_ENDPOINT set, a start is the root span of the item's trace (loaded only then).
    const tracing =
      process.env.OTEL_EXPORTER_OTLP_ENDPOINT || process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
        ? load.tracing().tracingFromEnv()
        : undefined;
    const client = await load.client().TreadleClient.connect({
      ...(tracing ? { tracing } : {}),
      ...(options.taskQueue !== undefined ? { taskQueue: options.taskQueue } : {}),
    });
    try {
      await fn(client, ...args);
    } catch (error) {
      // Whichever call it was, a credential the server refused is a setting to fix (exit 2), said in one line.
      throw client.explainFailure(error);
    } finally {
      await client.close();
      await tracing?.shutdown();
    }
  };
}
