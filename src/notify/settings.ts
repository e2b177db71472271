/**
 * The notifications file (docs/notifications.md), named by `TREADLE_NOTIFY`: the webhooks told when a person owes
 * a decision, a decision is overdue or decided, or an item fails.
 *
 * ```yaml
 * webhooks:
 *   - name: leads
 *     url: https://hooks.example.com/treadle
 *     secret_env: TREADLE_WEBHOOK_SECRET   # the variable holding the HMAC key; never the key itself
 *     events: [decision_owed, overdue]     # default: every event
 *     pipelines: [documents]               # default: every pipeline
 *     reviewers: [legal]                   # default: every decision, addressed to a group or not
 *     format: json                         # or slack
 * ```
 *
 * {@link parseNotifySettings} takes the file as parsed (YAML or JSON) and lists every problem with its path at once.
 * Pure: the worker side (worker/settings-file.ts) reads the file and checks the secrets are set.
 */
import { requiredGroups } from '../model/decisions';
import { z } from 'zod';
import { describeIssue } from '../model/spec-problems';
import { NOTIFY_EVENTS, type NotifyEvent } from './shapes';

/** A webhook's body: Treadle's JSON, or a Slack-compatible `{ text, blocks }` message. */
export const NOTIFY_FORMATS = ['json', 'slack'] as const;
export type NotifyFormat = (typeof NOTIFY_FORMATS)[number];

/** One webhook, as the worker uses it. */
export interface Webhook {
  name: string;
  url: string;
  /** The environment variable holding the HMAC key. */
  secretEnv: string;
  events: NotifyEvent[];
  /** Only these pipelines' events; undefined for every pipeline. */
  pipelines?: string[];
  /** Only decisions addressed to these reviewer groups; undefined for every decision. */
  reviewers?: string[];
  format: NotifyFormat;
}

/** The notifications file, checked. */
export interface NotifySettings {
  webhooks: Webhook[];
}

const WEBHOOK_FIELDS = ['name', 'url', 'secret_env', 'events', 'pipelines', 'reviewers', 'format'] as const;
const FILE_FIELDS = ['webhooks'] as const;

const names = (what: string) =>
  z
    .array(z.string().min(1, `must not be empty (a ${what} name)`))
    .min(1, `must list at least one ${what}; leave the field out for every ${what}`);

const WebhookInput = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be 1 to 64 letters, digits, dots, dashes or underscores'),
    url: z.string().regex(/^https?:\/\/[^\s]+$/i, 'must be an http(s) address, e.g. https://hooks.example.com/treadle'),
    secret_env: z
      .string()
      .regex(
        /^[A-Za-z_][A-Za-z0-9_]*$/,
        'must name an environment variable holding the key (e.g. TREADLE_WEBHOOK_SECRET), not hold a key',
      ),
    events: z.array(z.enum(NOTIFY_EVENTS)).min(1, 'must list at least one event').optional(),
    pipelines: names('pipeline').optional(),
    reviewers: names('reviewer group').optional(),
    format: z.enum(NOTIFY_FORMATS).default('json'),
  })
  .strict();

const NotifyFileInput = z.object({ webhooks: z.array(WebhookInput).default([]) }).strict();

/** What a required field is for, said when it is missing. */
const FIELD_HINTS = {
  name: 'a name for the webhook (`treadle notify test --webhook <name>` uses it), e.g. leads',
  url: 'where the POST goes, e.g. https://hooks.example.com/treadle',
  secret_env: 'the environment variable holding the HMAC key that signs the body, e.g. TREADLE_WEBHOOK_SECRET',
};

/** The fields the object at `path` takes (for unknown fields and their did-you-mean). */
function fieldsAt(path: readonly PropertyKey[]): readonly string[] | undefined {
  if (path.length === 0) return FILE_FIELDS;
  if (path[0] === 'webhooks' && path.length === 2) return WEBHOOK_FIELDS;
  return undefined;
}

/** The parsed file, or every problem as `path: what is wrong; fix` (`(the file)` for the whole file). */
export type NotifyParse = { ok: true; settings: NotifySettings } | { ok: false; problems: string[] };

/** Checks the notifications file as parsed from YAML or JSON; returns the webhooks or every problem found. */
export function parseNotifySettings(raw: unknown): NotifyParse {
  const input = raw ?? {};
  const parsed = NotifyFileInput.safeParse(input);
  if (!parsed.success) {
    const field = (path: PropertyKey[]) => path.map(String).join('.') || '(the file)';
    const lines = parsed.error.issues.flatMap((issue) =>
      describeIssue(issue, input, { fieldsAt, required: FIELD_HINTS }).map((d) => `${field(d.path)}: ${d.message}`),
    );
    return { ok: false, problems: [...new Set(lines)] };
  }
  const webhooks: Webhook[] = parsed.data.webhooks.map((w) => ({
    name: w.name,
    url: w.url,
    secretEnv: w.secret_env,
    events: w.events ? [...new Set(w.events)] : [...NOTIFY_EVENTS],
    ...(w.pipelines && { pipelines: w.pipelines }),
    ...(w.reviewers && { reviewers: w.reviewers }),
    format: w.format,
  }));
  const seen = new Map<string, number>();
  const problems: string[] = [];
  webhooks.forEach((w, i) => {
    const first = seen.get(w.name);
    if (first === undefined) seen.set(w.name, i);
    else problems.push(`webhooks.${i}.name: repeats webhooks.${first}'s name "${w.name}"; give each webhook its own`);
  });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, settings: { webhooks } };
}

/** What a webhook filters on: the event, the item's pipeline, the reviewer group the decision is addressed to. */
export interface NotifySubject {
  event: NotifyEvent;
  pipeline: string;
  reviewers?: string;
}

/** The webhooks told about `subject`: those taking its event whose pipeline and reviewer filters it passes. */
export function webhooksFor(settings: NotifySettings, subject: NotifySubject): Webhook[] {
  return settings.webhooks.filter(
    (w) =>
      w.events.includes(subject.event) &&
      (!w.pipelines || w.pipelines.includes(subject.pipeline)) &&
      // A decision for `legal,leads` is for each of them (as the inbox reads it).
      (!w.reviewers || requiredGroups(subject.reviewers).some((group) => w.reviewers!.includes(group))),
  );
}
