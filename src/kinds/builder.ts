/**
 * The TypeScript pipeline builder, in the style of seed 000's `Workflow::builder()`: stages are declared,
 * then gates, budgets, policies and dependencies are attached by stage name. `build()` runs the same
 * validation as YAML files and throws a {@link PipelineValidationError} listing every problem.
 *
 * ```ts
 * const spec = pipeline('docs')
 *   .stage('draft', 'scripted')
 *   .stage('publish', 'scripted')
 *   .qualityGate('draft', 'scripted')
 *   .retryBudget('draft', { maxAttempts: 3, attemptTimeout: '30s', onExhausted: 'escalate' })
 *   .reviewPolicy('draft', 'on_escalation')
 *   .reviewPolicy('publish', 'always')
 *   .dependency('publish', 'draft')
 *   .build();
 * ```
 */
import {
  PipelineValidationError,
  type ExhaustedAction,
  type KnownImplementations,
  type PipelineSpec,
  type ReviewPolicy,
} from '../model/pipeline';
import type { ItemPriority } from '../model/priority';
import type { Json } from '../model/shapes';
import { validatePipeline } from './pipeline';

type Duration = string | number;

/** Options accepted by {@link PipelineBuilder.retryBudget}; durations as `30s` strings or milliseconds. */
export interface RetryBudgetOptions {
  maxAttempts?: number;
  delay?: Duration;
  attemptTimeout?: Duration | null;
  onExhausted?: ExhaustedAction;
}

/** Temporal retry settings for mechanical failures of a stage's activities. */
export interface ActivityOptionsInput {
  startToCloseTimeout?: Duration;
  heartbeatTimeout?: Duration;
  retry?: {
    maximumAttempts?: number;
    initialInterval?: Duration;
    backoffCoefficient?: number;
    maximumInterval?: Duration;
    nonRetryableErrorTypes?: string[];
  };
}

interface DraftStage {
  name: string;
  run: string;
  with?: Json;
  description?: string;
  gate?: { run: string; with?: Json };
  dependsOn: string[];
  retryBudget?: RetryBudgetOptions;
  reviewPolicy?: ReviewPolicy;
  reviewTtl?: Duration | null;
  onReviewExpired?: 'approve' | 'reject';
  reviewers?: string;
  reviewSla?: Duration;
  onBreach?: 'notify' | { escalateTo: string };
  outputSchema?: Json;
  activity?: ActivityOptionsInput;
  taskQueue?: string;
}

/** Fluent builder; every method returns the builder. Problems are collected and reported by `build()`. */
export class PipelineBuilder {
  private readonly stages: DraftStage[] = [];
  private readonly problems: string[] = [];
  private description?: string;
  private parallel?: number;
  private queue?: string;
  private dispatch: ItemPriority = {};
  private readonly contracts: Record<string, unknown>[] = [];

  constructor(private readonly name: string) {}

  /** At most this many stages of one item run at once (`max_parallel`). */
  maxParallel(stages: number): this {
    this.parallel = stages;
    return this;
  }

  /**
   * The task queue whose worker runs the implementations Treadle does not ship (`task_queue`), for every
   * stage; with `stage`, for that stage's implementation, gate and action type only.
   */
  taskQueue(queue: string, stage?: string): this {
    if (stage === undefined) {
      this.queue = queue;
      return this;
    }
    return this.update(stage, 'taskQueue', (s) => (s.taskQueue = queue));
  }

  /** The items' priority in the task queues (`priority`): 1 first … 5; the start's own `priority` wins. */
  priority(level: number): this {
    this.dispatch.priority = level;
    return this;
  }

  /**
   * The items' fairness key, a tenant or a team (`fairness_key`), and its share of the queue (`fairness_weight`,
   * default 1); the start's own `fairnessKey` / `fairnessWeight` win.
   */
  fairness(key: string, weight?: number): this {
    this.dispatch.fairnessKey = key;
    if (weight !== undefined) this.dispatch.fairnessWeight = weight;
    return this;
  }

  /** Describes the pipeline. */
  describe(text: string): this {
    this.description = text;
    return this;
  }

  /** Adds a stage run by the registered implementation `run`, with optional implementation config. */
  stage(name: string, run: string, options: { with?: Json; description?: string; dependsOn?: string[] } = {}): this {
    this.stages.push({ name, run, dependsOn: [...(options.dependsOn ?? [])], ...pick(options, 'with', 'description') });
    return this;
  }

  /** Attaches a quality gate (a registered gate implementation) to a stage. */
  qualityGate(stage: string, run: string, config?: Json): this {
    return this.update(stage, 'qualityGate', (s) => (s.gate = config === undefined ? { run } : { run, with: config }));
  }

