/**
 * Prompt templates are untrusted (they travel in the pipeline spec, which whoever starts a work item writes):
 * exploits must fail as a non-retryable failed attempt with a clear message, never run code or read files.
 * Each code-execution attempt tries to create a marker file and set a global, and the test checks neither
 * happened. Cases:
 * - Jinja/nunjucks classics (`range.constructor(...)()`, `cycler`, `joiner`, `constructor.constructor`,
 *   `{% set %}`): Liquid has no call syntax, so they do not parse — refused by the config check (InvalidConfig)
 *   before the agent is called;
 * - prototype walking that does parse (`input.constructor`, `__proto__`, `["constructor"]`, `map:`,
 *   `where:`, loops over prototypes): renders empty;
 * - a function smuggled into the variables is never called;
 * - file tags (`include`, `render`, `layout`, inside `{% liquid %}`, by variable): refused at parse time;
 * - resource exhaustion (huge ranges, empty-body loops, nested loops, string and array doubling, date
 *   padding, `tojson` in a loop, huge output, huge template): stopped by a limit within seconds;
 * - the spec-time checks (`llmStageConfigProblems`, `llmJudgeConfigProblems`) name the template and reason.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ApplicationFailure } from '@temporalio/common';
import type { Agent, AgentRequest, AgentResult } from '../../src/agents/types';
import { ScriptedAgent } from '../../src/agents/scripted';
import type { Json, StageOutput } from '../../src/model/shapes';
import {
  MAX_RENDERED_CHARS,
  MAX_TEMPLATE_CHARS,
  TEMPLATE_RENDER_LIMIT_MS,
  llmJudge,
  llmJudgeConfigProblems,
  llmStage,
  llmStageConfigProblems,
  promptVars,
  renderPrompt,
} from '../../src/pipelines/llm';
import { stageContext, failureOf } from '../support/contexts';

let dir: string;
let marker: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-security-'));
  marker = path.join(dir, 'pwned');
  delete (globalThis as Record<string, unknown>).__treadlePwned;
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/**
 * What an exploit runs when it gets JavaScript: sets a global, then leaves a marker file. (Under nunjucks,
 * `{{ range.constructor("<payload>")() }}` did both.)
 */
const payload = (): string =>
  `global.__treadlePwned = 1; process.mainModule.require('fs').writeFileSync('${marker}', 'x')`;

function expectNoCodeRan(): void {
  expect(existsSync(marker)).toBe(false);
  expect((globalThis as Record<string, unknown>).__treadlePwned).toBeUndefined();
}

/** An agent that records requests and answers like the scripted agent. */
class RecordingAgent implements Agent {
  readonly provider = 'scripted';
  readonly requests: AgentRequest[] = [];
  async run(request: AgentRequest): Promise<AgentResult> {
    this.requests.push(request);
    return new ScriptedAgent({ itemId: 'item-1', stage: 'draft', attempt: 1, input: null, config: undefined }).run(
      request,
    );
  }
}

const INPUT = { text: 'hello', list: [{ name: 'a' }, { name: 'b' }], path: '/etc/passwd' };

function context(config: Json, input: Json = INPUT, upstream: Record<string, Json> = {}) {
  const agent = new RecordingAgent();
  return {
    ctx: { ...stageContext({ stage: 'draft', config, input, upstream }), agent: () => agent },
    requests: agent.requests,
  };
}

/** Renders a prompt as the llm stage would, returning the text the model would get. */
async function promptOf(prompt: string, input: Json = INPUT): Promise<string> {
  const { ctx, requests } = context({ prompt }, input);
  await llmStage(ctx);
  return requests[0]?.messages[0]?.content ?? '';
}

