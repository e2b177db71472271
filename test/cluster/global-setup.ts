/**
 * The cluster suite's setup (`npm run test:cluster`, jest.cluster.config.js): the same run as test/global-setup.ts,
 * but its tests connect to a self-hosted Temporal server on PostgreSQL 15 (src/server/cluster.ts), one process per
 * service, instead of the dev server. Builds the server once into the cache when it is missing; downloads nothing.
 */
import path from 'node:path';
import { startCluster } from '../../src/server/cluster';
import { prepareRun, TEST_SERVER_DYNAMIC_CONFIG, type RunSelection } from '../global-setup';

export default async function clusterSetup(globalConfig?: RunSelection): Promise<void> {
  await prepareRun(globalConfig, async (dir) => {
    const cluster = await startCluster({
      dir: path.join(dir, 'cluster'),
      layout: 'per-service',
      settings: { dynamicConfig: { ...TEST_SERVER_DYNAMIC_CONFIG } },
      progress: (m) => process.stderr.write(`[cluster-setup] ${m}\n`),
    });
    return { address: cluster.address, stop: () => cluster.stop() };
  });
}
