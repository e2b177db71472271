/**
 * Runs the shipped TDD example (examples/tdd) once and returns the histories worth replaying: the root node
 * and the child that rebased onto its sibling's merge, each under its workflow id (the replay test's name for it);
 * and a root that fails (engine 6: a failed workflow carrying its result).
 */
import type { temporal } from '@temporalio/proto';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { initRepository } from '../../src/kinds/tdd/worker/git';
import type { Json } from '../../src/model/shapes';
import type { Harness } from './harness';
import { leaf } from './tdd-fixtures';

const EXAMPLE = path.join(__dirname, '..', '..', 'examples', 'tdd');

export async function recordTddTree(h: Harness): Promise<Record<string, temporal.api.history.v1.IHistory>> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'tdd-record-'));
  process.env.TREADLE_TDD_REPOS = root;
  const repo = path.join(root, 'textkit');
  await initRepository(repo, { 'README.md': '# textkit\n' });
  const spec = parseYaml(readFileSync(path.join(EXAMPLE, 'textkit.yaml'), 'utf8')) as Json;
  const replies = parseYaml(readFileSync(path.join(EXAMPLE, 'textkit.replies.yaml'), 'utf8')) as Json;
  // The replay test replays each file under its name as the workflow id, and children's ids derive from it.
  const id = 'tdd-root';
  await h.client.startTdd(spec, { repo, id, replies });
  const result = await h.client.tddResult(id);
  if (result.status !== 'merged') throw new Error(`the example tree did not merge: ${result.error}`);
  const state = await h.client.getTddState(id);
  const rebased = (
    await Promise.all(state.children.map(async (c) => ({ c, s: await h.client.getTddState(c.workflowId) })))
  ).find((x) => (x.s.counters.calls.rebaser ?? 0) > 0);
  if (!rebased) throw new Error('no child rebased');
  return {
    [id]: await h.temporal.workflow.getHandle(id).fetchHistory(),
    [rebased.c.workflowId]: await h.temporal.workflow.getHandle(rebased.c.workflowId).fetchHistory(),
  };
}

/** A one-leaf tree whose Impl is stuck and whose human never answers: the root fails, as a failed workflow. */
export async function recordFailedTddRoot(h: Harness): Promise<Record<string, temporal.api.history.v1.IHistory>> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'tdd-record-failed-'));
  process.env.TREADLE_TDD_REPOS = root;
  const repo = path.join(root, 'hopeless');
  await initRepository(repo, { 'README.md': '# hopeless\n' });
  const l = leaf('hopeless');
  const replies: Record<string, Json[]> = {
    'hopeless.scaffold': [l.initWork],
    'hopeless.tddWriteTests': [l.testsReady],
    'hopeless.impl': [l.stuck],
  };
  const id = 'tdd-failed-root';
  await h.client.startTdd({ ...l.spec, tdd: { humanTtlSeconds: 1 } }, { repo, id, replies });
  const result = await h.client.tddResult(id);
  if (result.status !== 'failed') throw new Error(`the hopeless tree did not fail: ${result.status}`);
  const description = await h.temporal.workflow.getHandle(id).describe();
  if (description.status.name !== 'FAILED') throw new Error(`the failed root is ${description.status.name}`);
  return { [id]: await h.temporal.workflow.getHandle(id).fetchHistory() };
}
