/**
 * The generic registries an SDK worker starts from: the built-in stage kinds, and an action registry with no
 * action types yet. The bundled examples are not in them; the CLI's worker adds those (src/cli/bundled-examples.ts).
 */
import { ActionRegistry } from '../kinds/approval/actions';
import { Registry } from '../activities/registry';
import { registerKinds } from '../kinds';
import { registerLlm } from '../pipelines/llm';
import { registerScripted } from '../pipelines/scripted';

/** The built-in stage kinds: `scripted` (stage and gate), `llm` / `llm-judge`, `tdd`, `loop`, `approval`, `fan_out`. */
export function defaultRegistry(): Registry {
  // The stage kinds come from their table (src/kinds/index.ts): their names and config checks, no activities.
  return registerKinds(registerLlm(registerScripted(new Registry())));
}

/**
 * An action registry with no action types and no store: approval stages may request what you add to it with
 * `register(defineActionType(…))`.
 */
export function defaultActionRegistry(): ActionRegistry {
  return new ActionRegistry({ store: undefined });
}
