/**
 * The YAML parser (~35 ms to load), loaded by the first YAML text read (docs/architecture.md "Lazy loading"):
 * `treadle validate` and `start` load the loop-file reader for every pipeline file, and a JSON one needs no YAML.
 */
import type * as Yaml from 'yaml';

/**
 * Each module, required the first time it is asked for (`require` caches it).
 * @internal Left out of the published declarations (tsconfig.build.json `stripInternal`), which must name no
 * optional package; the table is no API.
 */
export const load = {
  yaml: (): typeof Yaml => require('yaml'),
};
