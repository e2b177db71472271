/**
 * Deadlines for decisions a person owes (issue 40): `review_sla:` and `on_breach:` in a spec (stage, pipeline, the
 * stage's own winning), their problems, the breach record, and how listings read a deadline: `isOverdue`, the
 * `overdue` filter of the inbox and `treadle decisions`, and the CLI's rows.
 */
import YAML from 'yaml';
import { decisionRows } from '../../src/cli/decisions';
import { pipeline } from '../../src/kinds/builder';
import { validatePipeline } from '../../src/kinds/pipeline';
import { isOverdue, matchesFilter, type PendingDecision } from '../../src/model/decisions';
import type { PipelineSpec } from '../../src/model/pipeline';
import { parseFilter } from '../../src/ui/filter';
import { decisionRow } from '../../src/ui/pages/inbox';
import { TEST_IDS } from '../../src/ui/test-ids';
import { breach, dueAt, type DeadlineFields } from '../../src/workflow-kit/deadline';

const known = { stages: ['scripted', 'human'], gates: ['scripted'] };
const specOf = (yaml: string): PipelineSpec => {
  const result = validatePipeline(YAML.parse(yaml), known);
  if (!result.ok) throw new Error(result.problems.join('\n'));
  return result.spec;
};

describe('review_sla in a spec', () => {
  it("takes a stage's own deadline, else the pipeline's; on_breach defaults to notify", () => {
    const spec = specOf(`
name: deadlines
review_sla: 4h
on_breach: { escalate_to: leads }
stages:
  - { name: a, run: scripted }
  - { name: b, run: scripted, review_sla: 30m }
  - { name: c, run: scripted, review_sla: 1d, on_breach: notify }
`);
    expect(spec.stages.map((s) => s.reviewSla)).toEqual([
      { afterMs: 4 * 3_600_000, escalateTo: 'leads' },
      { afterMs: 30 * 60_000, escalateTo: 'leads' },
      { afterMs: 86_400_000 },
    ]);
    const none = specOf('name: plain\nstages: [{ name: a, run: scripted }]');
    expect(none.stages[0]).not.toHaveProperty('reviewSla');
  });

  it('the builder writes the same as YAML', () => {
    const built = pipeline('deadlines').stage('a', 'scripted').reviewSla('a', '2h', { escalateTo: 'leads' }).build();
    expect(built.stages[0]!.reviewSla).toEqual({ afterMs: 7_200_000, escalateTo: 'leads' });
    const notify = pipeline('deadlines').stage('a', 'scripted').reviewSla('a', '15m').build();
    expect(notify.stages[0]!.reviewSla).toEqual({ afterMs: 900_000 });
  });

  it('lists every problem: an on_breach without a deadline, a bad one, a bad duration', () => {
    const result = validatePipeline(
      YAML.parse(`
name: broken
on_breach: notify
stages:
  - { name: a, run: scripted, on_breach: { escalate_to: leads } }
  - { name: b, run: scripted, review_sla: soon }
  - { name: c, run: scripted, review_sla: 1h, on_breach: page }
  - { name: d, run: scripted, review_sla: 1h, on_breach: { escalate_to: "" } }
`),
      known,
    );
    expect(result.ok).toBe(false);
    const problems = (result as { problems: string[] }).problems;
    expect(problems).toEqual(
      expect.arrayContaining([
        'on_breach: needs a review_sla beside it: the deadline it acts on',
        'stages[0] (a).on_breach: needs a review_sla on the stage or the pipeline: the deadline it acts on',
        'stages[1] (b).review_sla: "soon" is not a duration (use e.g. 500ms, 30s, 5m, 2h, 1d or 1m30s)',
        expect.stringMatching(/^stages\[2\] \(c\)\.on_breach: /) as string,
        expect.stringMatching(/^stages\[3\] \(d\)\.on_breach\.escalate_to: must name a reviewer group$/) as string,
      ]),
    );
  });
});

