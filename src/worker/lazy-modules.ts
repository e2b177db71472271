/**
 * What the worker loads on first use (docs/architecture.md "Lazy loading"): the bundled examples, which the core
 * queue registers beside the generic implementations. Lazily, because they sit above the worker (src/cli and
 * examples/, which import the SDK): a program that imports the SDK (`require('treadle')`) never loads them.
 */
import type * as BundledExamplesModule from '../cli/bundled-examples';

/**
 * Each module, required the first time it is asked for (`require` caches it).
 * @internal Left out of the published declarations (tsconfig.build.json `stripInternal`), which must name no
 * optional package; the table is no API.
 */
export const load = {
  bundledExamples: (): typeof BundledExamplesModule => require('../cli/bundled-examples'),
};
