/**
 * The six agent templates of seed 001 (the V3 TDD protocol), copied character for character from the seed's
 * ```jinja blocks: the text between the opening and the closing fence lines, without a trailing newline. They
 * are Jinja2 templates, rendered by `renderNodeTemplate` in `worker/node-templates.ts` (nunjucks, with the few
 * Jinja2 filters nunjucks lacks).
 *
 * These templates are Treadle's own code, never read from a spec file or a request, so they may use a
 * full template engine; specs' templates are untrusted and go through the locked-down Liquid engine of
 * `src/pipelines/llm/template.ts` instead. Backticks are escaped (`\``) only because the text sits in template
 * literals; no template contains `${`, so nothing is interpolated by TypeScript. `test/unit/tdd-prompts.test.ts`
 * pins each text to the SHA-256 of the seed's block.
 */
import type { TddNodeName } from './spec';

/** Node 1, Scaffold: the Planner sets up the interface, the contract suite, the test plan and any children. */
export const SCAFFOLD_TEMPLATE = `# Scaffold: {{ spec.description }}

You are the **Planner**. Analyze the spec and set up the work structure.

## Spec

**ID:** \`{{ spec.id }}\`
**Description:** {{ spec.description }}

### Acceptance Criteria
{% for c in spec.acceptanceCriteria %}
- {{ c.id }}: {{ c.text }}
{% endfor %}

{% if spec.complexityConstraints %}
### Complexity Constraints
{% if spec.complexityConstraints.time %}- Time: {{ spec.complexityConstraints.time }}{% endif %}
{% if spec.complexityConstraints.space %}- Space: {{ spec.complexityConstraints.space }}{% endif %}
{% endif %}

{% if parentContext %}
## Parent Context

You are a child node. Parent's interface:
{{ parentContext.interface }}

You must satisfy: {{ parentContext.assignedCriteria }}

Parent's interface files are **read-only**.
{% endif %}

---

## Decision: Children Needed?

**No children** (implement directly):
- Single responsibility
- <500 LOC
- All criteria tightly coupled

**With children** (decompose):
- Multiple subsystems
- Clear interface boundaries
- Independent testability

Either way, TDD and Impl nodes spawn in parallel.

---

## Actions

1. Create interface file (Types.hs with signatures)
2. Create contract suite (tests this node must pass)
3. Plan tests (one per criterion)
4. **If children needed:**
   - Define interfaces between children
   - Partition criteria among children
5. Commit scaffold

---

## Output

Emit \`InitWork\`:
- Always: scaffoldCommit, interfaceFile, contractSuite, testPlan
- If decomposing: childSpecs, interfaces

Or \`ClarificationNeeded\` if spec is ambiguous.`;

/** Node 3, TDDWriteTests: the Test Author writes failing tests for every uncovered criterion. */
export const TDD_WRITE_TESTS_TEMPLATE = `# TDD WriteTests: {{ spec.description }}

You are the **Test Author**. Write failing tests that drive implementation.

## Spec

{% for c in spec.acceptanceCriteria %}
- {{ c.id }}: {{ c.text }}
{% endfor %}

## Test Plan (from scaffold)

{% for t in scaffold.testPlan %}
- {{ t.criterionId }}: \`{{ t.plannedTestName }}\` — {{ t.approach }}
{% endfor %}

## Already Covered

{% for id in coveredCriteria %}
- {{ id }} ✓
{% endfor %}

---

## Your Task

Write failing tests for ALL uncovered criteria in one batch. Commit them together.

**Note:** TDD writes all tests upfront (batch model), not one test at a time (ping-pong model).

### Requirements

1. Test public API only
2. One criterion per test
3. Tests MUST fail on skeleton (red)
4. Commit all tests together, then emit TestsReady

---

## Output

- **TestsReady**: Tests committed → arrives at ImplBarrier
- **InvalidScaffold**: Types missing → routes back to Scaffold`;

/** Node 5, TDDReviewImpl: the Reviewer checks that Impl's green run is real and decides. */
export const TDD_REVIEW_IMPL_TEMPLATE = `# TDD ReviewImpl: {{ spec.description }}

You are the **Reviewer**. Impl claims tests pass. Verify and decide.

## Impl Result

Commit: \`{{ implResult.commitHash }}\`
Iterations: {{ implResult.iterations }}

**Tests passed:**
{% for testName in implResult.passedTests %}
- \`{{ testName }}\`
{% endfor %}

## Diff

\`\`\`diff
{{ diff }}
\`\`\`

## Review Protocol

### Phase 1: Mechanical Checks
- [ ] \`cabal build\` passes
- [ ] \`cabal test\` passes
- [ ] No \`undefined\` outside stubs
- [ ] Interface unchanged from scaffold

### Phase 2: Semantic Review
- Does impl actually satisfy the criterion?
- Code readable in 60 seconds?
- No unsafe imports?

---

## Output

- **Approved**: All good → routes to Merger
- **MoreTests**: Need additional coverage → routes to TDDWriteTests
- **Reject**: Fundamental problems → escalate`;

