/**
 * The `llm` stage, the `llm-judge` gate and the scripted agent, called directly with hand-made contexts
 * whose `agent()` is a ScriptedAgent (no Temporal). Cases:
 * - templates (Liquid): variables, the feedback alias, `tojson`, Jinja-like truthiness, a syntax error →
 *   InvalidTemplate naming the stage, a template in the config that does not parse → InvalidConfig;
 * - llm stage: structured and text replies, request fields, a malformed reply → `rejection` quoting the
 *   issue, the feedback section appended on attempt 2 (and not when the template handles feedback), a bad
 *   config → InvalidConfig listing every problem;
 * - llm-judge: accepted, rejected (failed and omitted criteria), uncertain, malformed reply → uncertain;
 * - scripted agent: reply by attempt (the last repeats), `$reply`, usage and call record, the default
 *   schema-derived reply validates, replies_file inside the replies folder, bad agent_replies (escapes from
 *   the folder: security-replies-file.test.ts);
 * - documents-llm: the YAML validates against the registered implementations, and report-llm.json's
 *   replies drive pdf_to_markdown through the real markdown_quality gate (reject, then accept), then the
 *   concept graph through concept_graph and the local downstream stages.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import {
  Registry,
  type GateContext,
  type GateImplementation,
  type StageContext,
  type StageImplementation,
} from '../../src/activities/registry';
import { compileOutputSchema, validateValue } from '../../src/agents/output-schema';
import { GATE_CORRELATION_SUFFIX, ScriptedAgent, exampleOf, scriptedAgentFactory } from '../../src/agents/scripted';
import type { Agent, AgentRequest, AgentResult } from '../../src/agents/types';
import { decideAfterAttempt } from '../../src/engine/stage-policy';
import { type StageSpec } from '../../src/model/pipeline';
import { validatePipeline } from '../../src/kinds/pipeline';
import type { Json, QualityFeedback, QualityVerdict, StageOutput } from '../../src/model/shapes';
import {
  buildFtsIndex,
  conceptGraph,
  crossReference,
  finalReview,
  generateEmbeddings,
  markdownQuality,
  registerDocumentPipeline,
  type ReviewPacket,
} from '../../examples/documents';
import {
  JUDGE_OUTPUT_SCHEMA,
  feedbackSection,
  llmJudge,
  mentionsVariable,
  llmStage,
  promptVars,
  registerLlm,
  renderPrompt,
} from '../../src/pipelines/llm';

import { stageContext, failureOf } from '../support/contexts';

const EXAMPLES = path.join(__dirname, '..', '..', 'examples', 'documents');

/** An agent that records the requests it serves and answers like the scripted agent of the attempt. */
class RecordingScriptedAgent implements Agent {
  readonly provider = 'scripted';
  readonly requests: AgentRequest[] = [];
  constructor(private readonly inner: Agent) {}
  async run(request: AgentRequest): Promise<AgentResult> {
    this.requests.push(request);
    return this.inner.run(request);
  }
}

type Overrides = Partial<Omit<StageContext, 'agent'>>;

function makeContext(overrides: Overrides = {}): StageContext & { requests: AgentRequest[] } {
  const base = stageContext({ stage: 'draft', ...overrides });
  const agent = new RecordingScriptedAgent(
    scriptedAgentFactory({
      itemId: base.itemId,
      stage: base.stage,
      attempt: base.attempt,
      input: base.input,
      config: base.config,
    }),
  );
  return { ...base, agent: () => agent, requests: agent.requests };
}

function makeGateContext(output: StageOutput, overrides: Overrides = {}): GateContext & { requests: AgentRequest[] } {
  const { feedback: _feedback, ...base } = makeContext(overrides);
  return { ...base, output };
}

const FEEDBACK: QualityFeedback = {
  summary: '1 of 2 criteria not met: tone',
  failedCriteria: [{ name: 'tone', expected: 'formal', actual: 'chatty', passed: false }],
  guidance: { hint: 'drop the jokes' },
};

