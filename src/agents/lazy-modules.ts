/**
 * What the agents load on first use (docs/architecture.md "Lazy loading"): the Anthropic SDK is a third of a
 * worker's module load time and offline workers never use it; Ajv (the output-schema checks) is slow to load and
 * most commands, workers and specs never meet a schema. Never in workflow code: neither may reach the bundle.
 */
import type * as AnthropicModule from './anthropic';
import type * as OutputSchemaModule from './output-schema-checks';

/** Each module, required the first time it is asked for (`require` caches it). */
export const load = {
  anthropic: (): typeof AnthropicModule => require('./anthropic'),
  outputSchemaChecks: (): typeof OutputSchemaModule => require('./output-schema-checks'),
};