describe('a breach', () => {
  const at = '2026-12-07T10:00:00.000Z';

  it('is due review_sla after the request', () => {
    expect(dueAt('2026-12-07T08:00:00.000Z', { afterMs: 7_200_000 })).toBe(at);
  });

  it('with escalate_to hands the decision over, keeping the group it came from', () => {
    const waiting: DeadlineFields = { reviewers: 'legal' };
    expect(breach(waiting, { afterMs: 60_000, escalateTo: 'leads' }, "draft's review", at)).toBe(
      "draft's review is overdue: no decision within 1m; handed to leads",
    );
    expect(waiting).toEqual({ reviewers: 'leads', escalated: { to: 'leads', from: 'legal', at } });
  });

  it('with notify, or to the group it is already for, only says so', () => {
    const notify: DeadlineFields = { reviewers: 'legal' };
    expect(breach(notify, { afterMs: 3_600_000 }, "draft's review", at)).toBe(
      "draft's review is overdue: no decision within 1h",
    );
    expect(notify).toEqual({ reviewers: 'legal' });
    const same: DeadlineFields = { reviewers: 'leads' };
    breach(same, { afterMs: 1_000, escalateTo: 'leads' }, 'x', at);
    expect(same).toEqual({ reviewers: 'leads' });
    const none: DeadlineFields = {};
    breach(none, { afterMs: 1_000, escalateTo: 'leads' }, 'x', at);
    expect(none).toEqual({ reviewers: 'leads', escalated: { to: 'leads', at } });
  });
});

describe('overdue in listings', () => {
  const now = Date.parse('2026-12-07T12:00:00.000Z');
  const decision = (extra: Partial<PendingDecision>): PendingDecision => ({
    key: 'k',
    kind: 'review',
    workflowId: 'item-1',
    itemId: 'item-1',
    pipeline: 'p',
    stage: 'draft',
    reason: 'always',
    message: 'review requested',
    requestedAt: '2026-12-07T11:00:00.000Z',
    answers: ['approve'],
    ...extra,
  });
  const late = decision({
    dueAt: '2026-12-07T11:30:00.000Z',
    reviewers: 'leads',
    escalated: { to: 'leads', from: 'legal', at: '2026-12-07T11:30:00.000Z' },
  });
  const early = decision({ dueAt: '2026-12-07T13:00:00.000Z' });
  const undated = decision({});

  it('a decision is overdue from its dueAt on; one without a deadline never is', () => {
    expect([late, early, undated].map((d) => isOverdue(d, now))).toEqual([true, false, false]);
    expect(isOverdue(early, Date.parse(early.dueAt!))).toBe(true);
  });

  it('the overdue filter keeps only those past their deadline; the inbox reads it from age=overdue', () => {
    const filter = parseFilter({ age: 'overdue' });
    expect(filter).toEqual({ overdue: true });
    expect([late, early, undated].filter((d) => matchesFilter(d, filter, now))).toEqual([late]);
    expect(() => parseFilter({ age: 'late' })).toThrow('or overdue');
  });

  it('treadle decisions marks the overdue ones and says who took an escalated one over', () => {
    expect(decisionRows([late, early], now)).toEqual([
      ['review', 'item-1', 'draft', 'always', '1h overdue', 'review requested (overdue: handed to leads)'],
      ['review', 'item-1', 'draft', 'always', '1h', 'review requested'],
    ]);
  });

  it("the inbox's row marks an overdue decision and where an escalated one came from", () => {
    const row = decisionRow(late, now).value;
    expect(row).toContain('data-overdue');
    expect(row).toContain(`data-testid="${TEST_IDS.overdueBadge}"`);
    expect(row).toMatch(/leads\s*<div class="sub">handed over from legal<\/div>/);
    const inTime = decisionRow(early, now).value;
    expect(inTime).not.toContain('data-overdue');
    expect(inTime).not.toContain(TEST_IDS.overdueBadge);
  });
});