const SUMMARY_SCHEMA = {
  type: 'object',
  required: ['headline', 'points'],
  properties: { headline: { type: 'string', minLength: 1 }, points: { type: 'array', items: { type: 'string' } } },
};

describe('prompt templates', () => {
  it('renders the attempt variables, the failed_criteria alias and tojson', () => {
    const ctx = makeContext({
      input: { topic: 'queues' },
      upstream: { outline: { parts: ['a', 'b'] } },
      attempt: 2,
      feedback: FEEDBACK,
    });
    const template = [
      '{{ stage }} {{ item_id }} {{ attempt }}/{{ max_attempts }} on {{ input.topic }}',
      '{{ upstream.outline | tojson }}',
      '{% if feedback %}{{ feedback.summary }}; {% for c in feedback.failed_criteria %}{{ c.name }}={{ c.actual }}{% endfor %}{% endif %}',
      '[{{ input.missing }}] {{ nothing | tojson }}',
    ].join('\n');
    expect(renderPrompt(template, promptVars(ctx, ctx.feedback))).toBe(
      [
        'draft item-1 2/3 on queues',
        '{"parts":["a","b"]}',
        '1 of 2 criteria not met: tone; tone=chatty',
        '[] null',
      ].join('\n'),
    );
    expect(renderPrompt('{{ feedback | tojson }}', promptVars(ctx, null))).toBe('null');
    expect(renderPrompt('{{ upstream.outline | tojson: 2 }}', promptVars(ctx, null))).toBe(
      '{\n  "parts": [\n    "a",\n    "b"\n  ]\n}',
    );
  });

  it('treats empty strings, 0 and null as false in conditions, as Jinja did', () => {
    const ctx = makeContext({ input: { empty: '', zero: 0, text: 'x', list: [] } });
    const template =
      '{% if input.empty %}E{% endif %}{% if input.zero %}Z{% endif %}{% if input.missing %}M{% endif %}{% if input.text %}T{% endif %}{{ attempt | minus: 1 }}';
    expect(renderPrompt(template, promptVars(ctx, null))).toBe('T0');
  });

  it('fails non-retryably as InvalidTemplate, naming the stage and the engine message with its position', async () => {
    const ctx = makeContext({ stage: 'summarise' });
    const failure = await failureOf(() => renderPrompt('Hello {{ input.name ', promptVars(ctx, null)));
    expect(failure.type).toBe('InvalidTemplate');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(
      /^summarise: the prompt template is invalid: output "\{\{ input\.name " not closed, line:1, col:7$/,
    );
  });

  it('the llm stage reports a system template that does not parse as InvalidConfig, before calling the agent', async () => {
    const ctx = makeContext({ config: { prompt: 'hi {{ input | nosuchfilter }}', system: '{% if %}' } });
    const failure = await failureOf(() => llmStage(ctx));
    expect(failure).toMatchObject({ type: 'InvalidConfig', nonRetryable: true });
    expect(failure.message).toContain('draft: the with: configuration of llm is invalid (2 problems)');
    expect(failure.message).toContain('prompt: the prompt template does not parse: undefined filter: nosuchfilter');
    expect(failure.message).toContain('system: the system template does not parse:');
    expect(ctx.requests).toEqual([]);
  });
});

