/**
 * The attacker's view, on the real Temporal server: someone who may start work items starts one straight
 * through the Temporal client (no Treadle client, so no client-side validation), with a spec whose template
 * tries to run code, one whose template tries to read a file, and one whose `replies_file` points outside
 * the replies folder. Each item fails with a clear message naming the stage; no code ran (no marker file, no
 * global) and nothing was read (the file's contents appear nowhere in the item's state or history).
 * (It runs a worker against the run's dev server, like test/integration; it sits here with the other
 * security tests.)
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { WorkItemInput, WorkItemResult } from '../../src/model/state';
import { startHarness, type Harness } from '../support/harness';

let h: Harness;
let dir: string;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
});
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-security-item-'));
  delete (globalThis as Record<string, unknown>).__treadlePwned;
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const spec = (withConfig: Record<string, unknown>) => ({
  name: 'attack',
  stages: [{ name: 'draft', run: 'llm', agent: 'scripted', with: withConfig, retry_budget: { max_attempts: 2 } }],
});

/** Starts an item as an attacker would and returns its result and everything the item recorded, as text. */
async function attack(
  pipeline: unknown,
  input: unknown = { text: 'hello' },
): Promise<{ result: WorkItemResult; failure: string; recorded: string }> {
  const id = h.id('attack');
  const args: WorkItemInput = { pipeline, input: input as WorkItemInput['input'], itemId: id };
  const handle = await h.temporal.workflow.start('workItem', { taskQueue: h.taskQueue, workflowId: id, args: [args] });
  // Engine 6 fails the workflow of a failed item; the client reads its result from the failure either way.
  const result = await h.client.result(id);
  const state = await h.client.getState(id);
  const failure = [
    result.error,
    state.error,
    ...(state.problems ?? []),
    ...Object.values(state.stages).map((s) => s.error),
  ]
    .filter(Boolean)
    .join('\n');
  const history = await handle.fetchHistory();
  return { result, failure, recorded: JSON.stringify(state) + JSON.stringify(history) };
}

it('a template that tries to run code fails the item and runs nothing', async () => {
  const marker = path.join(dir, 'pwned');
  const payload = `global.__treadlePwned = 1; process.mainModule.require('fs').writeFileSync('${marker}', 'x')`;
  const { result, failure } = await attack(spec({ prompt: `Hi {{ range.constructor("${payload}")() }}` }));
  expect(result.status).toBe('failed');
  expect(failure).toMatch(/draft.*prompt: the prompt template does not parse: .+, line:1, col:\d+/);
  expect(existsSync(marker)).toBe(false);
  expect((globalThis as Record<string, unknown>).__treadlePwned).toBeUndefined();
});

it('a template that tries to read a file fails the item and reads nothing', async () => {
  const { result, failure, recorded } = await attack(spec({ prompt: "{% include '/etc/passwd' %}" }));
  expect(result.status).toBe('failed');
  expect(failure).toContain('the include tag is not available: prompt templates cannot read files');
  expect(recorded).not.toContain('root:x:0:0');
});

it('a replies_file outside the replies folder fails the item and reads nothing', async () => {
  const { result, failure, recorded } = await attack(spec({ prompt: 'Write.', replies_file: '/etc/passwd' }));
  expect(result.status).toBe('failed');
  expect(failure).toContain('replies_file "/etc/passwd" is outside the folders replies may be read from');
  expect(recorded).not.toContain('root:x:0:0');
});

it('a template that would hang the worker fails the item within seconds, and the worker serves the next item', async () => {
  const started = Date.now();
  const { result, failure } = await attack(
    spec({ prompt: '{% for i in (1..5000) %}{% for j in (1..5000) %}x{% endfor %}{% endfor %}' }),
  );
  expect(result.status).toBe('failed');
  expect(failure).toContain('draft: the prompt template is invalid: template render limit exceeded');
  expect(Date.now() - started).toBeLessThan(20_000);
  const next = await attack(spec({ prompt: 'Say {{ input.text }}' }));
  expect(next.result.status).toBe('completed');
});
