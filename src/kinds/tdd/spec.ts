/**
 * The V3 TDD protocol's shapes (seed 001 "Shared Types" and every node's `oneOf` exit), as zod schemas for
 * the places that parse untrusted data (agent replies, spec files, the client), and as types for the
 * workflow, which imports no zod (see review-request.ts for why).
 *
 * An exit is the seed's `oneOf` written flat with its name in `exit`: the seed's
 *
 *     - TestsPassed: { commitHash, iterations, passedTests }
 *
 * is the reply `{"exit": "TestsPassed", "commitHash": "…", "iterations": 2, "passedTests": ["…"]}`. One
 * discriminated union per node; every field typed as the seed's shared types say (`Int` is a whole number,
 * `Maybe X` an optional field that may also be null, `FilePath` a relative path inside the worktree).
 */
import { z } from 'zod';
import { describeConfigIssues } from '../../model/spec-problems';
import {
  IMPACT_LEVELS,
  type ExitName,
  type ParentContext,
  type Spec,
  type TddNodeInput,
  type TddNodeName,
  type TddSettings,
} from './shapes';

// The seed's shared types the workflow routes on are zod-free, in shapes.ts; the schemas below parse to them.
export { IMPACT_LEVELS, TDD_NODES } from './shapes';
export type { ExitName, ImpactLevel, ParentContext, Spec, TddNodeName, TddSettings } from './shapes';

/** A path relative to the node's worktree: no absolute paths, no `..`, no NUL (checked again on disk). */
export const FilePathSchema = z
  .string()
  .min(1, 'a file path is needed')
  .max(500)
  .refine(
    (p) => !p.startsWith('/') && !/^[A-Za-z]:[\\/]/.test(p) && !p.includes('\0') && !p.split(/[\\/]/).includes('..'),
    {
      message: 'must be a relative path inside the worktree (no leading "/", no "..")',
    },
  );
const Text = z.string();
const Int = z.number().int();
/** The seed's `Maybe X`: absent or null. */
const maybe = <T extends z.ZodType>(schema: T) => schema.nullish();

export const CriterionSchema = z.object({ id: z.string().min(1), text: Text });
export const ConstraintsSchema = z.object({ time: maybe(Text), space: maybe(Text) });
export const PlannedTestSchema = z.object({ criterionId: Text, plannedTestName: Text, approach: Text });
export const CritiqueSchema = z.object({ file: FilePathSchema, line: Int, issue: Text, requiredFix: Text });
export const ImpactLevelSchema = z.enum(IMPACT_LEVELS);
export const ChangeEntrySchema = z.object({
  symbol: Text,
  changeType: z.enum(['SignatureChange', 'NewExport', 'RemovedExport', 'BehaviorChange']),
  reason: Text,
});
export const NodeInfoSchema = z.object({ nodeId: Text, branch: Text });
export const CoverageReportSchema = z.object({
  criteriaWithTests: z.array(z.tuple([Text, Text])),
  criteriaMissing: z.array(Text),
});
const mergeCompleteFields = {
  mergeCommit: Text,
  author: Text,
  impactLevel: ImpactLevelSchema,
  changes: z.array(ChangeEntrySchema),
};
export const MergeCompleteSchema = z.object(mergeCompleteFields);
export const MergeEventSchema = z.object({
  author: Text,
  impactLevel: ImpactLevelSchema,
  changes: z.array(ChangeEntrySchema),
});
const initWorkFields = {
  scaffoldCommit: Text,
  interfaceFile: FilePathSchema,
  contractSuite: FilePathSchema,
  testPlan: z.array(PlannedTestSchema),
};
export const InitWorkPayloadSchema = z.object(initWorkFields);
const testsReadyFields = { testsCommit: Text, testFiles: z.array(FilePathSchema), pendingCriteria: z.array(Text) };
export const TestsReadyPayloadSchema = z.object(testsReadyFields);
const implResultFields = { commitHash: Text, iterations: Int, passedTests: z.array(Text) };
export const ImplResultSchema = z.object(implResultFields);
const approvalFields = { signOff: Text, coverageReport: CoverageReportSchema };
export const TDDApprovalSchema = z.object(approvalFields);
export const AdaptationSchema = z.object({ symbol: Text, change: Text, reason: Text });