describe('llm stage', () => {
  it('returns the structured reply as the artefact, with a one-line summary', async () => {
    const reply = { headline: 'Queues are fine', points: ['p95 under 20s'] };
    const ctx = makeContext({
      input: { topic: 'queues', agent_replies: { draft: [reply] } },
      config: {
        prompt: 'Summarise {{ input.topic }}',
        system: 'Be brief about {{ input.topic }}',
        output_schema: SUMMARY_SCHEMA,
        model: 'claude-test',
        max_tokens: 500,
        temperature: 0,
        conversation: '{{ item_id }}-design',
      },
    });
    const output = await llmStage(ctx);
    expect(output).toEqual({
      outcome: 'completed',
      artefact: reply,
      summary: expect.stringMatching(/^llm \(claude-test, \d+ tokens in, \d+ out\): structured reply$/),
    });
    expect(output.rejection).toBeUndefined();
    const [request] = ctx.requests;
    expect(request).toMatchObject({
      system: 'Be brief about queues',
      messages: [{ role: 'user', content: 'Summarise queues' }],
      outputSchema: SUMMARY_SCHEMA,
      model: 'claude-test',
      maxTokens: 500,
      temperature: 0,
      conversationId: 'item-1-design',
      correlationId: 'item-1/draft/1',
    });
    expect(request?.signal).toBe(ctx.signal);
  });

  it('returns { text } without an output schema', async () => {
    const ctx = makeContext({ input: { agent_replies: { draft: ['A plain answer.'] } }, config: { prompt: 'Answer' } });
    expect(await llmStage(ctx)).toMatchObject({
      outcome: 'completed',
      artefact: { text: 'A plain answer.' },
      summary: expect.stringContaining('15 characters of text'),
    });
  });

  it('turns a reply that breaks the schema into a rejection quoting the issue, not an exception', async () => {
    const ctx = makeContext({
      input: { agent_replies: { draft: [{ headline: 42 }] } },
      config: { prompt: 'Summarise', output_schema: SUMMARY_SCHEMA },
    });
    const output = await llmStage(ctx);
    expect(output.outcome).toBe('completed');
    expect(output.artefact).toEqual({ raw: '{"headline":42}' });
    expect(output.summary).toMatch(/the reply did not match output_schema$/);
    const rejection = output.rejection;
    expect(rejection?.summary).toMatch(/^the reply did not match the output schema: headline: .*expected string/i);
    expect(rejection?.failedCriteria.length).toBeGreaterThanOrEqual(2);
    expect(rejection?.failedCriteria[0]).toEqual({
      name: 'output_schema',
      expected: 'a reply matching output_schema',
      actual: expect.stringContaining('headline'),
      passed: false,
    });
    expect(rejection?.failedCriteria.map((c) => c.actual).join(' ')).toContain('points');
    expect(rejection?.guidance).toEqual({ issues: rejection?.failedCriteria.map((c) => c.actual) });
  });

  it('quotes a reply that is not JSON at all', async () => {
    const ctx = makeContext({
      input: { agent_replies: { draft: ['Sure! Here is your summary.'] } },
      config: { prompt: 'Summarise', output_schema: SUMMARY_SCHEMA },
    });
    const output = await llmStage(ctx);
    expect(output.artefact).toEqual({ raw: 'Sure! Here is your summary.' });
    expect(output.rejection?.summary).toContain('the reply is not JSON');
  });

  it('appends the feedback section on attempt 2 when the template does not use feedback', async () => {
    const first = makeContext({ config: { prompt: 'Write the memo.' } });
    await llmStage(first);
    expect(first.requests[0]?.messages[0]?.content).toBe('Write the memo.');

    const second = makeContext({ attempt: 2, feedback: FEEDBACK, config: { prompt: 'Write the memo.' } });
    await llmStage(second);
    const prompt = second.requests[0]?.messages[0]?.content ?? '';
    expect(prompt).toBe(`Write the memo.\n\n${feedbackSection(FEEDBACK)}`);
    expect(prompt).toContain('Your previous attempt was rejected: 1 of 2 criteria not met: tone');
    expect(prompt).toContain('- tone: expected formal; actual chatty');
    expect(prompt).toContain('Guidance: {"hint":"drop the jokes"}');
  });

  it("puts a reviewer's requested changes in the section beside the gate's criteria", () => {
    const section = feedbackSection({
      summary: "changes requested by ann; the gate's last feedback: 1 of 2 criteria not met: tone",
      failedCriteria: FEEDBACK.failedCriteria,
      guidance: 'Give the speed-up as a percentage.',
      reviewer: 'ann',
    });
    expect(section).toContain("rejected: changes requested by ann; the gate's last feedback: 1 of 2 criteria not met");
    expect(section).toContain('- tone: expected formal; actual chatty');
    expect(section).toContain('The reviewer ann asked for these changes:\nGive the speed-up as a percentage.');
  });

  it('leaves feedback to a template that handles it', async () => {
    const ctx = makeContext({
      attempt: 2,
      feedback: FEEDBACK,
      config: { prompt: 'Write the memo.{% if feedback %} Fix: {{ feedback.summary }}{% endif %}' },
    });
    await llmStage(ctx);
    expect(ctx.requests[0]?.messages[0]?.content).toBe('Write the memo. Fix: 1 of 2 criteria not met: tone');
  });

  it('rejects a bad config non-retryably as InvalidConfig, listing every problem', async () => {
    const ctx = makeContext({
      config: { max_tokens: -1, temperature: 'hot', promt: 'typo', output_schema: { type: 'no-such-type' } },
    });
    const failure = await failureOf(() => llmStage(ctx));
    expect(failure.type).toBe('InvalidConfig');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain('draft: the with: configuration of llm is invalid');
    for (const part of [
      'prompt: prompt is required',
      'max_tokens: max_tokens must be positive',
      'temperature:',
      'promt',
    ])
      expect(failure.message).toContain(part);
  });

  it('reports an output_schema that is not a usable JSON Schema', async () => {
    const ctx = makeContext({ config: { prompt: 'x', output_schema: { type: 'no-such-type' } } });
    const failure = await failureOf(() => llmStage(ctx));
    expect(failure.type).toBe('InvalidConfig');
    expect(failure.message).toContain('output_schema: output_schema is not a usable JSON Schema');
  });
});

