/**
 * The `with:` of an approval stage, validated (every problem at once, `path: message`) and made canonical.
 * YAML form (snake_case, durations as text):
 *
 *   - name: approve_tasks
 *     type: approval            # or run: approval
 *     depends_on: [route]
 *     with:
 *       action: create_task     # optional: else each element names its own action_type
 *       from: route             # default: the only dependency
 *       items: drafts           # optional: a dotted path to a list, one request per element
 *       context: Tasks from the weekly meeting
 *       context_field: source   # optional: an element's field shown as its own context
 *       ttl: 24h
 *       on_reject: skip         # skip (default): the run goes on without the action; stop: the run fails
 *       escalation: { to: leads, ttl: 4h, default: reject }
 */
import { z } from 'zod';
import { parseDuration } from '../../model/duration';
import type { ApprovalStageConfig } from './shapes';
import { describeConfigIssues } from '../../model/spec-problems';

const duration = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const parsed = parseDuration(value);
  if ('error' in parsed) {
    ctx.addIssue({ code: 'custom', message: parsed.error });
    return z.NEVER;
  }
  if (parsed.ms <= 0) {
    ctx.addIssue({ code: 'custom', message: 'must be longer than 0' });
    return z.NEVER;
  }
  return parsed.ms;
});
const text = z.string().min(1, 'must not be empty');
const fieldPath = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$/, 'must be a dotted path such as drafts or result.tasks');

export const ApprovalStageConfigSchema = z
  .object({
    action: text.optional(),
    from: text.optional(),
    items: fieldPath.optional(),
    context: z.string().max(2_000, 'must be at most 2,000 characters (put long context in the items)').optional(),
    context_field: fieldPath.optional(),
    ttl: duration.optional(),
    on_reject: z.enum(['skip', 'stop']).default('skip'),
    escalation: z
      .object({ to: text, ttl: duration, default: z.enum(['approve', 'reject']) })
      .strict()
      .optional(),
    reviewers: text.optional(),
  })
  .strict()
  .superRefine((config, ctx) => {
    if (config.escalation && config.ttl === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['escalation'],
        message: 'needs a ttl: the request escalates when its ttl has passed',
      });
  });

const APPROVAL_FIELDS = Object.keys(ApprovalStageConfigSchema.shape);
const ESCALATION_FIELDS = ['to', 'ttl', 'default'];
/** What each required field of an escalation is for. */
const ESCALATION_HINTS = {
  to: 'who the request escalates to, e.g. leads',
  ttl: 'how long the escalated request waits before its default applies, e.g. 4h',
  default: 'what happens when the escalation expires too: approve or reject',
};

/** Problems with an approval stage's `with:`, each `path: message` with the fix; none when it is valid. */
export function checkApprovalStageConfig(config: unknown): string[] {
  const parsed = ApprovalStageConfigSchema.safeParse(config ?? {});
  if (parsed.success) return [];
  const fieldsAt = (path: readonly PropertyKey[]) =>
    path.length === 0 ? APPROVAL_FIELDS : path[0] === 'escalation' ? ESCALATION_FIELDS : undefined;
  return describeConfigIssues(parsed.error.issues, config ?? {}, { fieldsAt, required: ESCALATION_HINTS });
}

/** The canonical config; throws with every problem when it is invalid (validate first). */
export function parseApprovalStageConfig(config: unknown): ApprovalStageConfig {
  const parsed = ApprovalStageConfigSchema.safeParse(config ?? {});
  if (!parsed.success) throw new Error(`invalid approval stage config: ${checkApprovalStageConfig(config).join('; ')}`);
  const c = parsed.data;
  return {
    ...(c.action !== undefined ? { action: c.action } : {}),
    ...(c.from !== undefined ? { from: c.from } : {}),
    ...(c.items !== undefined ? { items: c.items } : {}),
    ...(c.context !== undefined ? { context: c.context } : {}),
    ...(c.context_field !== undefined ? { contextField: c.context_field } : {}),
    ttlMs: c.ttl ?? null,
    onReject: c.on_reject,
    ...(c.escalation
      ? { escalation: { to: c.escalation.to, ttlMs: c.escalation.ttl, default: c.escalation.default } }
      : {}),
    ...(c.reviewers !== undefined ? { reviewers: c.reviewers } : {}),
  };
}
