/**
 * The bundled examples: what the default worker (`treadle worker`, `treadle demo`, `defaultRegistry()`) serves
 * besides the generic stage kinds: the document pipeline's stages and gates, the triage steps, and the seed's
 * five approval actions on a local task list. The core loads this module in one place,
 * src/bundled-examples.ts, which declares the shape it must have.
 */
import type { BundledExamples } from '../src/bundled-examples';
import { registerDocumentPipeline } from './documents';
import { exampleActionRegistry } from './task-list';
import { registerTriage } from './triage/stages';

/** The examples' implementations and action types, as the default worker registers them. */
export const bundledExamples: BundledExamples = {
  registerStages: (registry) => registerTriage(registerDocumentPipeline(registry)),
  actionRegistry: ({ tasksFile }) => exampleActionRegistry({ tasksFile }),
};