/** Node 6, Impl: the Implementer makes every failing test pass. */
export const IMPL_TEMPLATE = `# Impl: {{ spec.description }}

You are the **Implementer**. Make ALL failing tests pass.

## Tests to Pass

{% for f in testsReady.testFiles %}
- {{ f }}
{% endfor %}

Criteria: {{ testsReady.pendingCriteria | join(", ") }}

{% if childMerges %}
## Child Subsystems Available

{% for m in childMerges %}
- {{ m.author }}: {{ m.changes | map(attribute='symbol') | join(", ") }}
{% endfor %}

Use these subsystems - don't reimplement.
{% endif %}

## Attempt {{ attemptCount }} of 5

{% if critiqueList %}
### TDD Feedback

{% for c in critiqueList %}
- **{{ c.file }}:{{ c.line }}** — {{ c.issue }}
  Fix: {{ c.requiredFix }}
{% endfor %}
{% endif %}

---

## Your Task

1. Run tests (verify red)
2. Implement minimum code to pass ALL tests
3. Run tests (verify green)
4. Commit

**Constraints:**
- Do NOT touch test files
- Do NOT change interface signatures
- USE child subsystems if available

---

## Output

- **TestsPassed**: All green → routes to TDDReviewImpl for review
- **RequestRetry**: Some failing, have strategy → self-loop (max 5)
- **BlockedDependency**: Need missing code → routes to Scaffold
- **SpecAmbiguity**: Unclear requirement → routes to Scaffold
- **Stuck**: Cannot proceed → human escalation`;

/** Node 7, Merger: squash-merges an approved child into its parent. */
export const MERGER_TEMPLATE = `# Merge: {{ childNode.nodeId }}

You are the **Merger**. Fold completed child into parent.

## Context

Parent: \`{{ parentNode.nodeId }}\` on \`{{ parentNode.branch }}\`
Child: \`{{ childNode.nodeId }}\` on \`{{ childNode.branch }}\`

### TDD Approval

{{ tddApproval.signOff }}

**Coverage:**
{% for item in tddApproval.coverageReport.criteriaWithTests %}
- {{ item[0] }}: \`{{ item[1] }}\` ✓
{% endfor %}

---

## Merge Protocol

### 1. Squash Merge

\`\`\`bash
git merge --squash {{ childNode.branch }}
git commit -m "feat({{ childNode.nodeId }}): implement"
\`\`\`

### 2. Verification

- [ ] \`cabal build\` passes
- [ ] Contract suite passes: \`cabal test --match="Contract"\`
- [ ] Integration tests pass: \`cabal test\`

---

## Output

- **MergeComplete**: Success → broadcast to siblings, exit
- **MergeRejected**: Failed → routes back to Impl`;

/** Node 8, Rebaser: adapts a node to a sibling's merge, mechanically only. */
export const REBASER_TEMPLATE = `# Rebase: Sibling Merged

You are the **Rebaser**. A sibling just merged. Adapt or break.

## Context

Your Node: \`{{ node.nodeId }}\`
Your Branch: \`{{ node.branch }}\`
New Parent HEAD: \`{{ newParentHead }}\`

## MergeEvent

**Author:** {{ mergeEvent.author }}
**Impact:** {{ mergeEvent.impactLevel }}

{% for c in mergeEvent.changes %}
- {{ c.symbol }} ({{ c.changeType }}): {{ c.reason }}
{% endfor %}

---

## Rebase Protocol

### 1. Pause Impl/TDD Loop

No commits during rebase.

### 2. Rebase

\`\`\`bash
git fetch origin {{ parentBranch }}
git rebase origin/{{ parentBranch }}
\`\`\`

### 3. Conflict Resolution

**Invariant:** Sibling is Canon. You are Draft.
**Restriction:** Rebaser may only make MECHANICAL changes.

{% if mergeEvent.impactLevel == "Trivial" %}
Auto-resolve expected. No semantic changes.
{% elif mergeEvent.impactLevel == "Additive" %}
Sibling added new exports. You may use them.
{% else %}
**BREAKING** — Sibling changed APIs you may depend on.

**Allowed (mechanical):**
- Import updates
- Symbol renames
- Signature adjustments (same logic)

**Forbidden (semantic):**
- Changing function bodies
- Altering control flow
- Rewriting logic

If breaking change requires logic updates → emit \`RebaseConflict\` and let Impl (with full TDD context) handle it.
{% endif %}

### 4. Verify

\`\`\`bash
cabal test
\`\`\`

---

## Output

- **RebaseClean**: Trivial rebase → resume at TDDWriteTests
- **RebaseAdapted**: Breaking changes absorbed → resume at TDDWriteTests
- **RebaseConflict**: Cannot resolve → escalate to Scaffold`;

/** Each agent node's template, by node name (Fork and ImplBarrier are workflow code and have none). */
export const TDD_TEMPLATES: Readonly<Record<TddNodeName, string>> = {
  scaffold: SCAFFOLD_TEMPLATE,
  tddWriteTests: TDD_WRITE_TESTS_TEMPLATE,
  impl: IMPL_TEMPLATE,
  tddReviewImpl: TDD_REVIEW_IMPL_TEMPLATE,
  merger: MERGER_TEMPLATE,
  rebaser: REBASER_TEMPLATE,
};
