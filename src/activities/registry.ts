/**
 * The registry of stage and gate implementations a worker runs, by name (DESIGN.md principle 3). The
 * names are the activity types seen in the history: stages as registered, gates as `gate:<name>`.
 */
import type { Agent } from '../agents/types';
import type { BlobStore } from '../storage/blob-store';
import type { AttemptRecord, Json, QualityFeedback, QualityVerdict, StageOutput } from '../model/shapes';
import type { ActivityContextBase } from '../model/state';
import type { KnownImplementations } from '../model/pipeline';
import type { ContractReviser, ContractValidator } from '../kinds/contract/worker/validators';
import { outputSchemaShapeProblem } from '../model/limits';
import { outputSchemaChecks } from '../agents/output-schema-checks-lazy';

/** Logging surface handed to implementations (the activity logger in a worker). */
export interface ImplementationLogger {
  info(message: string, attrs?: Record<string, unknown>): void;
  warn(message: string, attrs?: Record<string, unknown>): void;
}

/**
 * What every implementation is given (seed 000 `StageContext` / `QualityContext`): the activity's input
 * (item, stage, attempt, the work item's payload, `with:` config, previous attempts) with upstream
 * artefacts resolved from the blob store, plus what only a running activity can offer.
 */
export interface ImplementationContext extends Omit<ActivityContextBase, 'upstream' | 'config' | 'previousAttempts'> {
  /** This implementation's configuration from the spec (`with:`). */
  config: Json | undefined;
  /** Dependencies' final artefacts, blob references already resolved. */
  upstream: Record<string, Json>;
  /** This stage's earlier attempts, oldest first, their artefacts resolved. */
  previousAttempts: AttemptRecord[];
  /** Aborted when the attempt times out or the work item is cancelled. */
  signal: AbortSignal;
  /** `<workflow id>/<stage>/<attempt>`: use it to make external side effects happen once per attempt. */
  idempotencyKey: string;
  /**
   * Seed 003's key, `sha256(runId + step + inputHash)`: the same for every attempt and re-run of this step with
   * the same input (the item's input, the upstream artefacts and the config), so a side effect keyed by it
   * happens once per run and input, however often the step runs.
   */
  stepKey: string;
  blobs: BlobStore;
  log: ImplementationLogger;
  /**
   * Heartbeats now (activities also heartbeat on their own); `details` records progress, which a retried
   * execution of the same attempt finds in `previousProgress`.
   */
  heartbeat(details?: unknown): void;
  /** The progress the previous execution of this activity last recorded, if Temporal retried it. */
  previousProgress: unknown;
  /**
   * The agent for this attempt: the named provider, else the stage's `agent:`, else `TREADLE_AGENT`, else
   * `anthropic` with an API key and `scripted` without. Every call it makes lands in the call log of the
   * attempt, and `conversationId` continues stored conversations.
   */
  agent(provider?: string): Agent;
}

/** Context of a stage execution. */
export interface StageContext extends ImplementationContext {
  /** Feedback from the previous attempt's gate; null on a first attempt. */
  feedback: QualityFeedback | null;
}

/** Context of a gate evaluation: the output under judgement, its artefact resolved. */
export interface GateContext extends ImplementationContext {
  output: StageOutput;
}

/** Does a stage's work. Throwing is a mechanical failure (retried by Temporal), not a quality verdict. */
export type StageImplementation = (ctx: StageContext) => Promise<StageOutput>;
/** Judges a stage's output. */
export type GateImplementation = (ctx: GateContext) => Promise<QualityVerdict>;

const RESERVED = /^(treadle\.|gate:)/;

/** Options of a registration. */
export interface ImplementationOptions {
  /** The implementation calls models (through `ctx.agent()`): the work item's token budget applies to it. */
  usesAgent?: boolean;
  /**
   * Checks a `with:` config when a spec is validated (the worker's prepare step, `treadle validate`), so
   * a bad config (e.g. a template that does not parse) is refused before anything runs; one `path: message`
   * per problem.
   */
  checkConfig?: (config: Json | undefined) => string[];
  /**
   * The JSON Schema (draft 2020-12) of the stage's artefact, for stages whose spec gives no `output_schema:`:
   * reviewers' edits must match it (the stage's own output is not checked). Stages only; checked when registered.
   */
  outputSchema?: Json;
}

/** Implementations by name. */
export class Registry {
  private readonly stageImpls = new Map<string, StageImplementation>();
  private readonly gateImpls = new Map<string, GateImplementation>();
  private readonly agentBacked = new Set<string>();
  /** Config checks by activity type (stages by name, gates as `gate:<name>`). */
  private readonly checks = new Map<string, (config: Json | undefined) => string[]>();
  /** Output schemas of stage implementations, by name. */
  private readonly schemas = new Map<string, Json>();
  /** Stage kinds (src/kinds/index.ts): names a spec may run, whose attempts run in workflow code. */
  private readonly kindNames = new Map<string, true>();
  private readonly validatorImpls = new Map<string, ContractValidator>();
  private readonly reviserImpls = new Map<string, ContractReviser>();

  /** Registers a contract validator (seed 002): the consuming stage's judge of a producer's items. `llm` is built in. */
  validator(name: string, impl: ContractValidator): this {
    this.claim(name, this.validatorImpls, 'validator');
    this.validatorImpls.set(name, impl);
    return this;
  }

  /** Registers a contract reviser (seed 002): the producing stage's revision of one rejected item. `llm` is built in. */
  reviser(name: string, impl: ContractReviser): this {
    this.claim(name, this.reviserImpls, 'reviser');
    this.reviserImpls.set(name, impl);
    return this;
  }