describe('code execution', () => {
  const exploits = (): [string, string][] => [
    ['range.constructor', `{{ range.constructor("${payload()}")() }}`],
    ['cycler.constructor', `{{ cycler.constructor("${payload()}")() }}`],
    ['joiner.constructor', `{{ joiner.constructor("${payload()}")() }}`],
    ['string constructor.constructor', `{{ ''.constructor.constructor("${payload()}")() }}`],
    ['input constructor.constructor', `{{ input.constructor.constructor("${payload()}")() }}`],
    ['set with a call', `{% set x = range.constructor("${payload()}")() %}{{ x }}`],
    ['lipsum globals', `{{ lipsum.__globals__.os.popen('id').read() }}`],
    ['attr filter', `{{ input|attr("constructor")|attr("constructor")("${payload()}")() }}`],
    ['a filter Liquid does not have', '{{ input | attr: "constructor" }}'],
  ];

  it.each(exploits())(
    '%s: refused before the model is called, as a non-retryable InvalidConfig naming the stage',
    async (_name, prompt) => {
      const { ctx, requests } = context({ prompt });
      const failure = await failureOf(() => llmStage(ctx));
      expect(failure).toMatchObject({ type: 'InvalidConfig', nonRetryable: true });
      expect(failure.message).toMatch(
        /^draft: the with: configuration of llm is invalid \(1 problem\): prompt: the prompt template does not parse: .+, line:1, col:\d+$/,
      );
      expect(requests).toEqual([]);
      expectNoCodeRan();
    },
  );

  it.each(exploits())('%s: also refused when rendered directly, as InvalidTemplate', async (_name, template) => {
    const failure = await failureOf(() =>
      renderPrompt(template, promptVars(stageContext({ stage: 'draft', input: INPUT }), null)),
    );
    expect(failure).toMatchObject({ type: 'InvalidTemplate', nonRetryable: true });
    expect(failure.message).toMatch(/^draft: the prompt template is invalid: /);
    expectNoCodeRan();
  });

  it('prototype walking that parses reaches nothing: every probe renders empty', async () => {
    // [template, what it renders]: `map` yields two empty values, `where` finds nothing.
    const probes: [string, string][] = [
      ['{{ input.constructor }}', ''],
      ['{{ input.constructor.constructor }}', ''],
      ['{{ input["constructor"]["constructor"] }}', ''],
      ['{{ input.__proto__ }}', ''],
      ['{{ input.__proto__.constructor }}', ''],
      ['{{ input.text.constructor }}', ''],
      ['{{ input.text.constructor.name }}', ''],
      ['{{ input.list.constructor }}', ''],
      ['{{ input.list.__proto__.map }}', ''],
      ['{{ input.constructor.prototype.toString }}', ''],
      ['{{ upstream.hasOwnProperty }}', ''],
      ['{{ input.toString }}', ''],
      ['{{ input.valueOf }}', ''],
      ['{{ input.list | map: "constructor" | join: "," }}', ','],
      ['{{ input.list | where: "constructor" | size }}', '0'],
      ['{% for k in input.__proto__ %}{{ k }}{% endfor %}', ''],
      ['{% for k in input.constructor %}{{ k }}{% endfor %}', ''],
      [
        '{{ process }}{{ global }}{{ globalThis }}{{ require }}{{ this }}{{ self }}{{ range }}{{ cycler }}{{ joiner }}',
        '',
      ],
      ['{% assign f = input.constructor %}{{ f.constructor }}', ''],
    ];
    const rendered = await promptOf(probes.map(([template]) => `[${template}]`).join(''));
    expect(rendered).toBe(probes.map(([, expected]) => `[${expected}]`).join(''));
    expectNoCodeRan();
  });

  it('a function an implementation put into the variables is never called', () => {
    const vars = {
      ...promptVars(stageContext({ stage: 'draft' }), null),
      danger: () => ((globalThis as Record<string, unknown>).__treadlePwned = 1),
      nested: { danger: () => 'called' },
    };
    expect(renderPrompt('[{{ danger }}][{{ nested.danger }}][{{ nested | tojson }}]', vars)).toBe('[][][{}]');
    expectNoCodeRan();
  });
});