describe('llm-judge gate', () => {
  const criteria = [
    { name: 'cites_numbers', description: 'quotes at least one figure from the source' },
    { name: 'formal', description: 'formal tone throughout' },
    { name: 'short', description: 'under 200 words' },
  ];
  const output: StageOutput = {
    outcome: 'completed',
    artefact: { headline: 'Queues', points: ['p95 under 20s'] },
    summary: 'a summary',
  };
  const judge = async (
    reply: Json,
    extra: Json = {},
  ): Promise<{ verdict: QualityVerdict; request: AgentRequest | undefined }> => {
    const ctx = makeGateContext(output, {
      stage: 'draft',
      input: { agent_replies: { 'draft.gate': [reply], draft: ['not for the judge'] } },
      config: { criteria, ...(extra as object) },
    });
    const verdict = await llmJudge(ctx);
    return { verdict, request: ctx.requests[0] };
  };
  const passing = (name: string) => ({ name, passed: true, actual: 'fine' });

  it('accepts when every listed criterion passed, asking with the verdict schema under a gate correlation id', async () => {
    const { verdict, request } = await judge({ criteria: criteria.map((c) => passing(c.name)) });
    expect(verdict).toEqual({ kind: 'accepted' });
    expect(request?.outputSchema).toEqual(JUDGE_OUTPUT_SCHEMA);
    expect(request?.correlationId).toBe(`item-1/draft/1${GATE_CORRELATION_SUFFIX}`);
    const prompt = request?.messages[0]?.content ?? '';
    expect(prompt).toContain('"headline": "Queues"');
    expect(prompt).toContain('- formal: formal tone throughout');
    expect(prompt).toContain('Summary of the output: a summary');
  });

  it('rejects with the failed criteria; an omitted criterion counts as failed, not assessed', async () => {
    const { verdict } = await judge({
      criteria: [{ name: 'cites_numbers', passed: false, actual: 'no figures quoted' }, passing('formal')],
      reason: 'needs numbers',
    });
    expect(verdict).toEqual({
      kind: 'rejected',
      feedback: {
        summary: '2 of 3 criteria not met: cites_numbers, short',
        failedCriteria: [
          {
            name: 'cites_numbers',
            expected: 'quotes at least one figure from the source',
            actual: 'no figures quoted',
            passed: false,
          },
          { name: 'short', expected: 'under 200 words', actual: 'not assessed', passed: false },
        ],
        guidance: { judge: 'needs numbers' },
      },
    });
  });

  it('is uncertain when the judge says so', async () => {
    const { verdict } = await judge({ criteria: [], uncertain: true, reason: 'the output is truncated' });
    expect(verdict).toEqual({ kind: 'uncertain', reason: 'the output is truncated' });
  });

  it('is uncertain, quoting the first issue, when the reply is malformed', async () => {
    const { verdict } = await judge({ criteria: [{ name: 'formal', passed: 'yes' }] });
    expect(verdict.kind).toBe('uncertain');
    if (verdict.kind !== 'uncertain') throw new Error('expected uncertain');
    expect(verdict.reason).toMatch(
      /^the judge's reply did not match the verdict schema: criteria\.0\.passed: .*boolean/i,
    );
  });

  it('lists the criteria after a custom prompt that does not mention them, and truncates huge outputs', async () => {
    const huge: StageOutput = { outcome: 'completed', artefact: { text: 'x'.repeat(50_000) } };
    const ctx = makeGateContext(huge, { config: { criteria, prompt: 'Judge {{ stage }}: {{ output_json }}' } });
    await llmJudge(ctx);
    const prompt = ctx.requests[0]?.messages[0]?.content ?? '';
    expect(prompt.length).toBeLessThan(21_000);
    expect(prompt).toMatch(/… \(\d+ more characters\)/);
    expect(
      prompt.endsWith(
        'Criteria:\n- cites_numbers: quotes at least one figure from the source\n- formal: formal tone throughout\n- short: under 200 words',
      ),
    ).toBe(true);
  });

  it('rejects a config without criteria as InvalidConfig', async () => {
    const failure = await failureOf(() => llmJudge(makeGateContext(output, { config: { criteria: [] } })));
    expect(failure.type).toBe('InvalidConfig');
    expect(failure.message).toContain('criteria: criteria needs at least one criterion');
  });

  it('with no canned reply, the scripted default assesses nothing and the judge rejects', async () => {
    const verdict = await llmJudge(makeGateContext(output, { config: { criteria } }));
    expect(verdict).toMatchObject({
      kind: 'rejected',
      feedback: { summary: '3 of 3 criteria not met: cites_numbers, formal, short' },
    });
  });
});

