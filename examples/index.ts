/**
 * The bundled examples (`treadle/examples`): what the CLI's worker (`treadle worker`, `dev`, `demo`) serves
 * besides the generic stage kinds: the document pipeline's stages and gates, the triage steps, and the seed's
 * five approval actions on a local task list. src/ loads this module in one place, src/cli/bundled-examples.ts,
 * which declares the shape it must have; an SDK worker registers it itself (docs/sdk.md).
 */
import type { BundledExamples } from '../src/cli/bundled-examples';
import { registerDocumentPipeline } from './documents';
import { exampleActionRegistry } from './task-list';
import { registerTriage } from './triage/stages';

/** The examples' implementations and action types, as the CLI's worker registers them. */
export const bundledExamples: BundledExamples = {
  registerStages: (registry) => registerTriage(registerDocumentPipeline(registry)),
  actionRegistry: ({ tasksFile }) => exampleActionRegistry({ tasksFile }),
};
