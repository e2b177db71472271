/** DAG readiness, transitive skipping and the item status. */
import { allSettled, itemStatus, readyStages, stagesToSkip } from '../../src/engine/dag';
import { pipeline } from '../../src/kinds/builder';
import type { StageState } from '../../src/model/state';

const spec = pipeline('diamond')
  .stage('a', 'scripted')
  .stage('b', 'scripted', { dependsOn: ['a'] })
  .stage('c', 'scripted', { dependsOn: ['a'] })
  .stage('d', 'scripted', { dependsOn: ['b', 'c'] })
  .stage('e', 'scripted', { dependsOn: ['d'] })
  .build();
type S = Record<string, Pick<StageState, 'status' | 'skipReason'>>;
const all = (status: StageState['status']): S =>
  Object.fromEntries(['a', 'b', 'c', 'd', 'e'].map((n) => [n, { status }]));

it('runs roots first, then every stage whose dependencies completed, in parallel', () => {
  expect(readyStages(spec, all('pending'))).toEqual(['a']);
  expect(readyStages(spec, { ...all('pending'), a: { status: 'completed' } })).toEqual(['b', 'c']);
  expect(
    readyStages(spec, {
      ...all('pending'),
      a: { status: 'completed' },
      b: { status: 'completed' },
      c: { status: 'running' },
    }),
  ).toEqual([]);
  expect(
    readyStages(spec, {
      ...all('pending'),
      a: { status: 'completed' },
      b: { status: 'completed' },
      c: { status: 'skipped', skipReason: 'outcome' },
    }),
  ).toEqual(['d']);
});

it('a stage waiting for review blocks only its dependents', () => {
  const stages: S = { ...all('pending'), a: { status: 'completed' }, b: { status: 'waiting_review' } };
  expect(readyStages(spec, stages)).toEqual(['c']);
  expect(stagesToSkip(spec, stages)).toEqual([]);
});

it('skips dependents of a failure transitively', () => {
  const stages: S = {
    ...all('pending'),
    a: { status: 'completed' },
    b: { status: 'failed' },
    c: { status: 'completed' },
  };
  expect(stagesToSkip(spec, stages)).toEqual([{ stage: 'd', because: 'b' }]);
  stages.d = { status: 'skipped', skipReason: 'upstream_failed' };
  expect(stagesToSkip(spec, stages)).toEqual([{ stage: 'e', because: 'd' }]);
});

it('derives the item status', () => {
  expect(itemStatus(all('pending'))).toBe('running');
  expect(itemStatus({ ...all('completed'), b: { status: 'waiting_review' } })).toBe('waiting_review');
  expect(itemStatus({ ...all('pending'), b: { status: 'waiting_review' }, c: { status: 'running' } })).toBe('running');
  expect(itemStatus(all('completed'))).toBe('completed');
  expect(itemStatus({ ...all('completed'), b: { status: 'failed' }, d: { status: 'skipped' } })).toBe('failed');
  expect(allSettled({ ...all('completed'), e: { status: 'waiting_review' } })).toBe(false);
});
