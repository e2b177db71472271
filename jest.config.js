/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } },
    ],
  },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  // The cluster suite's own tests run in `npm run test:cluster` (jest.cluster.config.js).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/cluster/'],
  modulePathIgnorePatterns: ['<rootDir>/lib/'],
  setupFiles: ['<rootDir>/test/support/quiet-runtime.ts'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  testTimeout: 60_000,
};