/** The seed's `Spec`. */
export const SpecSchema = z.object({
  id: z
    .string()
    .min(1)
    .max(60)
    .regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, 'letters, digits, "_" and "-" only (it names branches and workflow ids)'),
  description: Text.min(1, 'describe what to build'),
  acceptanceCriteria: z.array(CriterionSchema).min(1, 'at least one acceptance criterion'),
  targetPath: FilePathSchema,
  testPath: FilePathSchema,
  complexityConstraints: maybe(ConstraintsSchema),
}) satisfies z.ZodType<Spec>;
export const ChildSpecSchema = SpecSchema.omit({ complexityConstraints: true });
export const InterfaceFileSchema = z.object({ path: FilePathSchema, exports: z.array(Text) });
export const ParentContextSchema = z.object({
  interface: Text,
  assignedCriteria: Text,
}) satisfies z.ZodType<ParentContext>;

/** Scaffold's exit. */
export const ScaffoldExitSchema = z.discriminatedUnion('exit', [
  z.object({
    exit: z.literal('InitWork'),
    ...initWorkFields,
    childSpecs: maybe(z.array(ChildSpecSchema)),
    interfaces: maybe(z.array(InterfaceFileSchema)),
  }),
  z.object({ exit: z.literal('ClarificationNeeded'), question: Text, ambiguityReference: Text, specSentence: Text }),
]);
/** TDDWriteTests' exit. */
export const TDDWriteTestsExitSchema = z.discriminatedUnion('exit', [
  z.object({ exit: z.literal('TestsReady'), ...testsReadyFields }),
  z.object({ exit: z.literal('InvalidScaffold'), missingType: Text, expectedLocation: FilePathSchema }),
]);
/** TDDReviewImpl's exit. */
export const TDDReviewImplExitSchema = z.discriminatedUnion('exit', [
  z.object({ exit: z.literal('Approved'), ...approvalFields }),
  z.object({
    exit: z.literal('MoreTests'),
    critiques: z.array(CritiqueSchema),
    additionalTests: z.array(PlannedTestSchema),
  }),
  z.object({ exit: z.literal('Reject'), reason: Text, missingCriteria: z.array(Text) }),
]);
/** Impl's exit. */
export const ImplExitSchema = z.discriminatedUnion('exit', [
  z.object({ exit: z.literal('TestsPassed'), ...implResultFields }),
  z.object({
    exit: z.literal('RequestRetry'),
    diagnosis: Text,
    strategyFrom: Text,
    strategyTo: Text,
    failingTests: z.array(Text),
  }),
  z.object({ exit: z.literal('BlockedDependency'), missingSymbol: Text, expectedImportPath: FilePathSchema }),
  z.object({ exit: z.literal('SpecAmbiguity'), specSentence: Text, contradictionTrace: Text, question: Text }),
  z.object({ exit: z.literal('Stuck'), diagnosis: Text, recommendation: Text, attempts: Int }),
]);
/** Merger's exit. */
export const MergerExitSchema = z.discriminatedUnion('exit', [
  z.object({ exit: z.literal('MergeComplete'), ...mergeCompleteFields }),
  z.object({
    exit: z.literal('MergeRejected'),
    reason: z.enum(['ContractViolation', 'BuildFailure', 'IntegrationFailure']),
    details: Text,
    failingTests: z.array(Text),
  }),
]);
/** Rebaser's exit. */
export const RebaserExitSchema = z.discriminatedUnion('exit', [
  z.object({ exit: z.literal('RebaseClean'), newBase: Text }),
  z.object({ exit: z.literal('RebaseAdapted'), newBase: Text, adaptations: z.array(AdaptationSchema) }),
  z.object({
    exit: z.literal('RebaseConflict'),
    conflictFile: FilePathSchema,
    ourChange: Text,
    theirChange: Text,
    whyUnresolvable: Text,
  }),
]);

export type Criterion = z.infer<typeof CriterionSchema>;
export type PlannedTest = z.infer<typeof PlannedTestSchema>;
export type Critique = z.infer<typeof CritiqueSchema>;
export type ChangeEntry = z.infer<typeof ChangeEntrySchema>;
export type NodeInfo = z.infer<typeof NodeInfoSchema>;
export type MergeComplete = z.infer<typeof MergeCompleteSchema>;
export type MergeEvent = z.infer<typeof MergeEventSchema>;
export type InitWorkPayload = z.infer<typeof InitWorkPayloadSchema>;
export type TestsReadyPayload = z.infer<typeof TestsReadyPayloadSchema>;
export type ImplResult = z.infer<typeof ImplResultSchema>;
export type TDDApproval = z.infer<typeof TDDApprovalSchema>;
export type ChildSpec = z.infer<typeof ChildSpecSchema>;
export type ScaffoldExit = z.infer<typeof ScaffoldExitSchema>;
export type TDDWriteTestsExit = z.infer<typeof TDDWriteTestsExitSchema>;
export type TDDReviewImplExit = z.infer<typeof TDDReviewImplExitSchema>;
export type ImplExit = z.infer<typeof ImplExitSchema>;
export type MergerExit = z.infer<typeof MergerExitSchema>;
export type RebaserExit = z.infer<typeof RebaserExitSchema>;

