/**
 * What the agents load on first use (docs/architecture.md "Lazy loading"): the Anthropic SDK is a third of a
 * worker's module load time, and offline workers never use it. (The output-schema checks have their own lazy
 * front, ./output-schema-checks-lazy.ts.)
 */
import type * as AnthropicModule from './anthropic';

/**
 * Each module, required the first time it is asked for (`require` caches it).
 * @internal Left out of the published declarations (tsconfig.build.json `stripInternal`), which must name no
 * optional package; the table is no API.
 */
export const load = {
  anthropic: (): typeof AnthropicModule => require('./anthropic'),
};
