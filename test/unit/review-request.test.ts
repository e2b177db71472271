/** The workflow's zod-free review parser agrees with the zod schema that documents the payload. */
import { parseReviewRequest } from '../../src/model/review-request';
import { ReviewRequestSchema } from '../../src/model/shapes';

const payloads: unknown[] = [
  { stage: 's', outcome: { kind: 'approve' } },
  { stage: 's', outcome: { kind: 'approve', attempt: 2, note: 'the second is better' }, reviewer: 'ann' },
  { stage: 's', outcome: { kind: 'reject', reason: 'no' } },
  { stage: 's', outcome: { kind: 'approve_with_edits', artefact: { text: 'edited' }, note: 'n' } },
  { stage: 's', outcome: { kind: 'approve_with_edits', artefact: null } },
  { stage: 's', outcome: { kind: 'approve', attempt: 0 } },
  { stage: 's', outcome: { kind: 'approve', attempt: 1.5 } },
  { stage: 's', outcome: { kind: 'reject', reason: '' } },
  { stage: 's', outcome: { kind: 'reject' } },
  { stage: 's', outcome: { kind: 'approve_with_edits' } },
  { stage: 's', outcome: { kind: 'approve', extra: 1 } },
  { stage: 's', outcome: { kind: 'approve', note: 5 } },
  { stage: 's', outcome: { kind: 'request_changes', note: 'cite the source' }, reviewer: 'ann' },
  { stage: 's', outcome: { kind: 'request_changes', note: 'x'.repeat(4096) } },
  { stage: 's', outcome: { kind: 'request_changes', note: 'x'.repeat(4097) } },
  { stage: 's', outcome: { kind: 'request_changes', note: '  ' } },
  { stage: 's', outcome: { kind: 'request_changes' } },
  { stage: 's', outcome: { kind: 'request_changes', note: 'n', reason: 'r' } },
  { stage: 's', outcome: { kind: 'maybe' } },
  { stage: 's', outcome: 'approve' },
  { stage: '', outcome: { kind: 'approve' } },
  { stage: 's', outcome: { kind: 'approve' }, reviewer: '' },
  { outcome: { kind: 'approve' } },
  'approve',
  null,
  [],
];

it.each(payloads.map((p) => [JSON.stringify(p), p]))('%s: same verdict as the zod schema', (_label, payload) => {
  const parsed = parseReviewRequest(payload);
  const zod = ReviewRequestSchema.safeParse(payload);
  expect(parsed.ok).toBe(zod.success);
  if (parsed.ok && zod.success) expect(parsed.review).toEqual(zod.data);
  if (!parsed.ok) expect(parsed.issues.length).toBeGreaterThan(0);
});

it('a request for changes without a note, or with one over 4 KiB, is refused with what to do', () => {
  const issues = (payload: unknown) => {
    const parsed = parseReviewRequest(payload);
    return parsed.ok ? [] : parsed.issues;
  };
  expect(issues({ stage: 's', outcome: { kind: 'request_changes' } })).toEqual([
    'outcome.note: request_changes needs a note saying what to change',
  ]);
  expect(issues({ stage: 's', outcome: { kind: 'request_changes', note: 'x'.repeat(5000) } })).toEqual([
    'outcome.note: 5000 characters is over the 4096 a note may have; shorten it',
  ]);
});
