/**
 * What the catalog loads only when a command needs it (docs/architecture.md "Lazy loading"): the YAML parser
 * (~35 ms), by the first YAML text read (`treadle validate` and `start` load the loop-file reader for every
 * pipeline file, and a JSON one needs no YAML); the kinds' worker table and the llm config checks, by the first
 * spec checked (they load zod, which `--help` never needs).
 */
import type * as Yaml from 'yaml';
import type * as Kinds from '../kinds';
import type * as LlmConfig from './llm/config';

/**
 * Each module, required the first time it is asked for (`require` caches it).
 * @internal Left out of the published declarations (tsconfig.build.json `stripInternal`), which must name no
 * optional package; the table is no API.
 */
export const load = {
  yaml: (): typeof Yaml => require('yaml'),
  kinds: (): typeof Kinds => require('../kinds'),
  llmConfig: (): typeof LlmConfig => require('./llm/config'),
};