describe('files', () => {
  const fileTags: [string, string][] = [
    ['include', "{% include '/etc/passwd' %}"],
    ['include, relative', "{% include '../../../../../../etc/passwd' %}"],
    ['include by variable', '{% include input.path %}'],
    ['include with a variable', "{% include 'x' with input %}"],
    ['render', "{% render '/etc/passwd' %}"],
    ['layout', "{% layout '/etc/passwd' %}body"],
    ['include inside {% liquid %}', "{% liquid\n  include '/etc/passwd'\n%}"],
  ];

  it.each(fileTags)('%s: refused when the template is parsed, reading nothing', async (_name, prompt) => {
    const tag = /(include|render|layout)/.exec(prompt)![1];
    const { ctx, requests } = context({ prompt });
    const failure = await failureOf(() => llmStage(ctx));
    expect(failure).toMatchObject({ type: 'InvalidConfig', nonRetryable: true });
    expect(failure.message).toContain(
      `prompt: the prompt template does not parse: the ${tag} tag is not available: prompt templates cannot read files`,
    );
    expect(failure.message).not.toMatch(/root:/);
    expect(requests).toEqual([]);
  });
});

describe('resource limits', () => {
  /** Renders through the llm stage and returns the failure, with how long it took. */
  async function limitFailure(
    prompt: string,
    input: Json = INPUT,
    upstream: Record<string, Json> = {},
  ): Promise<{ failure: ApplicationFailure; ms: number }> {
    const { ctx, requests } = context({ prompt }, input, upstream);
    const started = Date.now();
    const failure = await failureOf(() => llmStage(ctx));
    expect(requests).toEqual([]);
    return { failure, ms: Date.now() - started };
  }

  it.each([
    ['a huge range', '{% for i in (1..100000000) %}x{% endfor %}', 'memory alloc limit exceeded'],
    ['a huge range with an empty body', '{% for i in (1..100000000) %}{% endfor %}', 'memory alloc limit exceeded'],
    [
      'string doubling',
      "{% assign s = 'xx' %}{% for i in (1..64) %}{% assign s = s | append: s %}{% endfor %}{{ s | size }}",
      'memory alloc limit exceeded',
    ],
    // Building the arrays takes time too: on a busy machine the clock may stop it first.
    [
      'array doubling',
      "{% assign a = '1,2,3' | split: ',' %}{% for i in (1..64) %}{% assign a = a | concat: a %}{% endfor %}{{ a | size }}",
      '(memory alloc|template render) limit exceeded',
    ],
    ['date padding', "{{ 'now' | date: '%999999999d' }}", 'memory alloc limit exceeded'],
    [
      'replace blow-up',
      "{% assign s = '' | append: 'xxxxxxxxxx' %}{% for i in (1..12) %}{% assign s = s | replace: 'x', s %}{% endfor %}",
      'memory alloc limit exceeded',
    ],
  ])('%s: stopped by a limit', async (_name, prompt, reason) => {
    const { failure, ms } = await limitFailure(prompt);
    expect(failure).toMatchObject({ type: 'InvalidTemplate', nonRetryable: true });
    expect(failure.message).toMatch(new RegExp(`^draft: the prompt template is invalid: ${reason}, line:1, col:\\d+$`));
    expect(ms).toBeLessThan(TEMPLATE_RENDER_LIMIT_MS * 5);
  });

  it.each([
    ['nested loops', '{% for i in (1..5000) %}{% for j in (1..5000) %}x{% endfor %}{% endfor %}'],
    ['nested loops with empty bodies', '{% for i in (1..5000) %}{% for j in (1..5000) %}{% endfor %}{% endfor %}'],
    [
      'nested loops over the input',
      '{% for a in input.list %}{% for i in (1..5000) %}{% for j in (1..5000) %}{{ a.name }}{% endfor %}{% endfor %}{% endfor %}',
    ],
  ])('%s: stopped by the render time limit', async (_name, prompt) => {
    const { failure, ms } = await limitFailure(prompt);
    expect(failure).toMatchObject({ type: 'InvalidTemplate', nonRetryable: true });
    expect(failure.message).toMatch(
      /^draft: the prompt template is invalid: template render limit exceeded, line:1, col:\d+$/,
    );
    expect(ms).toBeGreaterThanOrEqual(TEMPLATE_RENDER_LIMIT_MS - 50);
    expect(ms).toBeLessThan(TEMPLATE_RENDER_LIMIT_MS * 5);
  });

  it('tojson of a large value in a loop is counted against the memory limit', async () => {
    const upstream = { report: { text: 'y'.repeat(1_000_000) } };
    const { failure } = await limitFailure(
      '{% for i in (1..100) %}{{ upstream | tojson }}{% endfor %}',
      INPUT,
      upstream,
    );
    expect(failure.message).toMatch(
      /^draft: the prompt template is invalid: memory alloc limit exceeded, line:1, col:\d+$/,
    );
  });

  it('a rendered prompt longer than the limit is refused', async () => {
    const big = 'z'.repeat(500_000);
    const { failure } = await limitFailure('{% for i in (1..10) %}{{ input.big }}{% endfor %}', { big });
    expect(failure).toMatchObject({ type: 'InvalidTemplate', nonRetryable: true });
    expect(failure.message).toBe(
      `draft: the prompt template is invalid: it rendered 5000000 characters, more than the ${MAX_RENDERED_CHARS} a prompt may have`,
    );
  });

  it('output that outgrows any string is refused, not a crash', async () => {
    const big = 'z'.repeat(1_000_000);
    const { failure } = await limitFailure('{% for i in (1..1000) %}{{ input.big }}{% endfor %}', { big });
    expect(failure).toMatchObject({ type: 'InvalidTemplate', nonRetryable: true });
    expect(failure.message).toMatch(
      /^draft: the prompt template is invalid: (Invalid string length|it rendered \d+ characters)/,
    );
  });

  it('a template longer than the parse limit is refused by the config check', async () => {
    const { failure } = await limitFailure(`{{ input.text }}${'x'.repeat(MAX_TEMPLATE_CHARS)}`);
    expect(failure).toMatchObject({ type: 'InvalidConfig', nonRetryable: true });
    expect(failure.message).toContain('prompt: the prompt template does not parse: parse length limit exceeded');
  });

  it('legitimate prompts with large material and loops render well within the limits', async () => {
    const source = 'word '.repeat(200_000);
    const list = Array.from({ length: 2_000 }, (_, i) => ({ name: `item ${i}` }));
    const rendered = await promptOf(
      '{{ input.source }}{% for item in input.list %}- {{ item.name }}\n{% endfor %}{{ input.list | tojson | size }}',
      { source, list },
    );
    expect(rendered.startsWith(source)).toBe(true);
    expect(rendered).toContain('- item 1999\n');
  });
});

