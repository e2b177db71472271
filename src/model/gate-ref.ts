/** Gate references, kept apart from the zod schemas so workflow code can use them without loading zod. */
import type { Json } from './shapes';

/** A gate: a registered implementation and its configuration, or all/any of several gates. */
export type GateRef = { run: string; with?: Json } | { all: GateRef[] } | { any: GateRef[] };

/** Every implementation a gate (composed or not) names, depth first. */
export function gateLeaves(gate: GateRef | null): { run: string; with?: Json }[] {
  if (!gate) return [];
  if ('all' in gate) return gate.all.flatMap(gateLeaves);
  if ('any' in gate) return gate.any.flatMap(gateLeaves);
  return [gate];
}
