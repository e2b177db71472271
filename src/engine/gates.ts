/**
 * Gate composition (seed 000 defers it; Treadle ships it): `all` / `any` of several gates, their verdicts
 * combined and their feedback merged, as a pure function.
 */
import type { QualityFeedback, QualityVerdict } from '../model/shapes';

/** A leaf verdict with the gate that gave it, for merged feedback. */
export interface NamedVerdict {
  gate: string;
  verdict: QualityVerdict;
}

/**
 * `all`: rejected when any gate rejects (every rejection's feedback merged), else uncertain when any is
 * unsure, else accepted. `any`: accepted when any gate accepts, else uncertain when any is unsure, else
 * rejected with every gate's feedback merged.
 */
export function combineVerdicts(mode: 'all' | 'any', verdicts: NamedVerdict[]): QualityVerdict {
  const rejected = verdicts.filter(
    (v): v is NamedVerdict & { verdict: { kind: 'rejected' } } => v.verdict.kind === 'rejected',
  );
  const uncertain = verdicts.filter(
    (v): v is NamedVerdict & { verdict: { kind: 'uncertain' } } => v.verdict.kind === 'uncertain',
  );
  const accepted = verdicts.some((v) => v.verdict.kind === 'accepted');
  const unsure = (): QualityVerdict => ({
    kind: 'uncertain',
    reason: uncertain.map((v) => `${v.gate}: ${v.verdict.reason}`).join('; '),
  });
  if (mode === 'all') {
    if (rejected.length > 0) return { kind: 'rejected', feedback: mergeFeedback(rejected) };
    return uncertain.length > 0 ? unsure() : { kind: 'accepted' };
  }
  if (accepted) return { kind: 'accepted' };
  if (uncertain.length > 0) return unsure();
  return { kind: 'rejected', feedback: mergeFeedback(rejected) };
}

function mergeFeedback(
  rejected: { gate: string; verdict: { kind: 'rejected'; feedback: QualityFeedback } }[],
): QualityFeedback {
  if (rejected.length === 1) return rejected[0]!.verdict.feedback;
  const guidance = Object.fromEntries(
    rejected
      .filter((r) => r.verdict.feedback.guidance !== undefined)
      .map((r) => [r.gate, r.verdict.feedback.guidance!]),
  );
  return {
    summary: rejected.map((r) => `${r.gate}: ${r.verdict.feedback.summary}`).join('; '),
    failedCriteria: rejected.flatMap((r) => r.verdict.feedback.failedCriteria),
    ...(Object.keys(guidance).length > 0 ? { guidance } : {}),
  };
}
