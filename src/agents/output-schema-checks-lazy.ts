/**
 * The output-schema checks (./output-schema.ts), loaded on first use (./lazy-modules.ts says why). The one place
 * that loads them lazily (the registry, the CLI's built-ins and the edit check all come here).
 */
import { load } from './lazy-modules';

/** The output-schema module (`checkOutput`, `outputSchemaProblem`, …), required the first time it is asked for. */
export const outputSchemaChecks = load.outputSchemaChecks;
