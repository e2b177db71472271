/** Activity type names shared by the workflow (which schedules them) and the worker (which registers them). */

/** Treadle's own activity that checks a spec's implementation names against the worker's registry. */
export const CHECK_IMPLEMENTATIONS_ACTIVITY = 'treadle.checkImplementations';

/** Stage implementations are registered under their own name; gates under `gate:<name>`. */
export function gateActivityType(gate: string): string {
  return `gate:${gate}`;
}
