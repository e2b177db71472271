/**
 * The output-schema checks (./output-schema.ts), loaded on first use: Ajv is slow to load and most commands,
 * workers and specs never meet a schema. The one place that loads them lazily (the registry, the CLI's
 * built-ins and the edit check all come here). Never in workflow code: Ajv must not reach the workflow bundle.
 * A file of its own, not in ./lazy-modules.ts: `treadle validate`'s bundle (scripts/bundle-cli.js) takes this and
 * not the Anthropic SDK's wrapper (23 KB more to read at every `validate`).
 */
import type * as OutputSchemaModule from './output-schema-checks';

/** The output-schema module (`checkOutput`, `outputSchemaProblem`, …), required the first time it is asked for. */
export function outputSchemaChecks(): typeof OutputSchemaModule {
  return require('./output-schema-checks') as typeof OutputSchemaModule;
}