describe('scripted agent', () => {
  const request = (overrides: Partial<AgentRequest> = {}): AgentRequest => ({
    messages: [{ role: 'user', content: 'Tell me about queues' }],
    correlationId: 'item-1/draft/1',
    ...overrides,
  });
  const agentFor = (attempt: number, input: Json, config?: Json) =>
    new ScriptedAgent({ itemId: 'item-1', stage: 'draft', attempt, input, config });

  it('answers reply n on attempt n, repeating the last', async () => {
    const input = { agent_replies: { draft: ['first', 'second'] } };
    const texts = await Promise.all(
      [1, 2, 3].map(async (attempt) => (await agentFor(attempt, input).run(request())).text),
    );
    expect(texts).toEqual(['first', 'second', 'second']);
  });

  it('keeps gate replies apart under <stage>.gate', async () => {
    const input = { agent_replies: { draft: ['stage reply'], 'draft.gate': ['gate reply'] } };
    expect(
      (await agentFor(1, input).run(request({ correlationId: `item-1/draft/1${GATE_CORRELATION_SUFFIX}` }))).text,
    ).toBe('gate reply');
    expect((await agentFor(1, input).run(request())).text).toBe('stage reply');
  });

  it('reports usage from the text length and a full call record', async () => {
    const result = await agentFor(1, { agent_replies: { draft: ['abcde'] } }).run(
      request({ system: 'sys', model: 'claude-x' }),
    );
    expect(result.usage).toEqual({
      inputTokens: Math.ceil(('sys'.length + 'Tell me about queues'.length) / 4),
      outputTokens: 2,
      cacheReadTokens: 0,
    });
    expect(result.call).toMatchObject({
      correlationId: 'item-1/draft/1',
      provider: 'scripted',
      model: 'claude-x',
      promptHash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      status: 'success',
      inputTokens: 6,
      outputTokens: 2,
    });
    expect(result.call.latencyMs).toBeGreaterThanOrEqual(0);
    expect((await agentFor(1, null).run(request())).call.model).toBe('scripted');
  });

  it('takes full control with $reply', async () => {
    const input = {
      agent_replies: {
        draft: [
          { $reply: { text: 'custom', output: { headline: 'h', points: [] }, inputTokens: 1000, outputTokens: 7 } },
        ],
      },
    };
    const result = await agentFor(1, input).run(request({ outputSchema: SUMMARY_SCHEMA }));
    expect(result).toMatchObject({
      text: 'custom',
      output: { headline: 'h', points: [] },
      usage: { inputTokens: 1000, outputTokens: 7 },
    });
  });

  it('answers the text default without a schema', async () => {
    const long = 'q'.repeat(200);
    expect((await agentFor(1, null).run(request({ messages: [{ role: 'user', content: long }] }))).text).toBe(
      `scripted reply to: ${'q'.repeat(80)}`,
    );
  });

  it('answers a schema-derived default that validates', async () => {
    const schema: Json = {
      type: 'object',
      required: ['name', 'tags', 'count', 'ratio', 'kind', 'nested', 'when', 'ref', 'maybe', 'fixed'],
      properties: {
        name: { type: 'string', minLength: 3 },
        tags: { type: 'array', items: { type: 'string' }, minItems: 2 },
        count: { type: 'integer', minimum: 5 },
        ratio: { type: 'number', exclusiveMinimum: 0, maximum: 1 },
        kind: { type: 'string', enum: ['a', 'b'] },
        nested: {
          type: 'object',
          required: ['ok'],
          properties: { ok: { type: 'boolean' }, extra: { type: 'string' } },
        },
        when: { type: 'string', format: 'date-time' },
        ref: { $ref: '#/$defs/point' },
        maybe: { anyOf: [{ type: 'null' }, { type: 'string' }] },
        fixed: { const: 'v1' },
      },
      $defs: {
        point: { type: 'object', required: ['x', 'y'], properties: { x: { type: 'number' }, y: { type: 'number' } } },
      },
    };
    const result = await agentFor(1, null).run(request({ outputSchema: schema }));
    expect(result.invalidOutput).toBeUndefined();
    expect(result.output).toEqual({
      name: 'xxx',
      tags: ['', ''],
      count: 5,
      ratio: 1,
      kind: 'a',
      nested: { ok: false },
      when: '1970-01-01T00:00:00Z',
      ref: { x: 0, y: 0 },
      maybe: null,
      fixed: 'v1',
    });
    for (const s of [SUMMARY_SCHEMA, JUDGE_OUTPUT_SCHEMA])
      expect(validateValue(exampleOf(s), compileOutputSchema(s)).ok).toBe(true);
  });

  it('reports a canned reply that breaks the schema as invalidOutput', async () => {
    const result = await agentFor(1, { agent_replies: { draft: [{ points: 'none' }] } }).run(
      request({ outputSchema: SUMMARY_SCHEMA }),
    );
    expect(result.output).toBeUndefined();
    expect(result.invalidOutput?.raw).toBe('{"points":"none"}');
    expect(result.invalidOutput?.issues.join(' ')).toMatch(/headline/);
  });

  describe('replies_file', () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-replies-'));
      writeFileSync(path.join(dir, 'replies.json'), JSON.stringify({ draft: ['from the file'] }));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const fileAgent = (input: Json, file: string) =>
      new ScriptedAgent(
        { itemId: 'item-1', stage: 'draft', attempt: 1, input, config: { replies_file: file } },
        { repliesFolders: [dir] },
      );

    it('reads replies from the file, relative to the replies folder, when the input has none for the stage', async () => {
      expect((await fileAgent({ agent_replies: { other: ['x'] } }, 'replies.json').run(request())).text).toBe(
        'from the file',
      );
      expect(
        (await fileAgent({ agent_replies: { draft: ['from the input'] } }, 'replies.json').run(request())).text,
      ).toBe('from the input');
      expect((await fileAgent(null, path.join(dir, 'replies.json')).run(request())).text).toBe('from the file');
    });

    it('fails non-retryably on a missing file or a bad reply map', async () => {
      const missing = await failureOf(() => fileAgent(null, 'nope.json').run(request()));
      expect(missing).toMatchObject({
        type: 'InvalidConfig',
        nonRetryable: true,
        message: `cannot read replies_file ${path.join(dir, 'nope.json')}: ENOENT`,
      });
      const bad = await failureOf(() => agentFor(1, { agent_replies: { draft: [] } }).run(request()));
      expect(bad).toMatchObject({
        type: 'InvalidInput',
        message: expect.stringContaining('draft: needs at least one reply'),
      });
    });
  });
});