  /** The registered contract validators and revisers, by name. */
  contractImplementations(): {
    validators: Record<string, ContractValidator>;
    revisers: Record<string, ContractReviser>;
  } {
    return { validators: Object.fromEntries(this.validatorImpls), revisers: Object.fromEntries(this.reviserImpls) };
  }

  /** Registers a stage implementation; names are unique. */
  stage(name: string, impl: StageImplementation, options: ImplementationOptions = {}): this {
    this.claim(name, this.stageImpls, 'stage');
    if (options.outputSchema !== undefined) checkSchema(name, options.outputSchema);
    return this.addStage(name, impl, options);
  }

  /**
   * Registers a stage kind's name (src/kinds/index.ts) so that specs naming it validate, with its config
   * check: its attempts run in workflow code (the workflow table), so it has no stage activity.
   */
  kind(name: string, options: Pick<ImplementationOptions, 'usesAgent' | 'checkConfig'> = {}): this {
    this.claim(name, this.stageImpls, 'stage');
    this.kindNames.set(name, true);
    if (options.usesAgent) this.agentBacked.add(name);
    if (options.checkConfig) this.checks.set(name, options.checkConfig);
    return this;
  }

  /** Registers a gate implementation; names are unique among gates. */
  gate(name: string, impl: GateImplementation, options: ImplementationOptions = {}): this {
    this.claim(name, this.gateImpls, 'gate');
    this.gateImpls.set(name, impl);
    if (options.usesAgent) this.agentBacked.add(`gate:${name}`);
    if (options.checkConfig) this.checks.set(`gate:${name}`, options.checkConfig);
    return this;
  }

  /** Adds every implementation of another registry. */
  merge(other: Registry): this {
    const options = (type: string): ImplementationOptions => {
      const checkConfig = other.checks.get(type);
      const outputSchema = other.schemas.get(type);
      return {
        usesAgent: other.agentBacked.has(type),
        ...(checkConfig ? { checkConfig } : {}),
        ...(outputSchema !== undefined ? { outputSchema } : {}),
      };
    };
    for (const name of other.kindNames.keys()) this.kind(name, options(name));
    // The other registry checked its schemas when they were registered: they are not compiled again.
    for (const [name, impl] of other.stageImpls) {
      this.claim(name, this.stageImpls, 'stage');
      this.addStage(name, impl, options(name));
    }
    for (const [name, impl] of other.gateImpls) this.gate(name, impl, options(`gate:${name}`));
    for (const [name, impl] of other.validatorImpls) this.validator(name, impl);
    for (const [name, impl] of other.reviserImpls) this.reviser(name, impl);
    return this;
  }

  /** The stage implementation registered under `name`; undefined for a stage kind's name too. */
  getStage(name: string): StageImplementation | undefined {
    return this.stageImpls.get(name);
  }

  getGate(name: string): GateImplementation | undefined {
    return this.gateImpls.get(name);
  }

  /** Registered names and config checks, for validating specs. */
  names(): {
    stages: string[];
    gates: string[];
    validators: string[];
    revisers: string[];
    checkConfig: NonNullable<KnownImplementations['checkConfig']>;
    outputSchemas: Record<string, Json>;
    outputSchemaProblem: NonNullable<KnownImplementations['outputSchemaProblem']>;
  } {
    return {
      stages: [...this.stageImpls.keys(), ...this.kindNames.keys()].sort(),
      gates: [...this.gateImpls.keys()].sort(),
      validators: ['llm', ...this.validatorImpls.keys()].sort(),
      revisers: ['llm', ...this.reviserImpls.keys()].sort(),
      checkConfig: (kind, name, config) => this.checks.get(kind === 'gate' ? `gate:${name}` : name)?.(config) ?? [],
      outputSchemas: Object.fromEntries(this.schemas),
      outputSchemaProblem: (schema) => outputSchemaChecks().outputSchemaProblem(schema),
    };
  }

  /** Activity types of the implementations that call models (stages by name, gates as `gate:<name>`). */
  agentBackedTypes(): string[] {
    return [...this.agentBacked].sort();
  }

  /** Adds a stage implementation whose name is claimed and whose output schema, if any, is checked. */
  private addStage(name: string, impl: StageImplementation, options: ImplementationOptions): this {
    if (options.outputSchema !== undefined) this.schemas.set(name, options.outputSchema);
    this.stageImpls.set(name, impl);
    if (options.usesAgent) this.agentBacked.add(name);
    if (options.checkConfig) this.checks.set(name, options.checkConfig);
    return this;
  }

  private claim(name: string, into: Map<string, unknown>, kind: string): void {
    if (!/^[A-Za-z][A-Za-z0-9_.-]*$/.test(name) || RESERVED.test(name)) {
      throw new Error(
        `invalid ${kind} implementation name "${name}": use letters, digits, _ . - and not the prefixes treadle. or gate:`,
      );
    }
    if (into.has(name) || (into === this.stageImpls && this.kindNames.has(name)))
      throw new Error(`${kind} implementation "${name}" is already registered`);
  }
}

/** Refuses a registered output schema (a programming error) that would not pass a spec. */
function checkSchema(stage: string, schema: Json): void {
  const problem = outputSchemaShapeProblem(schema) ?? outputSchemaChecks().outputSchemaProblem(schema as object);
  if (problem !== undefined) throw new Error(`stage implementation "${stage}": outputSchema ${problem}`);
}