/** Each node's exit schema. */
export const EXIT_SCHEMAS = {
  scaffold: ScaffoldExitSchema,
  tddWriteTests: TDDWriteTestsExitSchema,
  impl: ImplExitSchema,
  tddReviewImpl: TDDReviewImplExitSchema,
  merger: MergerExitSchema,
  rebaser: RebaserExitSchema,
} as const satisfies Record<TddNodeName, z.ZodType>;

/** Any node's exit. */
export type NodeExit = ScaffoldExit | TDDWriteTestsExit | ImplExit | TDDReviewImplExit | MergerExit | RebaserExit;
/** The zod-free {@link ExitName} (shapes.ts) names exactly the exits these schemas parse: a compile-time check. */
type ExitNamesMatch = [ExitName] extends [NodeExit['exit']]
  ? [NodeExit['exit']] extends [ExitName]
    ? true
    : never
  : never;
const _exitNamesMatch: ExitNamesMatch = true;

// ---------------------------------------------------------------------------------------------------------
// Treadle's settings around the seed's Spec

export { MAX_IMPL_ATTEMPTS } from './shapes';
/** The seed's nudge: no decision after this long → one re-prompt with the reminder. */
export const DEFAULT_NUDGE_TIMEOUT_MS = 60_000;
/** The seed's reminder, word for word. */
export const NUDGE_REMINDER = 'REMINDER: Emit a decision to complete this phase';

export const TDD_LIMITS = {
  /** Tree depth: the root is depth 0. */
  maxDepth: { default: 3, max: 6 },
  /** Children one Scaffold may spawn. */
  maxChildren: { default: 8, max: 32 },
  /** MoreTests rounds before the node escalates instead of writing more tests. */
  maxReviewRounds: { default: 3, max: 10 },
  /** Times a node may return to Scaffold (BlockedDependency, SpecAmbiguity, InvalidScaffold, RebaseConflict). */
  maxScaffoldRuns: { default: 4, max: 10 },
  /** Malformed replies re-prompted with feedback within one node call. */
  maxInvalidReplies: { default: 2, max: 5 },
} as const;

const limit = (l: { default: number; max: number }) => z.number().int().min(1).max(l.max).default(l.default);

/** Treadle's settings for a tree; `tdd:` in a spec file. */
export const TddSettingsSchema = z
  .object({
    /** argv of the test command, checked against the worker's allow-list (`TREADLE_TDD_TEST_COMMANDS`). */
    testCommand: z.array(z.string().min(1)).min(1).default(['node', '--test']),
    /** Test runs stop after this many seconds. */
    testTimeoutSeconds: z.number().int().min(1).max(3_600).default(120),
    /** Agent provider: `scripted`, `anthropic` or `claude-code` (default: the worker's default agent). */
    agent: z.string().optional(),
    model: z.string().optional(),
    /** Seconds without a decision before the seed's reminder is sent once. */
    nudgeTimeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(3_600)
      .default(DEFAULT_NUDGE_TIMEOUT_MS / 1000),
    /** How long a clarification or `Stuck` escalation waits for a human (e.g. 86400); absent: forever. */
    humanTtlSeconds: z.number().int().min(1).optional(),
    maxDepth: limit(TDD_LIMITS.maxDepth),
    maxChildren: limit(TDD_LIMITS.maxChildren),
    maxReviewRounds: limit(TDD_LIMITS.maxReviewRounds),
    maxScaffoldRuns: limit(TDD_LIMITS.maxScaffoldRuns),
    maxInvalidReplies: limit(TDD_LIMITS.maxInvalidReplies),
    /** Branch the tree starts from (default: the repository's current branch). */
    baseBranch: z.string().optional(),
    /** Branch the root merges into (default `treadle/<spec id>`, made from the base branch). */
    targetBranch: z.string().optional(),
  })
  .strict() satisfies z.ZodType<TddSettings>;

/** A spec file for `treadle tdd`: the seed's Spec plus Treadle's `tdd:` settings. */
export const TddSpecFileSchema = SpecSchema.extend({
  tdd: TddSettingsSchema.default(TddSettingsSchema.parse({})),
}).strict();
export type TddSpecFile = z.infer<typeof TddSpecFileSchema>;

