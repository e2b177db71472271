/**
 * A loop stage driven by the `anthropic` provider on the local fake Messages API, on the real server: each
 * iteration is a fresh agent (its first request carries only that iteration's prompt: no conversation from
 * the iterations before), which reads `context.json` and the progress file and writes the output, its
 * progress entry and `status.json` with the workspace tools. Every model call is in the call log.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AnthropicAgent } from '../../src/agents/anthropic';
import { scriptedAgentFactory } from '../../src/agents/scripted';
import { SqliteCallLog } from '../../src/storage/sqlite-call-log';
import type { Json } from '../../src/model/shapes';
import { startHarness, type Harness } from '../support/harness';
import {
  startFakeAnthropic,
  toolResultsOf,
  type FakeAnthropic,
  type FakeReply,
  type RecordedRequest,
} from '../support/fake-anthropic';

let fake: FakeAnthropic;
let h: Harness;
let workspace: string;
let callLog: SqliteCallLog;
const saved = process.env.TREADLE_LOOP_WORKSPACE;

beforeAll(async () => {
  workspace = mkdtempSync(path.join(os.tmpdir(), 'loops-anthropic-'));
  process.env.TREADLE_LOOP_WORKSPACE = workspace;
  fake = await startFakeAnthropic();
  callLog = new SqliteCallLog(path.join(workspace, 'calls.sqlite'));
  h = await startHarness({
    agents: {
      anthropic: () => new AnthropicAgent({ apiKey: 'sk-ant-test-key', baseURL: fake.baseURL }, {}),
      scripted: scriptedAgentFactory,
    },
    callLog,
  });
});
afterAll(async () => {
  await h?.shutdown();
  await fake?.close();
  await callLog?.close();
  if (saved === undefined) delete process.env.TREADLE_LOOP_WORKSPACE;
  else process.env.TREADLE_LOOP_WORKSPACE = saved;
  rmSync(workspace, { recursive: true, force: true });
});

type Message = { role: string; content: unknown };
const messagesOf = (request: RecordedRequest): Message[] => (request.body as { messages: Message[] }).messages;

/** The paths the prompt names (the template below puts each on its own line). */
function pathsIn(prompt: string): { ctx: string; progress: string; output: string; status: string } {
  const at = (label: string): string => new RegExp(`^${label}: (.+)$`, 'm').exec(prompt)![1]!;
  return { ctx: at('context'), progress: at('progress'), output: at('output'), status: at('status') };
}

test('each iteration is a fresh agent that works through the files with the workspace tools; the loop stops on consensus', async () => {
  fake.setDefault({
    kind: 'computed',
    reply: (request): FakeReply => {
      const messages = messagesOf(request);
      const prompt = messages[0]!.content as string;
      const paths = pathsIn(prompt);
      const round = messages.filter((m) => m.role === 'assistant').length;
      if (round === 0)
        return {
          kind: 'tools',
          uses: [
            { name: 'read_file', input: { path: paths.ctx } },
            { name: 'read_file', input: { path: paths.progress } },
          ],
        };
      if (round === 1) {
        const [context, progress] = toolResultsOf(request).map((r) => r);
        const iteration = (JSON.parse(String(context!.content)) as { iteration: number }).iteration;
        const before = progress!.is_error ? '' : String(progress!.content);
        const decision = iteration >= 2 ? 'stop' : 'continue';
        const status: Json = {
          decision,
          reason: `pass ${iteration}`,
          summary: `Refined the draft, pass ${iteration}.`,
          work: { items_completed: [], files_touched: [paths.output] },
          errors: [],
        };
        return {
          kind: 'tools',
          uses: [
            { name: 'write_file', input: { path: paths.output, content: `# Draft, pass ${iteration}\n` } },
            {
              name: 'write_file',
              input: { path: paths.progress, content: `${before}## Iteration ${iteration}\n- pass ${iteration}\n` },
            },
            { name: 'write_file', input: { path: paths.status, content: JSON.stringify(status) } },
          ],
        };
      }
      return { kind: 'text', text: 'Done: output, progress and status written.' };
    },
  });
  const id = h.id('loop-anthropic');
  const prompt =
    'Refine the draft. Your files:\ncontext: ${CTX}\nprogress: ${PROGRESS}\noutput: ${OUTPUT}\nstatus: ${STATUS}\n';
  const spec = {
    name: 'refining',
    stages: [
      {
        name: 'refine',
        run: 'loop',
        with: {
          stage: {
            name: 'refiner',
            prompt,
            termination: { type: 'judgment', min_iterations: 1, consensus: 2 },
            agent: 'anthropic',
            model: 'claude-haiku-4-5',
          },
          max_iterations: 6,
        },
      },
    ],
  };
  await h.client.start(spec, null, { id });
  const result = await h.client.result(id);
  expect(result.status).toBe('completed');
  const [loop] = await h.client.loops(id);
  // Iteration 1 continues, 2 and 3 stop: consensus 2 at iteration 3.
  expect(loop!.state).toMatchObject({
    status: 'completed',
    iteration: 3,
    decisions: { continue: 1, stop: 2, error: 0 },
  });

  // Fresh: the first request of every iteration holds one message, that iteration's prompt; nothing earlier.
  const firsts = fake.requests.filter((r) => messagesOf(r).length === 1);
  expect(firsts).toHaveLength(3);
  expect(fake.requests).toHaveLength(9);
  firsts.forEach((request, i) => {
    const text = messagesOf(request)[0]!.content as string;
    expect(text).toContain(`stage-00-refine/iterations/00${i + 1}/context.json`);
    expect(text).not.toContain('${');
  });
  // No request of an iteration carries anything of another iteration's exchange.
  for (const request of fake.requests) {
    const own = /iterations\/(\d{3})\/context\.json/.exec(String(messagesOf(request)[0]!.content))![1];
    const mentioned = [
      ...JSON.stringify(messagesOf(request)).matchAll(/iterations\/(\d{3})\/(?:context|status)\.json/g),
    ].map((m) => m[1]);
    expect(new Set(mentioned)).toEqual(new Set([own]));
  }
  // The files the agents wrote, in the seed's layout.
  const stageDir = path.join(workspace, '.treadle', 'pipeline-runs', id, 'stage-00-refine');
  expect(readFileSync(path.join(stageDir, 'progress.md'), 'utf8')).toBe(
    '## Iteration 1\n- pass 1\n## Iteration 2\n- pass 2\n## Iteration 3\n- pass 3\n',
  );
  expect(readFileSync(path.join(stageDir, 'iterations', '002', 'output.md'), 'utf8')).toBe('# Draft, pass 2\n');
  // The context file is read-only for the agent, like state.json; every model call is logged.
  const logged = (await callLog.query()).filter((row) => row.workflowId === `${id}.refine.1`);
  expect(logged).toHaveLength(9);
  expect(logged.every((row) => row.provider === 'anthropic' && row.stage === 'refine')).toBe(true);
}, 120_000);
