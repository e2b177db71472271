/**
 * The cluster suite (`npm run test:cluster`): tests that must hold on a self-hosted Temporal server on PostgreSQL
 * (SQL visibility, several server processes), run against one (test/cluster/global-setup.ts) on top of the
 * dev-server suite. The fault tests in test/cluster/ start clusters of their own.
 */
const base = require('./jest.config');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  globalSetup: '<rootDir>/test/cluster/global-setup.ts',
  testPathIgnorePatterns: [],
  testMatch: [
    // Every stage kind end to end.
    'work-item',
    'documents',
    'triage',
    'fan-out',
    'loops',
    'tdd-tree',
    'approvals',
    'human-stage',
    'cancel',
    // The inbox's listing and its delta on SQL visibility; the decisions' publication.
    'decisions',
    'decision-publication',
    // What the CLI's exit codes say, and what a client hears when no worker answers.
    'exit-codes',
    'no-worker',
    // Worker Deployment Versioning: builds v1 and v2 side by side, v1's items finish on v1, v1 drains.
    'worker-versioning',
  ]
    .map((name) => `<rootDir>/test/integration/${name}.test.ts`)
    // Two "machines" on one server; workers SIGKILLed mid-stage and mid-TDD-tree; the server's own faults.
    .concat(['two-machines', 'worker-crash', 'lost-worker'].map((name) => `<rootDir>/test/fault/${name}.test.ts`))
    .concat(['<rootDir>/test/cluster/**/*.test.ts']),
};
