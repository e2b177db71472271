/**
 * A work item's priority and fairness (src/model/priority.ts): the checks the spec, the client and the CLI share,
 * the spec's pipeline-level `priority:`/`fairness_key:`/`fairness_weight:` (every problem listed), the caller's
 * values over the spec's, and Temporal's `Priority` they become.
 */
import YAML from 'yaml';
import { pipeline } from '../../src/kinds/builder';
import { validatePipeline } from '../../src/kinds/pipeline';
import {
  describePriority,
  itemPriorityOf,
  itemPriorityProblems,
  mergePriority,
  temporalPriority,
} from '../../src/model/priority';

const known = { stages: ['scripted'], gates: [] };
const spec = (head: string) => YAML.parse(`name: prio\n${head}\nstages:\n  - name: a\n    run: scripted\n`) as unknown;

describe('the spec', () => {
  it('takes a priority and a fairness key with its weight, into the canonical spec', () => {
    const result = validatePipeline(spec('priority: 1\nfairness_key: acme\nfairness_weight: 2.5'), known);
    expect(result.ok && result.spec).toMatchObject({ priority: 1, fairnessKey: 'acme', fairnessWeight: 2.5 });
  });

  it('leaves a spec without them as it was (no fields in the canonical spec)', () => {
    const result = validatePipeline(spec(''), known);
    expect(result.ok).toBe(true);
    const canonical = (result as { spec: object }).spec;
    for (const field of ['priority', 'fairnessKey', 'fairnessWeight']) expect(canonical).not.toHaveProperty(field);
  });

  it('lists every problem: a priority out of range, a key too long, a weight out of range', () => {
    const result = validatePipeline(spec(`priority: 7\nfairness_key: ${'k'.repeat(65)}\nfairness_weight: 0`), known);
    expect(result.ok).toBe(false);
    expect((result as { problems: string[] }).problems).toEqual([
      'priority: must be a whole number from 1 (highest) to 5 (lowest); 3 is the default, got 7',
      "fairness_key: must be at most 64 bytes (Temporal's limit), got 65 bytes",
      "fairness_weight: must be a number from 0.001 to 1000 (Temporal's range; 1 is the default), got 0",
    ]);
  });

  it.each([
    ['priority: 2.5', 'priority: must be a whole number from 1 (highest) to 5 (lowest); 3 is the default, got 2.5'],
    ['priority: high', 'priority: must be a whole number from 1 (highest) to 5 (lowest); 3 is the default, got "high"'],
    ['priority: 0', 'priority: must be a whole number from 1 (highest) to 5 (lowest); 3 is the default, got 0'],
    ['fairness_key: ""', 'fairness_key: must not be empty (leave it out for no fairness key)'],
    [
      'fairness_weight: 2',
      "fairness_weight: needs a fairness_key beside it: the weight is that key's share of the queue",
    ],
  ])('refuses %s', (head, problem) => {
    const result = validatePipeline(spec(head), known);
    expect(result.ok).toBe(false);
    expect((result as { problems: string[] }).problems).toEqual([problem]);
  });

  it('counts a fairness key in bytes, as Temporal does', () => {
    // 22 three-byte characters: 22 characters, 66 bytes.
    const result = validatePipeline(spec(`fairness_key: ${'€'.repeat(22)}`), known);
    expect((result as { problems?: string[] }).problems).toEqual([
      "fairness_key: must be at most 64 bytes (Temporal's limit), got 66 bytes",
    ]);
  });
});

describe("the caller's values and the spec's", () => {
  it("take the caller's value field by field", () => {
    expect(mergePriority({ priority: 1 }, { priority: 4, fairnessKey: 'acme', fairnessWeight: 2 })).toEqual({
      priority: 1,
      fairnessKey: 'acme',
      fairnessWeight: 2,
    });
    expect(mergePriority({}, {})).toEqual({});
  });

  it("do not give the spec's weight to another key the caller chose", () => {
    expect(mergePriority({ fairnessKey: 'beta' }, { fairnessKey: 'acme', fairnessWeight: 2 })).toEqual({
      fairnessKey: 'beta',
    });
    expect(mergePriority({ fairnessKey: 'acme' }, { fairnessKey: 'acme', fairnessWeight: 2 })).toEqual({
      fairnessKey: 'acme',
      fairnessWeight: 2,
    });
  });

  it('are checked with the names the caller uses, and a weight needs a key', () => {
    expect(itemPriorityProblems({ priority: 9, fairnessWeight: 2 })).toEqual([
      'priority must be a whole number from 1 (highest) to 5 (lowest); 3 is the default, got 9',
      "fairnessWeight needs a fairnessKey: the weight is that key's share of the queue",
    ]);
    expect(
      itemPriorityProblems(
        { fairnessKey: ' ' },
        { priority: '--priority', fairnessKey: '--fairness-key', fairnessWeight: '--fairness-weight' },
      ),
    ).toEqual(['--fairness-key must not be empty (leave it out for no fairness key)']);
    expect(itemPriorityProblems({ priority: 5, fairnessKey: 'acme', fairnessWeight: 1000 })).toEqual([]);
  });
});

describe("Temporal's Priority", () => {
  it('is absent for an item with none, and carries what is given', () => {
    expect(temporalPriority({})).toBeUndefined();
    expect(temporalPriority({ priority: 1, fairnessKey: 'acme', fairnessWeight: 2 })).toEqual({
      priorityKey: 1,
      fairnessKey: 'acme',
      fairnessWeight: 2,
    });
    expect(temporalPriority({ fairnessKey: 'acme' })).toEqual({ fairnessKey: 'acme' });
  });

  it("reads back from Temporal's (zero and empty are unset there) and describes itself", () => {
    expect(itemPriorityOf({ priorityKey: 0, fairnessKey: '', fairnessWeight: 0 })).toEqual({});
    expect(itemPriorityOf(undefined)).toEqual({});
    expect(describePriority({})).toBe('priority 3 (default)');
    expect(describePriority({ priority: 1, fairnessKey: 'acme', fairnessWeight: 2 })).toBe(
      'priority 1 · fairness key acme (weight 2)',
    );
  });
});

describe('the builder', () => {
  it('writes priority, fairness_key and fairness_weight as the spec takes them', () => {
    const built = pipeline('prio').stage('a', 'scripted').priority(2).fairness('acme', 3).build(known);
    expect(built).toMatchObject({ priority: 2, fairnessKey: 'acme', fairnessWeight: 3 });
    expect(() => pipeline('prio').stage('a', 'scripted').priority(0).build(known)).toThrow(
      'priority: must be a whole number from 1 (highest) to 5 (lowest)',
    );
  });
});
