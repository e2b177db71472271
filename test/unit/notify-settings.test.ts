/**
 * src/notify: the notifications file, signatures and bodies. Cases:
 * - a YAML file with every field parses (events default to all four, format to json; filters kept);
 * - every problem of a bad file is listed at once, each with the file, its line and the field, and a fix;
 * - a secret_env that is not set, and a repeated name, are problems; TREADLE_NOTIFY unset means none, a bad file
 *   or TREADLE_UI_URL is a configuration error (exit 2);
 * - webhooksFor filters by event, pipeline and reviewer group;
 * - verifySignature accepts what the delivery signs and refuses another body, secret, header or an old timestamp;
 * - delivery ids are stable per (key, event, webhook); the Slack body has text and blocks and the inbox link.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { webhookBody, type WebhookPayload } from '../../src/notify/payload';
import { parseNotifySettings, webhooksFor } from '../../src/notify/settings';
import { dedupKeyOf, decisionLink, announcementProblem, type Announcement } from '../../src/notify/shapes';
import { deliveryIdOf } from '../../src/notify/worker/delivery';
import { notificationsFromEnv, readNotifyFile } from '../../src/notify/worker/settings-file';
import { signatureOf, verifySignature } from '../../src/notify/worker/signing';

const FILE = `webhooks:
  - name: leads
    url: https://hooks.example.com/treadle
    secret_env: LEADS_SECRET
    events: [decision_owed, overdue]
    pipelines: [documents]
    reviewers: [legal]
  - name: chat
    url: http://127.0.0.1:9/slack
    secret_env: CHAT_SECRET
    format: slack
`;

const dir = mkdtempSync(path.join(os.tmpdir(), 'notify-settings-'));
const write = (name: string, text: string): string => {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
};
const env = { LEADS_SECRET: 'k1', CHAT_SECRET: 'k2' };

describe('the notifications file', () => {
  it('parses with defaults filled in', () => {
    const parsed = readNotifyFile(write('good.yaml', FILE), env);
    expect(parsed).toEqual({
      ok: true,
      settings: {
        webhooks: [
          {
            name: 'leads',
            url: 'https://hooks.example.com/treadle',
            secretEnv: 'LEADS_SECRET',
            events: ['decision_owed', 'overdue'],
            pipelines: ['documents'],
            reviewers: ['legal'],
            format: 'json',
          },
          {
            name: 'chat',
            url: 'http://127.0.0.1:9/slack',
            secretEnv: 'CHAT_SECRET',
            events: ['decision_owed', 'overdue', 'decided', 'item_failed'],
            format: 'slack',
          },
        ],
      },
    });
  });

  it('lists every problem at once with the file, line and field', () => {
    const file = write(
      'bad.yaml',
      `webhooks:
  - name: leads
    url: ftp://nowhere
    secret_env: "sk-live-123"
    events: [decision_owed, overdew]
    format: teams
  - url: https://x.example.com
    secret_env: X
    pipeline: [documents]
`,
    );
    const parsed = readNotifyFile(file, env);
    expect(parsed.ok).toBe(false);
    const problems = parsed.ok ? [] : parsed.problems;
    expect(problems).toEqual(
      expect.arrayContaining([
        `${file} (line 3): webhooks.0.url: must be an http(s) address, e.g. https://hooks.example.com/treadle`,
        expect.stringMatching(/\(line 4\): webhooks\.0\.secret_env: must name an environment variable/),
        expect.stringMatching(/\(line 5\): webhooks\.0\.events\.1: must be one of .*did you mean "overdue"/),
        expect.stringMatching(/\(line 6\): webhooks\.0\.format: must be one of json, slack/),
        expect.stringMatching(/\(line 7\): webhooks\.1\.name: required: a name for the webhook/),
        expect.stringMatching(/\(line 9\): webhooks\.1\.pipeline: unknown field \(did you mean "pipelines"\?\)/),
      ]),
    );
    expect(problems).toHaveLength(6);
  });

  it('refuses a secret that is not set and a repeated name, with their lines', () => {
    const file = write(
      'dup.yaml',
      `${FILE}  - name: chat\n    url: https://b.example.com\n    secret_env: CHAT_SECRET\n`,
    );
    const parsed = readNotifyFile(write('unset.yaml', FILE), { CHAT_SECRET: 'k2' });
    expect(parsed.ok ? [] : parsed.problems).toEqual([
      expect.stringMatching(
        /\(line 4\): webhooks\.0\.secret_env: LEADS_SECRET is not set; export it \(the webhook's HMAC key\)/,
      ),
    ]);
    const again = readNotifyFile(file, env);
    expect(again.ok ? [] : again.problems).toEqual([
      `${file} (line 12): webhooks.2.name: repeats webhooks.1's name "chat"; give each webhook its own`,
    ]);
  });

  it('is optional; a bad file or inbox address is a configuration error naming each problem', () => {
    expect(notificationsFromEnv({})).toBeUndefined();
    const good = write('env.yaml', FILE);
    expect(notificationsFromEnv({ ...env, TREADLE_NOTIFY: good, TREADLE_UI_URL: 'https://inbox.example.com' })).toEqual(
      expect.objectContaining({ uiUrl: 'https://inbox.example.com' }),
    );
    const thrown = (() => {
      try {
        notificationsFromEnv({ ...env, TREADLE_NOTIFY: good, TREADLE_UI_URL: 'inbox' });
      } catch (error) {
        return error as { code: string; message: string };
      }
    })();
    expect(thrown?.code).toBe('config');
    expect(thrown?.message).toMatch(/TREADLE_UI_URL must be the inbox's http\(s\) address/);
    expect(() => notificationsFromEnv({ TREADLE_NOTIFY: path.join(dir, 'missing.yaml') })).toThrow(
      /TREADLE_NOTIFY names a notifications file that cannot be used:\n {2}.*missing\.yaml: cannot be read/,
    );
  });

  it('picks the webhooks by event, pipeline and reviewer group', () => {
    const parsed = parseNotifySettings({
      webhooks: [
        { name: 'a', url: 'https://a.example', secret_env: 'A', events: ['decided'], pipelines: ['docs'] },
        { name: 'b', url: 'https://b.example', secret_env: 'B', reviewers: ['legal'] },
        { name: 'c', url: 'https://c.example', secret_env: 'C' },
      ],
    });
    if (!parsed.ok) throw new Error(parsed.problems.join('\n'));
    const names = (event: Announcement['event'], pipeline: string, reviewers?: string) =>
      webhooksFor(parsed.settings, { event, pipeline, ...(reviewers ? { reviewers } : {}) }).map((w) => w.name);
    expect(names('decided', 'docs')).toEqual(['a', 'c']);
    expect(names('decided', 'other')).toEqual(['c']);
    expect(names('decision_owed', 'docs', 'legal')).toEqual(['b', 'c']);
    expect(names('decision_owed', 'docs', 'finance')).toEqual(['c']);
    // A decision for several groups is for each of them, as the inbox reads `reviewers`.
    expect(names('decision_owed', 'docs', 'finance, legal')).toEqual(['b', 'c']);
  });
});

describe('signatures, delivery ids and bodies', () => {
  const body = '{"event":"decision_owed"}';
  const now = 1_800_000_000_000;
  const ts = String(now / 1000);

  it('verifySignature accepts the signature and refuses anything else', () => {
    const header = signatureOf('s3cret', ts, body);
    expect(header).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(verifySignature('s3cret', ts, body, header, { nowMs: now })).toBe(true);
    expect(verifySignature('s3cret', ts, `${body} `, header, { nowMs: now })).toBe(false);
    expect(verifySignature('other', ts, body, header, { nowMs: now })).toBe(false);
    expect(verifySignature('s3cret', ts, body, header.slice(0, -1), { nowMs: now })).toBe(false);
    expect(verifySignature('s3cret', String(now / 1000 + 1), body, header, { nowMs: now })).toBe(false);
    // Replayed ten minutes later: refused by default, accepted without the check.
    expect(verifySignature('s3cret', ts, body, header, { nowMs: now + 600_000 })).toBe(false);
    expect(verifySignature('s3cret', ts, body, header, { nowMs: now + 600_000, toleranceSeconds: 0 })).toBe(true);
  });

  const announcement: Announcement = {
    event: 'decision_owed',
    key: 'doc-1~review~draft',
    occurredAt: '2026-12-06T21:00:00.000Z',
    itemId: 'doc-1',
    workflowId: 'doc-1',
    pipeline: 'documents',
    stage: 'draft',
    kind: 'review',
    reviewers: 'legal',
    message: 'escalated after 3 attempts: <tone> & length',
  };

  it('gives one delivery id per key, event and webhook, and one dedup key per key and event', () => {
    const id = deliveryIdOf(announcement, 'leads');
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(deliveryIdOf({ ...announcement, occurredAt: 'later' } as Announcement, 'leads')).toBe(id);
    expect(deliveryIdOf(announcement, 'chat')).not.toBe(id);
    expect(deliveryIdOf({ ...announcement, event: 'decided' }, 'leads')).not.toBe(id);
    expect(dedupKeyOf(announcement)).not.toBe(dedupKeyOf({ ...announcement, event: 'decided' }));
    expect(announcementProblem({ ...announcement, webhooks: ['leads'] })).toBeUndefined();
    expect(announcementProblem({ ...announcement, webhooks: ['leads'], event: 'nope' })).toMatch(/^event: /);
    expect(announcementProblem({ ...announcement, webhooks: ['leads'], message: 'x'.repeat(501) })).toMatch(
      /^message: /,
    );
  });

  it('links the inbox page and writes a Slack-compatible body', () => {
    const link = decisionLink('https://inbox.example.com/', announcement.key);
    expect(link).toBe('https://inbox.example.com/d/doc-1~review~draft');
    const payload: WebhookPayload = { ...announcement, delivery: 'abc', webhook: 'chat', link };
    expect(JSON.parse(webhookBody('json', payload))).toEqual(payload);
    const slack = JSON.parse(webhookBody('slack', payload)) as { text: string; blocks: { type: string }[] };
    expect(slack.text).toBe('Decision owed: doc-1 (documents · draft) — escalated after 3 attempts: <tone> & length');
    expect(slack.blocks.map((b) => b.type)).toEqual(['section', 'context']);
    expect(JSON.stringify(slack.blocks)).toContain(`<${link}|doc-1>`);
    expect(JSON.stringify(slack.blocks)).toContain('&lt;tone&gt; &amp; length');
  });
});
