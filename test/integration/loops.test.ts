/**
 * Loop stages (seed 004) on the real server: the seed's files in the seed's layout, each termination type,
 * guardrails, fail fast and resume, malformed status files, input selection, continue-as-new with the
 * counts kept, and a fresh agent per iteration. The scripted agent's replies write the output, the progress
 * entry and `status.json` (`{ output, progress, status }`), as a real agent would with its tools.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Json } from '../../src/model/shapes';
import type { LoopArtefact } from '../../src/model/loop';
import { eventually, startHarness, type Harness } from '../support/harness';

let h: Harness;
let workspace: string;
const saved = { workspace: process.env.TREADLE_LOOP_WORKSPACE, commands: process.env.TREADLE_LOOP_COMMANDS };

beforeAll(async () => {
  workspace = mkdtempSync(path.join(os.tmpdir(), 'loops-'));
  process.env.TREADLE_LOOP_WORKSPACE = workspace;
  process.env.TREADLE_LOOP_COMMANDS = JSON.stringify([['test', '-s'], ['sh', 'queue.sh']]);
  h = await startHarness();
});
afterAll(async () => {
  await h?.shutdown();
  for (const [key, value] of [['TREADLE_LOOP_WORKSPACE', saved.workspace], ['TREADLE_LOOP_COMMANDS', saved.commands]] as const) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  rmSync(workspace, { recursive: true, force: true });
});

type Reply = { output?: string; progress?: string; status?: Json | string; crash?: string };
const status = (decision: 'continue' | 'stop' | 'error', reason = `decided ${decision}`, extra: Record<string, Json> = {}): Json => ({ decision, reason, summary: `summary: ${reason}`, work: { items_completed: [], files_touched: [] }, errors: [], ...extra });
const reply = (n: number, decision: 'continue' | 'stop' | 'error' = 'continue'): Reply => ({ output: `# Output ${n}\n`, progress: `## Iteration ${n}\n- did step ${n}\n`, status: status(decision, `iteration ${n}`) });

function loopStage(name: string, stage: Record<string, Json>, extra: Record<string, Json> = {}): Json {
  return { name, run: 'loop', with: { stage: { name, prompt: 'Read ${CTX}. Append to ${PROGRESS}. Write ${OUTPUT}. Report in ${STATUS}.', ...stage }, ...extra } };
}

function sessionDir(session: string): string {
  return path.join(workspace, '.treadle', 'pipeline-runs', session);
}

async function artefactOf(id: string, stage: string): Promise<LoopArtefact> {
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  return (await h.client.readArtefact(result.artefacts[stage])) as unknown as LoopArtefact;
}

test('fixed: exactly N iterations whatever the agents decide; the seed’s files in the seed’s layout', async () => {
  const id = h.id('loop-fixed');
  const spec = { name: 'fixed-loop', stages: [loopStage('ideas', { termination: { type: 'fixed' } }, { max_iterations: 3 })] };
  await h.client.start(spec, { agent_replies: { ideas: [reply(1), reply(2, 'stop'), reply(3)] } }, { id });
  const artefact = await artefactOf(id, 'ideas');
  expect(artefact).toMatchObject({ iterations: 3, stoppedBy: { by: 'termination', reason: '3 iterations done (fixed)' }, decisions: { continue: 2, stop: 1, error: 0 }, stageDir: 'stage-00-ideas' });

  const stageDir = path.join(sessionDir(id), 'stage-00-ideas');
  expect(readdirSync(path.join(stageDir, 'iterations')).sort()).toEqual(['001', '002', '003']);
  for (const n of [1, 2, 3]) {
    const dir = path.join(stageDir, 'iterations', String(n).padStart(3, '0'));
    expect(readFileSync(path.join(dir, 'output.md'), 'utf8')).toBe(`# Output ${n}\n`);
    expect(JSON.parse(readFileSync(path.join(dir, 'status.json'), 'utf8'))).toMatchObject({ reason: `iteration ${n}` });
  }
  // context.json, exactly the seed's fields.
  const context = JSON.parse(readFileSync(path.join(stageDir, 'iterations', '003', 'context.json'), 'utf8'));
  const rel = `.treadle/pipeline-runs/${id}`;
  expect(context).toEqual({
    session: id,
    pipeline: 'fixed-loop',
    stage: { id: 'ideas', index: 0, template: 'ideas' },
    iteration: 3,
    paths: {
      session_dir: rel,
      stage_dir: `${rel}/stage-00-ideas`,
      progress: `${rel}/stage-00-ideas/progress.md`,
      output: `${rel}/stage-00-ideas/output.md`,
      status: `${rel}/stage-00-ideas/iterations/003/status.json`,
    },
    inputs: { from_stage: {}, from_previous_iterations: ['iterations/001/output.md', 'iterations/002/output.md'] },
    limits: { max_iterations: 3, remaining_seconds: expect.any(Number) },
  });
  expect(readFileSync(path.join(stageDir, 'progress.md'), 'utf8')).toBe('## Iteration 1\n- did step 1\n## Iteration 2\n- did step 2\n## Iteration 3\n- did step 3\n');
  expect(readFileSync(path.join(stageDir, 'output.md'), 'utf8')).toBe('# Output 3\n');
  expect(JSON.parse(readFileSync(path.join(sessionDir(id), 'state.json'), 'utf8'))).toMatchObject({ session: id, status: 'completed', stage: 'ideas', iteration: 3 });
  // The final output travels by reference.
  expect(artefact.outputRef).toMatch(/^sha256:/);
  expect((await h.blobs.get(artefact.outputRef!)).toString()).toBe('# Output 3\n');
}, 60_000);

test('judgment: consensus consecutive stop decisions from min_iterations on; any other decision resets the count', async () => {
  const id = h.id('loop-judgment');
  const spec = { name: 'judged', stages: [loopStage('refine', { termination: { type: 'judgment', min_iterations: 3, consensus: 2 } }, { max_iterations: 10 })] };
  // stop at 1 and 2 (before min_iterations), continue at 3 resets, stop at 4, 5 → done at 5.
  const decisions = ['stop', 'stop', 'continue', 'stop', 'stop', 'stop'] as const;
  await h.client.start(spec, { agent_replies: { refine: decisions.map((d, i) => reply(i + 1, d)) } }, { id });
  const artefact = await artefactOf(id, 'refine');
  expect(artefact).toMatchObject({ iterations: 5, stoppedBy: { by: 'termination', reason: '2 consecutive stop decisions (iteration 5)' } });
  const [loop] = await h.client.loops(id);
  expect(loop!.state).toMatchObject({ status: 'completed', iteration: 5, consecutiveStops: 2, decisions: { stop: 4, continue: 1, error: 0 } });
  expect(loop!.state.recent.map((r) => r.decision)).toEqual(['stop', 'stop', 'continue', 'stop', 'stop']);
}, 60_000);
