import { applyOverrides, combineOverrides, overriddenStages, settingOverride } from '../../src/model/spec-overrides';

const spec = {
  name: 'p',
  token_budget: 100,
  stages: [
    { name: 'draft', run: 'llm', with: { prompt: 'a', model: 'm1' } },
    { name: 'check', run: 'scripted', depends_on: ['draft'], retry_budget: { max_attempts: 3 } },
  ],
};

describe('spec overrides', () => {
  it('reads stage.key.path=value settings, values as JSON when they parse', () => {
    expect(settingOverride('draft.with.model=m2')).toEqual({ stages: { draft: { with: { model: 'm2' } } } });
    expect(settingOverride('check.retry_budget.max_attempts=5')).toEqual({
      stages: { check: { retry_budget: { max_attempts: 5 } } },
    });
    expect(settingOverride('draft.with.prompt=a=b')).toEqual({ stages: { draft: { with: { prompt: 'a=b' } } } });
    expect(settingOverride('draft.with.flags=[1,2]')).toEqual({ stages: { draft: { with: { flags: [1, 2] } } } });
  });

  it('refuses a setting without a stage, a key or a value', () => {
    for (const bad of ['draft=1', 'draft.with', '.with=1', 'draft..x=1'])
      expect(() => settingOverride(bad)).toThrow(`--set takes stage.key=value`);
  });

  it('merges objects key by key, replaces the rest, and removes keys set to null', () => {
    const overrides = combineOverrides([
      settingOverride('draft.with.model=m2'),
      {
        token_budget: 500,
        stages: { check: { retry_budget: { max_attempts: 1 } }, draft: { with: { prompt: null } } },
      },
    ]);
    const applied = applyOverrides(spec, overrides);
    expect(applied).toEqual({
      ok: true,
      spec: {
        name: 'p',
        token_budget: 500,
        stages: [
          { name: 'draft', run: 'llm', with: { model: 'm2' } },
          { name: 'check', run: 'scripted', depends_on: ['draft'], retry_budget: { max_attempts: 1 } },
        ],
      },
    });
    expect(spec.stages[0]!.with).toEqual({ prompt: 'a', model: 'm1' });
    expect(overriddenStages(overrides).sort()).toEqual(['check', 'draft']);
  });

  it('lists every problem: unknown stages, settings that are not objects, renames', () => {
    const applied = applyOverrides(spec, {
      stages: { nope: { x: 1 }, draft: 3 as never, check: { name: 'other' } },
    });
    expect(applied).toEqual({
      ok: false,
      problems: [
        'overrides: no stage named "nope" (the stages: draft, check)',
        'overrides: stages.draft must be an object of settings',
        'overrides: stages.check cannot rename it',
      ],
    });
    expect(applyOverrides('p', {})).toEqual({
      ok: false,
      problems: ['the pipeline spec is not an object with a list of stages'],
    });
  });
});
