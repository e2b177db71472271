/**
 * Replays recorded histories (test/replay/histories/*.json) through the current workflow code; any
 * nondeterministic change fails here before it can break running work items.
 */
import { Worker } from '@temporalio/worker';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const dir = path.join(__dirname, 'histories');
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

it('has recorded histories to replay', () => {
  expect(files.length).toBeGreaterThanOrEqual(2);
});

it.each(files)('replays %s deterministically', async (file) => {
  const history = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  // The file's name is the workflow id it ran under: a TDD node derives its children's ids from it.
  await Worker.runReplayHistory({ workflowBundle: { codePath: process.env.TREADLE_TEST_BUNDLE! } }, history, file.replace(/\.json$/, ''));
});
