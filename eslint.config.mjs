// ESLint flat config. Workflow files must stay deterministic (DESIGN.md): no Node built-ins, no activity,
// client, worker or SDK-client imports, no nondeterministic globals beyond the sandbox's own.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';
import { importX } from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

export default tseslint.config(
  {
    ignores: [
      'lib/**',
      'node_modules/**',
      'coverage/**',
      'bench/results/**',
      '**/*.js',
      '**/*.mjs',
      // The review inbox's browser script is hand-written JS: linted below with browser globals.
      '!src/ui/assets/*.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      '@typescript-eslint/no-require-imports': 'error',
    },
  },
  {
    files: ['src/ui/assets/*.js'],
    languageOptions: { sourceType: 'script', ecmaVersion: 2022, globals: { ...globals.browser } },
  },
  {
    // A cycle between our modules hides which one is the foundation (the rule skips type-only imports).
    files: ['src/**/*.ts', 'examples/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      ...importX.flatConfigs.typescript.settings,
      'import-x/resolver-next': [createTypeScriptImportResolver()],
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }] },
  },
  {
    files: [
      'src/workflows/**/*.ts',
      'src/workflow-kit/**/*.ts',
      'src/engine/**/*.ts',
      'src/model/**/*.ts',
      'src/kinds/*/spec.ts',
      'src/kinds/*/shapes.ts',
      'src/kinds/*/routes.ts',
      'src/kinds/*/termination.ts',
      'src/kinds/*/workflow.ts',
      'src/kinds/*/stage.ts',
      'src/kinds/*/kind.ts',
      'src/kinds/*/messages.ts',
      'src/kinds/workflow-table.ts',
      'src/kinds/fan-out/engine-1-4.ts',
      // The TDD node's workflow-side parts, over which `kinds/tdd/workflow.ts` is a shell.
      'src/kinds/tdd/node-run.ts',
      'src/kinds/tdd/node-view.ts',
      'src/kinds/tdd/merge-handshake.ts',
      'src/kinds/tdd/human-review.ts',
      'src/kinds/tdd/node-publishing.ts',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.map((name) => ({
            name,
            message: 'Workflow code must be deterministic: no Node built-ins in workflows, engine or model.',
          })),
          patterns: [
            {
              group: ['@temporalio/activity', '@temporalio/client', '@temporalio/worker', '@temporalio/testing'],
              message: 'Workflow code may import only @temporalio/workflow and @temporalio/common.',
            },
            {
              group: [
                '**/activities',
                '**/activities/**',
                '**/client',
                '**/worker',
                '**/cli/**',
                '**/agents/**',
                '**/server/**',
                '**/git',
              ],
              message: 'Workflow code must not import side-effecting modules.',
            },
            {
              group: ['@anthropic-ai/*', 'yaml', 'commander'],
              message: 'No SDK clients or I/O libraries in workflow code.',
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'No process access in workflow code.' },
        { name: 'setTimeout', message: 'Use sleep() from @temporalio/workflow.' },
        { name: 'setInterval', message: 'Use sleep() in a loop from @temporalio/workflow.' },
        { name: 'require', message: 'No dynamic requires in workflow code.' },
      ],
      'no-restricted-properties': [
        'error',
        {
          object: 'Math',
          property: 'random',
          message: 'Use uuid4()/the sandbox, never Math.random() directly in engine code.',
        },
      ],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
