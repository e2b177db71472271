/**
 * A work item's place in the task queues: its priority and its fairness key (a tenant, a team) with a weight.
 * Temporal's Priority and Fairness dispatch every task of the item by them (its workflow tasks, its activities,
 * and its child workflows', which inherit them on the server): a lower priority number goes first, and keys
 * of one priority share the queue in proportion to their weights. Plain data and pure checks, shared by the
 * spec schema, the client and the CLI.
 */

/** The highest priority (dispatched first). */
export const HIGHEST_PRIORITY = 1;
/** The lowest priority: Temporal's default number of levels (`matching.priorityLevels`). */
export const LOWEST_PRIORITY = 5;
/** What an item without a priority gets: Temporal's default, the middle level. */
export const DEFAULT_PRIORITY = 3;
/** Temporal refuses longer fairness keys. */
export const MAX_FAIRNESS_KEY_BYTES = 64;
/** Temporal clamps fairness weights to this range; Treadle refuses weights outside it instead. */
export const MIN_FAIRNESS_WEIGHT = 0.001;
export const MAX_FAIRNESS_WEIGHT = 1000;

/** A work item's priority and fairness, as the spec, the CLI and the SDK give them; every field optional. */
export interface ItemPriority {
  /** 1 (first) to 5 (last); absent: Temporal's default, 3. */
  priority?: number;
  /** Tasks of one priority are shared between fairness keys in proportion to their weights; absent: one shared key. */
  fairnessKey?: string;
  /** The key's share (default 1): a key of weight 2 gets twice the dispatches of a key of weight 1. */
  fairnessWeight?: number;
}

/** Temporal's `Priority` (the SDK's `WorkflowStartOptions.priority`) for an {@link ItemPriority}. */
export interface TemporalPriority {
  priorityKey?: number;
  fairnessKey?: string;
  fairnessWeight?: number;
}

/** Why `value` is not a priority, or undefined. */
export function priorityProblem(value: unknown): string | undefined {
  if (typeof value === 'number' && Number.isInteger(value) && value >= HIGHEST_PRIORITY && value <= LOWEST_PRIORITY)
    return undefined;
  return `must be a whole number from ${HIGHEST_PRIORITY} (highest) to ${LOWEST_PRIORITY} (lowest); ${DEFAULT_PRIORITY} is the default, got ${shown(value)}`;
}

/** Why `value` is not a fairness key, or undefined. */
export function fairnessKeyProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return `must be a string (a tenant, a team), got ${shown(value)}`;
  if (value.trim() === '') return 'must not be empty (leave it out for no fairness key)';
  const bytes = new TextEncoder().encode(value).length;
  if (bytes > MAX_FAIRNESS_KEY_BYTES)
    return `must be at most ${MAX_FAIRNESS_KEY_BYTES} bytes (Temporal's limit), got ${bytes} bytes`;
  return undefined;
}

/** Why `value` is not a fairness weight, or undefined. */
export function fairnessWeightProblem(value: unknown): string | undefined {
  if (
    typeof value === 'number' &&
    Number.isFinite(value) &&
    value >= MIN_FAIRNESS_WEIGHT &&
    value <= MAX_FAIRNESS_WEIGHT
  )
    return undefined;
  return `must be a number from ${MIN_FAIRNESS_WEIGHT} to ${MAX_FAIRNESS_WEIGHT} (Temporal's range; 1 is the default), got ${shown(value)}`;
}

/**
 * Every problem of an item's priority, each named as the caller spells the fields (`names`: the SDK's
 * `priority`/`fairnessKey`/`fairnessWeight` by default). A weight needs a key: it is the key's share.
 */
export function itemPriorityProblems(
  given: ItemPriority,
  names: Record<keyof ItemPriority, string> = {
    priority: 'priority',
    fairnessKey: 'fairnessKey',
    fairnessWeight: 'fairnessWeight',
  },
): string[] {
  const problems: string[] = [];
  const check = (field: keyof ItemPriority, problem: (value: unknown) => string | undefined): void => {
    if (given[field] === undefined) return;
    const found = problem(given[field]);
    if (found) problems.push(`${names[field]} ${found}`);
  };
  check('priority', priorityProblem);
  check('fairnessKey', fairnessKeyProblem);
  check('fairnessWeight', fairnessWeightProblem);
  if (given.fairnessWeight !== undefined && given.fairnessKey === undefined)
    problems.push(`${names.fairnessWeight} needs a ${names.fairnessKey}: the weight is that key's share of the queue`);
  return problems;
}

/** `given` over `defaults` field by field (the CLI's or SDK's values over the spec's). */
export function mergePriority(given: ItemPriority, defaults: ItemPriority): ItemPriority {
  const priority = given.priority ?? defaults.priority;
  const fairnessKey = given.fairnessKey ?? defaults.fairnessKey;
  // A weight belongs to its key: the spec's weight is not given to a key the caller chose.
  const fairnessWeight =
    given.fairnessWeight ??
    (given.fairnessKey === undefined || given.fairnessKey === defaults.fairnessKey
      ? defaults.fairnessWeight
      : undefined);
  return {
    ...(priority !== undefined ? { priority } : {}),
    ...(fairnessKey !== undefined ? { fairnessKey } : {}),
    ...(fairnessWeight !== undefined ? { fairnessWeight } : {}),
  };
}

/** Temporal's `Priority` for an item, or undefined when it has none (Temporal's defaults apply). */
export function temporalPriority(item: ItemPriority): TemporalPriority | undefined {
  if (!hasPriority(item)) return undefined;
  return {
    ...(item.priority !== undefined ? { priorityKey: item.priority } : {}),
    ...(item.fairnessKey !== undefined ? { fairnessKey: item.fairnessKey } : {}),
    ...(item.fairnessWeight !== undefined ? { fairnessWeight: item.fairnessWeight } : {}),
  };
}

/** An {@link ItemPriority} read back from Temporal's `Priority` (zero and empty mean unset there). */
export function itemPriorityOf(priority: TemporalPriority | undefined): ItemPriority {
  return {
    ...(priority?.priorityKey ? { priority: priority.priorityKey } : {}),
    ...(priority?.fairnessKey ? { fairnessKey: priority.fairnessKey } : {}),
    ...(priority?.fairnessWeight ? { fairnessWeight: priority.fairnessWeight } : {}),
  };
}

/** Whether an item has a priority, a fairness key or a weight of its own (not only Temporal's defaults). */
export function hasPriority(item: ItemPriority): boolean {
  return item.priority !== undefined || item.fairnessKey !== undefined || item.fairnessWeight !== undefined;
}

/**
 * One line for `treadle status`: `priority 1 · fairness key acme (weight 2)`, with the defaults named when
 * the item has none of its own.
 */
export function describePriority(item: ItemPriority): string {
  const level = item.priority !== undefined ? `priority ${item.priority}` : `priority ${DEFAULT_PRIORITY} (default)`;
  if (item.fairnessKey === undefined) return level;
  const weight = item.fairnessWeight !== undefined ? ` (weight ${item.fairnessWeight})` : '';
  return `${level} · fairness key ${item.fairnessKey}${weight}`;
}

function shown(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}
