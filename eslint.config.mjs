// ESLint flat config. Workflow files must stay deterministic (DESIGN.md): no Node built-ins, no activity,
// client, worker or SDK-client imports, no nondeterministic globals beyond the sandbox's own. Imports point down
// the layers (zones below; docs/architecture.md); test/unit/lint-zones.test.ts proves both bite.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';
import { importX } from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

/** Workflow code: everything the workflow bundle may contain. */
const WORKFLOW_CODE = [
  'src/workflows/**/*.ts',
  'src/workflow-kit/**/*.ts',
  'src/engine/**/*.ts',
  'src/model/**/*.ts',
  'src/kinds/**/*.ts',
  // Model capacity (issue 39): the limits, the pure allocator and the limiter workflow; its worker side is not.
  'src/capacity/**/*.ts',
  // Notifications (issue 40): the settings, payloads and the notifier workflow; its worker side is not.
  'src/notify/**/*.ts',
];
/** A kind's worker side and client answers: side effects allowed, never in the workflow bundle. */
const KIND_CLIENTS = ['src/kinds/*/client.ts', 'src/kinds/*/client-*.ts'];
// `src/kinds/index.ts` is the worker-side table of kinds (their activities and config checks).
const NOT_WORKFLOW_CODE = [
  'src/kinds/*/worker/**',
  ...KIND_CLIENTS,
  'src/kinds/index.ts',
  'src/capacity/worker/**',
  'src/notify/worker/**',
];

/**
 * The layers (DESIGN.md "Layout"): model ← engine ← workflow-kit ← kinds ← workflows ← worker; config below
 * them; client, cli and ui on top. Each zone forbids `target` to import `from` (paths from the repository root).
 * `kindClient` lets a kind's client answers use the client's helpers.
 */
const CLIENT = ['./src/client'];
const TOP = [...CLIENT, './src/cli', './src/ui'];
function layerZones({ kindClient = false } = {}) {
  return [
    {
      target: './src/model',
      from: './src',
      except: ['./model'],
      message: 'src/model imports nothing of ours: it is the bottom layer.',
    },
    {
      target: './src/engine',
      from: './src',
      except: ['./engine', './model'],
      message: 'src/engine imports only src/model.',
    },
    {
      target: './src/workflow-kit',
      from: './src',
      except: ['./workflow-kit', './engine', './model'],
      message: 'src/workflow-kit imports only src/model and src/engine.',
    },
    {
      target: './src/capacity',
      from: './src',
      except: ['./capacity', './model'],
      message: 'src/capacity imports only src/model: the limiter is its own layer beside the engine.',
    },
    {
      target: './src/notify',
      from: ['./src/workflows', './src/kinds', ...TOP],
      message: 'Notifications sit below the work item (which announces to them) and the client, CLI and inbox.',
    },
    {
      target: './src/workflows',
      from: './src/kinds',
      except: ['./workflow-table.ts'],
      message: 'The work item reaches the kinds only through their table (src/kinds/workflow-table.ts).',
    },
    {
      target: './src/kinds',
      // A kind's client answers (client.ts) sit in the client layer: they may use the client's helpers.
      from: ['./src/workflows', ...(kindClient ? [] : CLIENT), './src/cli', './src/ui'],
      message: 'A kind imports nothing from the work item (src/workflows) or the client, CLI or inbox above it.',
    },
    {
      target: ['./src/config', './src/activities', './src/storage', './src/agents'],
      from: ['./src/workflows', ...TOP],
      message: 'Config, activities, storage and agents sit below the workflows and the client, CLI and inbox.',
    },
  ];
}
/**
 * Where `require` may load a module lazily (docs/architecture.md "Lazy loading"): a folder's `lazy-modules.ts`,
 * a typed table of `() => require(…)` for what start time (CLI, client, worker) or an upward edge keeps out of
 * that folder's import graph; a `<module>-lazy.ts`, one module's lazy front; and the optional peer packages'
 * loader; a kind's worker row (src/kinds/<kind>/worker/kind.ts). Anywhere else, `require` is an error.
 */
const LAZY_LOADERS = [
  'src/**/lazy-modules.ts',
  'src/**/*-lazy.ts',
  'src/config/optional-packages.ts',
  // A kind's worker row: the CLI reads the table for the kinds' names, the row loads its schema and activities on use.
  'src/kinds/*/worker/kind.ts',
];

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
    files: LAZY_LOADERS,
    rules: { '@typescript-eslint/no-require-imports': 'off' },
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
    // Imports point down (DESIGN.md "Layout"; docs/architecture.md draws the graph).
    files: ['src/**/*.ts'],
    rules: { 'import-x/no-restricted-paths': ['error', { zones: layerZones() }] },
  },
  {
    files: KIND_CLIENTS,
    rules: { 'import-x/no-restricted-paths': ['error', { zones: layerZones({ kindClient: true }) }] },
  },
  {
    // One file, one subject: a file that grows past 500 lines holds two.
    files: ['src/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 500, skipBlankLines: false, skipComments: false }] },
  },
  {
    // A function that needs more than 80 lines to read is two.
    files: ['src/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: false, skipComments: false }] },
  },
  {
    // Workflow code by convention, not by a list (DESIGN.md "Layout"): the work item, the shared workflow kit,
    // engine and model, and every file of a kind's folder except its worker side (`worker/`) and its client
    // answers (`client.ts`, `client-*.ts`).
    files: WORKFLOW_CODE,
    ignores: NOT_WORKFLOW_CODE,
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
