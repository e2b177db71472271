/**
 * TDD trees (seed 001), Treadle only: there is no raw-Temporal tree to compare with, and the time goes to
 * git and `node --test` rather than to the engine, so the figures are absolute. Two trees on fresh git
 * repositories:
 *
 * - the shipped example (examples/tdd/textkit): wall time, history bytes and events per node;
 * - one parent with N children (scripted agents writing one-line modules and one test each): the time until
 *   the parent has merged them all and merged itself, history bytes per node (mean and largest), and how
 *   many rebases the sibling broadcasts caused.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { initRepository } from '../../src/kinds/tdd/worker/git';
import type { Json } from '../../src/model/shapes';
import { round } from '../statistics';
import { fmt, nowMs, type ScenarioContext, type ScenarioResult } from '../scenario';

const EXAMPLE = path.join(__dirname, '..', '..', '..', 'examples', 'tdd');

export interface TreeFigures {
  nodes: number;
  wallMs: number;
  historyBytes: { mean: number; max: number; root: number };
  historyEvents: { mean: number; max: number };
  rebases: number;
}

export interface TddTreeResult {
  example: TreeFigures;
  wide: TreeFigures & { children: number };
}

/** A parent with `width` children, each a one-line module with one test; every agent is scripted. */
export function wideTree(width: number): { spec: Json; replies: Json } {
  const ids = Array.from({ length: width }, (_, i) => `c${i + 1}`);
  const node = (test: string) =>
    `'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\n${test}\n`;
  const replies: Record<string, Json[]> = {
    'wide.scaffold': [
      {
        exit: 'InitWork',
        scaffoldCommit: '',
        interfaceFile: 'src/index.js',
        contractSuite: 'test/contract/index.contract.test.js',
        testPlan: [{ criterionId: 'W1', plannedTestName: 'W1: total', approach: 'sum of the children' }],
        childSpecs: ids.map((id) => ({
          id,
          description: `module ${id}`,
          acceptanceCriteria: [{ id: `${id}-1`, text: `${id}.value() is 1` }],
          targetPath: `src/${id}.js`,
          testPath: `test/${id}.test.js`,
        })),
        files: {
          'src/index.js': `'use strict';\nfunction total() {\n  throw new Error('not implemented');\n}\nmodule.exports = { total };\n`,
          'test/contract/index.contract.test.js': node(
            `test('exports total', () => assert.equal(typeof require('../../src/index').total, 'function'));`,
          ),
        },
      },
    ],
    'wide.tddWriteTests': [
      {
        exit: 'TestsReady',
        testsCommit: '',
        testFiles: ['test/index.test.js'],
        pendingCriteria: ['W1'],
        files: {
          'test/index.test.js': node(
            `test('W1: total', () => assert.equal(require('../src/index').total(), ${width}));`,
          ),
        },
      },
    ],
    'wide.impl': [
      {
        exit: 'TestsPassed',
        commitHash: '',
        iterations: 1,
        passedTests: ['W1: total'],
        files: {
          'src/index.js': `'use strict';\nconst parts = [${ids.map((id) => `require('./${id}')`).join(', ')}];\nfunction total() {\n  return parts.reduce((sum, p) => sum + p.value(), 0);\n}\nmodule.exports = { total };\n`,
        },
      },
    ],
    'wide.tddReviewImpl': [
      { exit: 'Approved', signOff: 'ok', coverageReport: { criteriaWithTests: [], criteriaMissing: [] } },
    ],
    'wide.merger': [
      {
        exit: 'MergeComplete',
        mergeCommit: '',
        author: 'wide',
        impactLevel: 'Additive',
        changes: [{ symbol: 'total', changeType: 'NewExport', reason: 'W1' }],
      },
    ],
  };
  for (const id of ids) {
    replies[`${id}.scaffold`] = [
      {
        exit: 'InitWork',
        scaffoldCommit: '',
        interfaceFile: `src/${id}.js`,
        contractSuite: `test/contract/${id}.contract.test.js`,
        testPlan: [{ criterionId: `${id}-1`, plannedTestName: `${id}: value`, approach: 'equal 1' }],
        files: {
          [`src/${id}.js`]: `'use strict';\nfunction value() {\n  throw new Error('not implemented');\n}\nmodule.exports = { value };\n`,
          [`test/contract/${id}.contract.test.js`]: node(
            `test('exports value', () => assert.equal(typeof require('../../src/${id}').value, 'function'));`,
          ),
        },
      },
    ];
    replies[`${id}.tddWriteTests`] = [
      {
        exit: 'TestsReady',
        testsCommit: '',
        testFiles: [`test/${id}.test.js`],
        pendingCriteria: [`${id}-1`],
        files: {
          [`test/${id}.test.js`]: node(`test('${id}: value', () => assert.equal(require('../src/${id}').value(), 1));`),
        },
      },
    ];
    replies[`${id}.impl`] = [
      {
        exit: 'TestsPassed',
        commitHash: '',
        iterations: 1,
        passedTests: [`${id}: value`],
        files: { [`src/${id}.js`]: `'use strict';\nfunction value() {\n  return 1;\n}\nmodule.exports = { value };\n` },
      },
    ];
    replies[`${id}.tddReviewImpl`] = [
      {
        exit: 'Approved',
        signOff: 'ok',
        coverageReport: { criteriaWithTests: [[`${id}-1`, `${id}: value`]], criteriaMissing: [] },
      },
    ];
    replies[`${id}.merger`] = [
      {
        exit: 'MergeComplete',
        mergeCommit: '',
        author: id,
        impactLevel: 'Additive',
        changes: [{ symbol: 'value', changeType: 'NewExport', reason: `${id}-1` }],
      },
    ];
    replies[`${id}.rebaser`] = [{ exit: 'RebaseClean', newBase: '' }];
  }
  const spec = {
    id: 'wide',
    description: `a parent that sums ${width} children`,
    acceptanceCriteria: [{ id: 'W1', text: `total() is ${width}` }],
    targetPath: 'src/index.js',
    testPath: 'test/index.test.js',
    tdd: { maxChildren: Math.max(width, 1), maxDepth: 1 },
  };
  return { spec, replies };
}