describe('spec-time checks', () => {
  it('name the template and the reason, for the stage and the judge', () => {
    expect(
      llmStageConfigProblems({
        prompt: "{% include '/etc/passwd' %}",
        system: '{{ x | nosuch }}',
        conversation: '{{ item_id',
      }),
    ).toEqual([
      'prompt: the prompt template does not parse: the include tag is not available: prompt templates cannot read files, line:1, col:1',
      'system: the system template does not parse: undefined filter: nosuch, line:1, col:1',
      'conversation: the conversation template does not parse: output "{{ item_id" not closed, line:1, col:1',
    ]);
    expect(
      llmStageConfigProblems({
        prompt: 'Summarise {{ input.text }}{% if feedback %}{{ feedback.summary }}{% endif %}',
      }),
    ).toEqual([]);
    expect(
      llmJudgeConfigProblems({ criteria: [{ name: 'a', description: 'b' }], prompt: '{{ range.constructor("x")() }}' }),
    ).toEqual([expect.stringMatching(/^prompt: the prompt template does not parse: .+, line:1, col:\d+$/)]);
  });

  it('the judge refuses an exploit prompt before calling the model', async () => {
    const output: StageOutput = { outcome: 'completed', artefact: { text: 'x' } };
    const { ctx, requests } = context({
      criteria: [{ name: 'a', description: 'b' }],
      prompt: `{{ cycler.constructor("${payload()}")() }}`,
    });
    const failure = await failureOf(() => llmJudge({ ...ctx, output }));
    expect(failure).toMatchObject({
      type: 'InvalidConfig',
      nonRetryable: true,
      message: expect.stringContaining('the with: configuration of llm-judge is invalid'),
    });
    expect(requests).toEqual([]);
    expectNoCodeRan();
  });
});
