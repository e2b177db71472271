/**
 * A worker's deployment settings (src/config/deployment.ts) and the SDK options they become
 * (src/worker/deployment.ts). Cases: nothing set is an unversioned worker; a name and a build id make a
 * versioned one, work items pinned by default; `auto-upgrade` in any spelling; a build id without a name, a name
 * without a build id, a behaviour alone, an unknown behaviour and a ":" in a name are `config` errors (exit 2);
 * options given to `createWorker` win over the environment, and null turns versioning off.
 */
import { deploymentFromEnv } from '../../src/config/deployment';
import { deploymentOf, versioningOptions } from '../../src/worker/deployment';

const configError = (message: string) => expect.objectContaining({ code: 'config', message });

describe('deploymentFromEnv', () => {
  it('is undefined when neither the deployment nor the build id is set', () => {
    expect(deploymentFromEnv({})).toBeUndefined();
    expect(deploymentFromEnv({ TREADLE_DEPLOYMENT: ' ', TREADLE_BUILD_ID: '' })).toBeUndefined();
  });

  it('reads a deployment and a build id, work items pinned by default', () => {
    expect(deploymentFromEnv({ TREADLE_DEPLOYMENT: 'treadle', TREADLE_BUILD_ID: ' 2026.12.7 ' })).toEqual({
      name: 'treadle',
      buildId: '2026.12.7',
      workItems: 'PINNED',
    });
  });

  it.each(['auto-upgrade', 'AUTO_UPGRADE', 'Auto-Upgrade'])('reads TREADLE_VERSIONING_BEHAVIOR=%s', (value) => {
    const env = { TREADLE_DEPLOYMENT: 'treadle', TREADLE_BUILD_ID: 'b1', TREADLE_VERSIONING_BEHAVIOR: value };
    expect(deploymentFromEnv(env)?.workItems).toBe('AUTO_UPGRADE');
  });

  it('refuses half a setting, naming what to set', () => {
    expect(() => deploymentFromEnv({ TREADLE_BUILD_ID: 'b1' })).toThrow(
      configError(
        'a build id (TREADLE_BUILD_ID=b1) needs the deployment it belongs to: set TREADLE_DEPLOYMENT (the same name on every worker of this Treadle)',
      ),
    );
    expect(() => deploymentFromEnv({ TREADLE_DEPLOYMENT: 'treadle' })).toThrow(
      configError(
        "the deployment treadle (TREADLE_DEPLOYMENT) needs this worker's build id: set TREADLE_BUILD_ID (a release tag or commit, new for every build)",
      ),
    );
    expect(() => deploymentFromEnv({ TREADLE_VERSIONING_BEHAVIOR: 'pinned' })).toThrow(
      configError(
        'TREADLE_VERSIONING_BEHAVIOR applies only to a versioned worker: set TREADLE_DEPLOYMENT and TREADLE_BUILD_ID too',
      ),
    );
  });

  it('refuses an unknown behaviour and a ":" in a name', () => {
    const env = { TREADLE_DEPLOYMENT: 'treadle', TREADLE_BUILD_ID: 'b1' };
    expect(() => deploymentFromEnv({ ...env, TREADLE_VERSIONING_BEHAVIOR: 'sticky' })).toThrow(
      configError('TREADLE_VERSIONING_BEHAVIOR must be "pinned" or "auto-upgrade", got "sticky"'),
    );
    expect(() => deploymentFromEnv({ ...env, TREADLE_DEPLOYMENT: 'a:b' })).toThrow(
      configError('TREADLE_DEPLOYMENT must be at most 255 characters without ":" or surrounding spaces, got "a:b"'),
    );
  });
});

describe('a worker’s deployment options', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('are none for an unversioned worker', () => {
    delete process.env.TREADLE_DEPLOYMENT;
    delete process.env.TREADLE_BUILD_ID;
    expect(versioningOptions(deploymentOf({}))).toEqual({});
  });

  it('declare the version with the work items’ behaviour as the default', () => {
    expect(versioningOptions(deploymentOf({ deployment: { name: 'treadle', buildId: 'b2' } }))).toEqual({
      workerDeploymentOptions: {
        useWorkerVersioning: true,
        version: { deploymentName: 'treadle', buildId: 'b2' },
        defaultVersioningBehavior: 'PINNED',
      },
    });
  });

  it('take the options given over the environment, and null for none', () => {
    Object.assign(process.env, { TREADLE_DEPLOYMENT: 'env', TREADLE_BUILD_ID: 'e1' });
    expect(deploymentOf({})).toEqual({ name: 'env', buildId: 'e1', workItems: 'PINNED' });
    expect(deploymentOf({ deployment: { name: 'given', buildId: 'g1', workItems: 'AUTO_UPGRADE' } })).toEqual({
      name: 'given',
      buildId: 'g1',
      workItems: 'AUTO_UPGRADE',
    });
    expect(deploymentOf({ deployment: null })).toBeUndefined();
    expect(() => deploymentOf({ deployment: { name: 'given', buildId: '' } })).toThrow(
      configError(
        "the deployment given (TREADLE_DEPLOYMENT) needs this worker's build id: set TREADLE_BUILD_ID (a release tag or commit, new for every build)",
      ),
    );
  });
});