describe('documents-llm pipeline', () => {
  const spec = (): { stages: StageSpec[] } => {
    const result = validatePipeline(YAML.parse(readFileSync(path.join(EXAMPLES, 'pipeline-llm.yaml'), 'utf8')));
    if (!result.ok) throw new Error(result.problems.join('\n'));
    return result.spec;
  };
  const stageSpec = (name: string): StageSpec => {
    const found = spec().stages.find((s) => s.name === name);
    if (!found) throw new Error(`no stage ${name}`);
    return found;
  };
  const item = JSON.parse(readFileSync(path.join(EXAMPLES, 'report-llm.json'), 'utf8')) as Json;

  it('validates against the registered implementations with the DAG, gates and budgets of the local pipeline', () => {
    const registry = registerLlm(registerDocumentPipeline(new Registry()));
    const raw: unknown = YAML.parse(readFileSync(path.join(EXAMPLES, 'pipeline-llm.yaml'), 'utf8'));
    const result = validatePipeline(raw, registry.names());
    if (!result.ok) throw new Error(result.problems.join('\n'));
    expect(result.spec.name).toBe('documents-llm');

    const local = validatePipeline(YAML.parse(readFileSync(path.join(EXAMPLES, 'pipeline.yaml'), 'utf8')));
    if (!local.ok) throw new Error(local.problems.join('\n'));
    const policy = (s: StageSpec) => ({
      name: s.name,
      dependsOn: s.dependsOn,
      gate: s.gate,
      retryBudget: s.retryBudget,
      reviewPolicy: s.reviewPolicy,
    });
    expect(result.spec.stages.map(policy)).toEqual(local.spec.stages.map(policy));
    expect(result.spec.stages.filter((s) => s.run === 'llm').map((s) => s.name)).toEqual([
      'pdf_to_markdown',
      'extract_concepts',
    ]);
  });

  /** Attempts of one gated llm stage, decided by the engine's policy; a stage `rejection` skips the gate. */
  async function runGatedStage(name: string, gate: GateImplementation, upstream: Record<string, Json> = {}) {
    const { retryBudget, reviewPolicy, gate: gateRef, with: config } = stageSpec(name);
    const gateConfig = gateRef && 'run' in gateRef ? gateRef.with : undefined;
    const attempts: { verdict: QualityVerdict; output: StageOutput; prompt: string }[] = [];
    let feedback: QualityFeedback | null = null;
    for (let attempt = 1; ; attempt++) {
      const ctx = makeContext({
        stage: name,
        attempt,
        maxAttempts: retryBudget.maxAttempts,
        input: item,
        config,
        upstream,
        feedback,
      });
      const output = await llmStage(ctx);
      const verdict: QualityVerdict = output.rejection
        ? { kind: 'rejected', feedback: output.rejection }
        : await gate(makeGateContext(output, { stage: name, attempt, input: item, config: gateConfig }));
      attempts.push({ verdict, output, prompt: ctx.requests[0]?.messages[0]?.content ?? '' });
      const decision = decideAfterAttempt({
        attempt,
        budget: retryBudget,
        policy: reviewPolicy,
        outcome: { kind: 'output', output, verdict },
      });
      if (decision.action !== 'retry')
        return { attempts, decision: decision.action, artefact: output.artefact ?? null };
      feedback = decision.feedback;
    }
  }

  it('drives pdf_to_markdown through markdown_quality: tables lost on attempt 1, accepted on attempt 2, then the rest of the DAG', async () => {
    const markdown = await runGatedStage('pdf_to_markdown', markdownQuality);
    expect(markdown.attempts.map((a) => a.verdict.kind)).toEqual(['rejected', 'accepted']);
    expect(markdown.decision).toBe('complete');
    const [first, second] = markdown.attempts;
    if (first?.verdict.kind !== 'rejected') throw new Error('expected a rejection');
    expect(first.verdict.feedback.failedCriteria.map((c) => c.name)).toEqual(['table_preservation']);
    expect(first.prompt).toContain('Northwind Data Platform · Q3 Reliability Report');
    expect(first.prompt).not.toContain('was rejected');
    expect(second?.prompt).toContain('Attempt 1 of 3 was rejected: 1 of 3 criteria not met: table_preservation');
    expect(second?.prompt).toContain(
      '- table_preservation: expected 1 table of the source as markdown pipe tables, got no pipe tables',
    );
    expect(second?.prompt).toContain('Hint: use the column-aware layout reading');
    expect(markdown.artefact).toMatchObject({
      title: 'Q3 Platform Reliability Report',
      markdown: expect.stringContaining('| Ingestion API | 4 | 38 | 99.82% |'),
    });

    const upstream = { pdf_to_markdown: markdown.artefact };
    const concepts = await runGatedStage('extract_concepts', conceptGraph, upstream);
    expect(concepts.attempts.map((a) => a.verdict.kind)).toEqual(['accepted']);
    expect(concepts.attempts[0]?.prompt).toContain('| Search Indexer | 2 | 95 | 99.41% |');

    // The local stages downstream read the model's artefacts.
    const local = async (impl: StageImplementation, stage: string, from: Record<string, Json>) =>
      (await impl(makeContext({ stage, input: item, upstream: from }))).artefact ?? null;
    const crossRef = await local(crossReference, 'cross_reference', { extract_concepts: concepts.artefact });
    const embeddings = await local(generateEmbeddings, 'generate_embeddings', upstream);
    const index = await local(buildFtsIndex, 'build_fts_index', upstream);
    const packet = (await local(finalReview, 'final_review', {
      cross_reference: crossRef,
      generate_embeddings: embeddings,
      build_fts_index: index,
    })) as ReviewPacket;
    expect(packet.concepts.total).toBe(12);
    expect(packet.embeddings.chunks).toBeGreaterThan(0);
  });
});

describe('mentionsVariable', () => {
  it('sees a bare variable, not a property of another one', () => {
    expect(mentionsVariable('{{ feedback.summary }}', 'feedback')).toBe(true);
    expect(mentionsVariable('{% if feedback %}retry{% endif %}', 'feedback')).toBe(true);
    expect(mentionsVariable('Summarize the customer feedback: {{ input.feedback }}', 'feedback')).toBe(false);
    expect(mentionsVariable('{{ upstream["feedback"] }}', 'feedback')).toBe(false);
    expect(mentionsVariable('feedback outside any tag', 'feedback')).toBe(false);
    expect(mentionsVariable('{{ input.text | append: feedback.summary }}', 'feedback')).toBe(true);
    expect(mentionsVariable('{%- unless feedback -%}first try{%- endunless -%}', 'feedback')).toBe(true);
    // A variable the template assigns itself is not the attempt's feedback.
    expect(mentionsVariable("{% assign feedback = 'none' %}{{ feedback }}", 'feedback')).toBe(false);
    expect(mentionsVariable('{{ feedback', 'feedback')).toBe(false);
  });
});