  /** Sets a stage's retry budget. */
  retryBudget(stage: string, budget: RetryBudgetOptions): this {
    return this.update(stage, 'retryBudget', (s) => (s.retryBudget = { ...budget }));
  }

  /** Sets a stage's review policy. */
  reviewPolicy(stage: string, policy: ReviewPolicy): this {
    return this.update(stage, 'reviewPolicy', (s) => (s.reviewPolicy = policy));
  }

  /** Gives a stage's reviews a time to live and what happens when it runs out. */
  reviewTtl(stage: string, ttl: Duration, onExpired: 'approve' | 'reject' = 'reject'): this {
    return this.update(stage, 'reviewTtl', (s) => {
      s.reviewTtl = ttl;
      s.onReviewExpired = onExpired;
    });
  }

  /** Sends a stage's reviews to a reviewer group (`reviewers:`), which the review inbox and listings filter on. */
  reviewers(stage: string, group: string): this {
    return this.update(stage, 'reviewers', (s) => (s.reviewers = group));
  }

  /**
   * Gives a stage's decisions a deadline (`review_sla:`): past it they are overdue and announced as `overdue`;
   * with `{ escalateTo }` (`on_breach: { escalate_to: <group> }`) they also go to that reviewer group.
   */
  reviewSla(stage: string, after: Duration, onBreach: 'notify' | { escalateTo: string } = 'notify'): this {
    return this.update(stage, 'reviewSla', (s) => {
      s.reviewSla = after;
      s.onBreach = onBreach;
    });
  }

  /**
   * What a stage's artefact must match (`output_schema:`, a JSON Schema object, draft 2020-12): a reviewer's
   * edit is refused until it does. Overrides the schema the implementation registered.
   */
  outputSchema(stage: string, schema: Json): this {
    return this.update(stage, 'outputSchema', (s) => (s.outputSchema = schema));
  }

  /** Sets Temporal activity options (timeouts, mechanical retry policy) for a stage. */
  activityOptions(stage: string, options: ActivityOptionsInput): this {
    return this.update(stage, 'activityOptions', (s) => (s.activity = options));
  }

  /** Declares that `stage` runs after `dependsOn` and receives its artefact. */
  dependency(stage: string, dependsOn: string): this {
    return this.update(stage, 'dependency', (s) => s.dependsOn.push(dependsOn));
  }

  /**
   * Puts a quality contract (seed 002) on the edge `from` → `to`: `to` validates `from`'s items (at `items`,
   * named by `itemId`) with `validate`, `from` revises the rejected ones with `revise`, up to `maxRetries`
   * rounds. `validate` / `revise` name a validator / reviser (`llm` with `{ criteria }` is built in);
   * `taskQueue` names the queue whose workers register yours (else `to`'s queue, else the pipeline's).
   */
  contract(
    from: string,
    to: string,
    options: {
      items: string;
      itemId: string;
      validate: string | { run: string; with?: Json };
      revise: string | { run: string; with?: Json };
      maxRetries?: number;
      taskQueue?: string;
    },
  ): this {
    this.contracts.push({ from, to, ...options });
    return this;
  }

  /** Validates and returns the canonical spec; throws listing every problem. */
  build(known?: KnownImplementations): PipelineSpec {
    const result = validatePipeline(this.toJSON(), known);
    const problems = [...this.problems, ...(result.ok ? [] : result.problems)];
    if (!result.ok || problems.length > 0) throw new PipelineValidationError(this.name, problems);
    return result.spec;
  }

  /** The spec as written (before defaults), the form that travels to the workflow. */
  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      ...(this.description !== undefined ? { description: this.description } : {}),
      ...(this.parallel !== undefined ? { maxParallel: this.parallel } : {}),
      ...(this.queue !== undefined ? { taskQueue: this.queue } : {}),
      ...this.dispatch,
      stages: this.stages.map((s) => ({ ...s })),
      ...(this.contracts.length > 0 ? { contracts: this.contracts.map((c) => ({ ...c })) } : {}),
    };
  }

  private update(stage: string, method: string, apply: (s: DraftStage) => void): this {
    const found = this.stages.find((s) => s.name === stage);
    if (found) apply(found);
    else this.problems.push(`${method}("${stage}", …): no stage named "${stage}" was declared with .stage()`);
    return this;
  }
}

/** Starts a pipeline builder. */
export function pipeline(name: string): PipelineBuilder {
  return new PipelineBuilder(name);
}

function pick<T extends object, K extends keyof T>(source: T, ...keys: K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const key of keys) if (source[key] !== undefined) out[key] = source[key];
  return out;
}