async function runTree(
  ctx: ScenarioContext,
  root: string,
  name: string,
  spec: Json,
  replies: Json,
): Promise<TreeFigures> {
  const repo = path.join(root, name);
  await initRepository(repo, { 'README.md': `# ${name}\n` });
  const id = `${ctx.tag}-tdd-${name}`;
  const started = nowMs();
  await ctx.treadleClient.startTdd(spec, { repo, id, replies });
  const result = await ctx.treadleClient.tddResult(id);
  const wallMs = nowMs() - started;
  if (result.status !== 'merged') throw new Error(`TDD tree ${name} did not merge: ${result.error}`);
  const state = await ctx.treadleClient.getTddState(id);
  const nodeIds = [id, ...state.children.map((c) => c.workflowId)];
  const sizes = await Promise.all(
    nodeIds.map(async (nodeId) => {
      const description = await ctx.treadleClient.client.workflow.getHandle(nodeId).describe();
      return { bytes: description.historySize ?? Number.NaN, events: description.historyLength ?? Number.NaN };
    }),
  );
  const childStates = await Promise.all(state.children.map((c) => ctx.treadleClient.getTddState(c.workflowId)));
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  return {
    nodes: nodeIds.length,
    wallMs: round(wallMs),
    historyBytes: {
      mean: round(mean(sizes.map((s) => s.bytes))),
      max: Math.max(...sizes.map((s) => s.bytes)),
      root: sizes[0]!.bytes,
    },
    historyEvents: { mean: round(mean(sizes.map((s) => s.events))), max: Math.max(...sizes.map((s) => s.events)) },
    rebases: childStates.reduce((n, c) => n + (c.counters.calls.rebaser ?? 0), 0),
  };
}

/** Runs both trees. */
export async function tddTree(ctx: ScenarioContext): Promise<ScenarioResult<TddTreeResult>> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'bench-tdd-'));
  const previous = process.env.TREADLE_TDD_REPOS;
  process.env.TREADLE_TDD_REPOS = root;
  try {
    ctx.progress('tdd: the example tree (textkit: a parent and two children)');
    const spec = parseYaml(readFileSync(path.join(EXAMPLE, 'textkit.yaml'), 'utf8')) as Json;
    const replies = parseYaml(readFileSync(path.join(EXAMPLE, 'textkit.replies.yaml'), 'utf8')) as Json;
    const example = await runTree(ctx, root, 'textkit', spec, replies);
    const width = ctx.sizes.tddWidth;
    ctx.progress(`tdd: a parent with ${width} children`);
    const wideSpec = wideTree(width);
    const wide = { ...(await runTree(ctx, root, 'wide', wideSpec.spec, wideSpec.replies)), children: width };
    const rowsOf = (label: string, t: TreeFigures) => [
      {
        scenario: label,
        metric: 'wall time (start → root merged)',
        treadle: fmt(t.wallMs, ' ms'),
        baseline: '—',
        ratio: '',
      },
      {
        scenario: label,
        metric: 'history bytes per node: mean / largest (root)',
        treadle: `${fmt(t.historyBytes.mean / 1024, ' KiB')} / ${fmt(t.historyBytes.max / 1024, ' KiB')} (${fmt(t.historyBytes.root / 1024, ' KiB')})`,
        baseline: '—',
        ratio: '',
      },
      {
        scenario: label,
        metric: 'history events per node: mean / largest; rebases',
        treadle: `${fmt(t.historyEvents.mean)} / ${fmt(t.historyEvents.max)}; ${t.rebases}`,
        baseline: '—',
        ratio: '',
      },
    ];
    return {
      result: { example, wide },
      rows: [...rowsOf('tdd: example tree (3 nodes)', example), ...rowsOf(`tdd: 1 parent × ${width} children`, wide)],
    };
  } finally {
    if (previous === undefined) delete process.env.TREADLE_TDD_REPOS;
    else process.env.TREADLE_TDD_REPOS = previous;
    rmSync(root, { recursive: true, force: true });
  }
}
