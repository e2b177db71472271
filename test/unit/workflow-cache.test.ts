/**
 * `TREADLE_WORKFLOW_CACHE`: the bound on a worker's workflow cache (items waiting for people stay cached
 * until evicted, 252 KiB each), 1,000 by default; anything but a whole number of 0 or more is a config error.
 */
import { DEFAULT_WORKFLOW_CACHE, loadConfig } from '../../src/config';

test('the workflow cache holds 1,000 workflows unless told otherwise, 0 included', () => {
  expect(DEFAULT_WORKFLOW_CACHE).toBe(1_000);
  expect(loadConfig({}).workflowCache).toBe(1_000);
  expect(loadConfig({ TREADLE_WORKFLOW_CACHE: '' }).workflowCache).toBe(1_000);
  expect(loadConfig({ TREADLE_WORKFLOW_CACHE: ' 250 ' }).workflowCache).toBe(250);
  expect(loadConfig({ TREADLE_WORKFLOW_CACHE: '0' }).workflowCache).toBe(0);
});

test('anything else is a config error naming the variable (treadle worker exits 2)', () => {
  for (const bad of ['-1', '1.5', 'lots', '1e9x']) {
    let error: unknown;
    try {
      loadConfig({ TREADLE_WORKFLOW_CACHE: bad });
    } catch (caught) {
      error = caught;
    }
    expect(error).toMatchObject({
      message: `TREADLE_WORKFLOW_CACHE must be a whole number of workflows (0 or more), got "${bad}"`,
      code: 'config',
    });
  }
});
