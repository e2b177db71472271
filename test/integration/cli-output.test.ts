/**
 * The `treadle` command's output as a person reads it (built output, as users run it): a reader that stops
 * reading ends the command quietly; an unknown id in `audit` is one readable line; long failure texts in
 * status tables are cut to the width, one line per row, and `--json` keeps them whole.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { startHarness, type Harness } from '../support/harness';
import { runTreadle } from '../support/cli';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});

/** A stage whose gate rejects its one attempt with a reason of `length` characters: the item fails. */
async function failedWithLongReason(length: number): Promise<{ id: string; reason: string }> {
  const id = h.id('long-reason');
  const reason = `the reason starts here ${'and goes on '.repeat(length)}`.slice(0, length);
  const spec = { name: 'long-reasons', stages: [{ name: 'draft', run: 'scripted', gate: 'scripted' }] };
  await h.client.start(spec, { script: { draft: [{ verdict: 'rejected', summary: reason }] } }, { id });
  expect((await h.client.result(id)).status).toBe('failed');
  return { id, reason };
}

it('status piped into a reader that stops reading (| head) exits quietly, with no EPIPE stack trace', async () => {
  const { id } = await failedWithLongReason(100);
  const bin = path.join(__dirname, '..', '..', 'bin', 'treadle.js');
  // `true` exits at once, so every write of treadle's goes to a closed pipe; pipefail gives treadle's exit code.
  const server = { TEMPORAL_ADDRESS: h.address, TREADLE_TASK_QUEUE: h.taskQueue, TREADLE_BLOB_DIR: h.blobs.dir };
  const env = { ...process.env, ...server };
  const command = `set -o pipefail; "${process.execPath}" "${bin}" status "${id}" | true`;
  const run = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile('bash', ['-c', command], { env }, (error, _stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stderr });
    });
  });
  expect(run).toEqual({ code: 0, stderr: '' });
}, 60_000);

it('audit of an id no run has says so in one line, as status does', async () => {
  const audit = await runTreadle(h, ['audit', 'nosuch-item']);
  const stderr = 'treadle: unknown work item "nosuch-item" in namespace default\n';
  expect(audit).toEqual({ code: 1, stdout: '', stderr });
  expect((await runTreadle(h, ['status', 'nosuch-item'])).stderr).toBe(audit.stderr);
}, 30_000);

it('status cuts an 800-character failure to the width, one line per row; --json keeps it whole', async () => {
  const { id, reason } = await failedWithLongReason(800);
  for (const columns of ['100', '200']) {
    const status = await runTreadle(h, ['status', id], { COLUMNS: columns });
    expect(status.code).toBe(0);
    const lines = status.stdout.trimEnd().split('\n');
    expect(lines.every((l) => l.length <= Number(columns))).toBe(true);
    const row = lines.find((l) => l.startsWith('draft '));
    expect(row).toMatch(/^draft +failed +1\/1 +rejected: the reason starts here and goes on .*…/);
    expect(status.stdout).toContain(`(long texts are cut to fit; treadle status ${id} --json has them whole)`);
  }
  type Attempts = { stages: { draft: { attempts: { verdict: { feedback: { summary: string } } }[] } } };
  const json = JSON.parse((await runTreadle(h, ['status', id, '--json'])).stdout) as Attempts;
  expect(json.stages.draft.attempts[0]!.verdict.feedback.summary).toBe(reason);
}, 60_000);