/** Every problem of a spec file at once, each naming its field. */
export function validateTddSpec(raw: unknown): { ok: true; spec: TddSpecFile } | { ok: false; problems: string[] } {
  const parsed = TddSpecFileSchema.safeParse(raw);
  const problems = parsed.success
    ? []
    : parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(spec)'}: ${i.message}`);
  // The cross-field checks read the raw file, so they are listed with the field problems, not after a fix.
  const file = (typeof raw === 'object' && raw !== null ? raw : {}) as {
    acceptanceCriteria?: unknown;
    targetPath?: unknown;
    testPath?: unknown;
  };
  const ids = Array.isArray(file.acceptanceCriteria)
    ? file.acceptanceCriteria
        .map((c) => (typeof c === 'object' && c !== null ? (c as { id?: unknown }).id : undefined))
        .filter((id): id is string => typeof id === 'string')
    : [];
  for (const id of new Set(ids.filter((id, i) => ids.indexOf(id) !== i)))
    problems.push(`acceptanceCriteria: criterion id "${id}" appears more than once`);
  if (typeof file.testPath === 'string' && file.testPath === file.targetPath)
    problems.push('testPath: must differ from targetPath');
  return parsed.success && problems.length === 0 ? { ok: true, spec: parsed.data } : { ok: false, problems };
}

/** Problems with the child specs a Scaffold returned, against the tree's limits (depth of the new children). */
export function checkChildSpecs(
  children: readonly ChildSpec[],
  options: { depth: number; maxDepth: number; maxChildren: number },
): string[] {
  const problems: string[] = [];
  if (children.length === 0) return problems;
  if (options.depth + 1 > options.maxDepth)
    problems.push(
      `childSpecs: this node is at depth ${options.depth} and the tree's maxDepth is ${options.maxDepth}; implement it directly, without children`,
    );
  if (children.length > options.maxChildren)
    problems.push(
      `childSpecs: ${children.length} children, the tree's maxChildren is ${options.maxChildren}; group the work into fewer children`,
    );
  const ids = children.map((c) => c.id);
  for (const id of new Set(ids.filter((id, i) => ids.indexOf(id) !== i)))
    problems.push(`childSpecs: child id "${id}" appears more than once`);
  return problems;
}

export { TDD_STAGE } from './shapes';

/** `with:` of a `tdd` stage: the tree's spec file, the repository on the workers, scripted replies (offline). */
export const TddStageConfigSchema = z
  .object({
    spec: z.unknown(),
    repo: z
      .string()
      .min(1)
      .refine((p) => p.startsWith('/'), 'must be an absolute path on the workers'),
    replies: z.record(z.string(), z.array(z.unknown())).optional(),
  })
  .strict();

/** Every problem of a `tdd` stage's `with:`, spec problems prefixed with `spec.`. */
export function checkTddStageConfig(config: unknown): string[] {
  const parsed = TddStageConfigSchema.safeParse(config ?? {});
  const fields = Object.keys(TddStageConfigSchema.shape);
  const fieldsAt = (path: readonly PropertyKey[]) => (path.length === 0 ? fields : undefined);
  const required = { repo: 'the git repository, an absolute path on the workers (in TREADLE_TDD_REPOS)' };
  const problems = parsed.success
    ? []
    : describeConfigIssues(parsed.error.issues, config ?? {}, { fieldsAt, required });
  const spec = (config as { spec?: unknown } | null | undefined)?.spec;
  if (spec === undefined)
    problems.push("spec: a tdd stage needs the tree's spec (the same fields as a `treadle tdd` spec file)");
  else {
    const checked = validateTddSpec(spec);
    if (!checked.ok) problems.push(...checked.problems.map((p) => `spec.${p}`));
  }
  return [...new Set(problems)];
}

/** The seed's Spec of a spec file (without Treadle's `tdd:` settings). */
export function seedSpecOf(file: TddSpecFile): Spec {
  const { tdd: _settings, ...spec } = file;
  return spec;
}

/** The root node's input for a validated spec file; the spec (and replies) are already stored by reference. */
export function tddRootInput(
  file: TddSpecFile,
  where: { treeId: string; repo: string; contextRef: string; repliesRef?: string },
): TddNodeInput {
  const settings = file.tdd;
  return {
    treeId: where.treeId,
    nodePath: file.id,
    specId: file.id,
    contextRef: where.contextRef,
    repo: where.repo,
    base: settings.baseBranch ?? 'HEAD',
    mergeInto: tddTargetBranch(file),
    depth: 0,
    settings,
    readOnly: [],
    ...(where.repliesRef ? { repliesRef: where.repliesRef } : {}),
  };
}

/** Where the root merges: `tdd.targetBranch`, else `treadle/<spec id>`. */
export function tddTargetBranch(file: TddSpecFile): string {
  return file.tdd.targetBranch ?? `treadle/${file.id}`;
}
