/**
 * Connection settings as every Temporal tool reads them (`@temporalio/envconfig`): the environment over a
 * `temporal.toml` profile, with one-line errors that name the setting for a missing profile or file.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { refusedCredentials, serverTrouble, temporalSettings } from '../../src/config/connection';
import { type TreadleError } from '../../src/client/errors';

const dir = mkdtempSync(path.join(os.tmpdir(), 'treadle-connection-'));
const noFile = { TEMPORAL_CONFIG_FILE: path.join(dir, 'absent.toml') };
const ca = path.join(dir, 'ca.pem');
writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n');
const toml = path.join(dir, 'temporal.toml');
writeFileSync(
  toml,
  [
    '[profile.default]',
    'address = "default.example:7233"',
    '',
    '[profile.prod]',
    'address = "prod.example:7233"',
    'namespace = "prod-ns"',
    'api_key = "secret-key"',
    '',
    '[profile.prod.tls]',
    `server_ca_cert_path = "${ca}"`,
    '',
    '[profile.broken]',
    'address = "broken.example:7233"',
    '[profile.broken.tls]',
    `client_cert_path = "${path.join(dir, 'missing.crt')}"`,
    `client_key_path = "${path.join(dir, 'missing.key')}"`,
    '',
  ].join('\n'),
);

function configErrorOf(env: NodeJS.ProcessEnv): TreadleError {
  try {
    temporalSettings(env);
  } catch (error) {
    return error as TreadleError;
  }
  throw new Error('temporalSettings accepted the settings');
}

it('defaults to a local plaintext server when nothing is configured', () => {
  const s = temporalSettings({ ...noFile });
  expect(s).toMatchObject({
    address: 'localhost:7233',
    namespace: 'default',
    configured: false,
    options: { address: 'localhost:7233' },
  });
  expect(s.options.tls).toBeUndefined();
  expect(s.summary).toBe('localhost:7233, namespace default (plaintext)');
});

it('reads TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE, and treats empty variables as unset', () => {
  expect(temporalSettings({ ...noFile, TEMPORAL_ADDRESS: 'a.example:1', TEMPORAL_NAMESPACE: 'ns' })).toMatchObject({
    address: 'a.example:1',
    namespace: 'ns',
    configured: true,
  });
  expect(temporalSettings({ ...noFile, TEMPORAL_ADDRESS: '', TEMPORAL_NAMESPACE: '' })).toMatchObject({
    address: 'localhost:7233',
    namespace: 'default',
    configured: false,
  });
});

it('an API key turns TLS on, and the summary never shows the key', () => {
  const s = temporalSettings({ ...noFile, TEMPORAL_ADDRESS: 'cloud.example:7233', TEMPORAL_API_KEY: 'k-123' });
  expect(s.options.apiKey).toBe('k-123');
  expect(s.options.tls).toBe(true);
  expect(s.summary).toBe('cloud.example:7233, namespace default (TLS, API key)');
  expect(s.summary).not.toContain('k-123');
});

it('reads the default profile of temporal.toml, then the one TEMPORAL_PROFILE names; variables override it', () => {
  expect(temporalSettings({ TEMPORAL_CONFIG_FILE: toml })).toMatchObject({
    address: 'default.example:7233',
    configured: true,
  });
  const prod = temporalSettings({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod' });
  expect(prod).toMatchObject({ address: 'prod.example:7233', namespace: 'prod-ns', profile: 'prod' });
  expect(prod.options.apiKey).toBe('secret-key');
  const tls = prod.options.tls as { serverRootCACertificate?: Uint8Array };
  expect(Buffer.from(tls.serverRootCACertificate ?? []).toString()).toContain('not checked here');
  expect(prod.summary).toBe('prod.example:7233, namespace prod-ns (profile prod, TLS, API key)');
  expect(
    temporalSettings({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod', TEMPORAL_NAMESPACE: 'other' }).namespace,
  ).toBe('other');
});

it('a client certificate makes it mTLS', () => {
  const s = temporalSettings({
    ...noFile,
    TEMPORAL_ADDRESS: 'x:1',
    TEMPORAL_TLS_CLIENT_CERT_DATA: 'cert',
    TEMPORAL_TLS_CLIENT_KEY_DATA: 'key',
  });
  expect(s.summary).toBe('x:1, namespace default (mTLS)');
});

it('names the setting when the profile, a file or an option cannot work', () => {
  const missingProfile = configErrorOf({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'staging' });
  expect(missingProfile.code).toBe('config');
  expect(missingProfile.message).toBe(
    `TEMPORAL_PROFILE=staging: no such profile in ${toml} (set TEMPORAL_CONFIG_FILE or TEMPORAL_PROFILE)`,
  );

  const missingCa = path.join(dir, 'nope.pem');
  expect(configErrorOf({ ...noFile, TEMPORAL_TLS_SERVER_CA_CERT_PATH: missingCa }).message).toBe(
    `cannot read ${missingCa} (no such file), named by TEMPORAL_TLS_SERVER_CA_CERT_PATH`,
  );

  const fromProfile = configErrorOf({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'broken' });
  expect(fromProfile.message).toMatch(
    /^cannot read .*missing\.(crt|key) \(no such file\), named by the profile's tls\./,
  );

  const malformed = path.join(dir, 'bad.toml');
  writeFileSync(malformed, '[profile.default\naddress = ');
  const parse = configErrorOf({ TEMPORAL_CONFIG_FILE: malformed });
  expect(parse.code).toBe('config');
  expect(parse.message).toContain(`the Temporal config file ${malformed}: `);

  expect(configErrorOf({ ...noFile, TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'true' }).message).toContain(
    'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION is not supported',
  );
});

it('reads a refused credential from a gRPC status only, naming the credential sent', () => {
  const key = temporalSettings({ ...noFile, TEMPORAL_ADDRESS: 'cloud.example:7233', TEMPORAL_API_KEY: 'k-123' });
  // grpc-js: the SDK's ServiceError with the status as its cause.
  const grpcJs = Object.assign(new Error('Failed to describe workflow'), {
    cause: Object.assign(new Error('7 PERMISSION_DENIED: Request unauthorized.'), {
      code: 7,
      details: 'Request unauthorized.',
    }),
  });
  expect(refusedCredentials(grpcJs, key)).toMatchObject({
    code: 'config',
    message:
      "cannot use the Temporal server at cloud.example:7233: it refused the API key (PERMISSION_DENIED: Request unauthorized.): check TEMPORAL_API_KEY (or the profile's api_key); it must grant access to namespace default",
  });
  // The Rust core (a worker): the status's Debug text, or tonic's description of the code.
  const core = new Error(
    'Namespace default was not found or otherwise could not be described: Status { code: Unauthenticated, message: "Invalid API key", metadata: MetadataMap { headers: {} }, source: None }',
  );
  expect(refusedCredentials(core, key)?.message).toContain(
    "it refused the API key (UNAUTHENTICATED: Invalid API key): check TEMPORAL_API_KEY (or the profile's api_key)",
  );
  // No gRPC status: a workflow's failure that quotes an HTTP 403 (say, from a model's API) is not Temporal's refusal.
  expect(refusedCredentials(new Error('stage draft failed: 403 Forbidden from api.example'), key)).toBeUndefined();
  expect(refusedCredentials(Object.assign(new Error('5 NOT_FOUND: x'), { code: 5 }), key)).toBeUndefined();
});

it('reads a server that cannot do a call now from a gRPC status in the causes, and nothing else', () => {
  const settings = temporalSettings({ ...noFile, TEMPORAL_ADDRESS: '127.0.0.1:7233' });
  // The SDK's QueryError or ServiceError, with grpc-js's status as its cause (a server whose database is down).
  const query = Object.assign(new Error('Failed to query Workflow'), {
    cause: Object.assign(new Error('14 UNAVAILABLE: GetWorkflowExecution operation failed'), {
      code: 14,
      details: 'GetWorkflowExecution operation failed',
    }),
  });
  expect(serverTrouble(query, settings)).toMatchObject({
    code: 'server_unavailable',
    message:
      'the Temporal server at 127.0.0.1:7233 could not do this now (UNAVAILABLE: GetWorkflowExecution operation failed); it may be restarting or unable to reach its database: run the command again once it answers (a decision it took before failing is not taken twice)',
  });
  const late = Object.assign(new Error('4 DEADLINE_EXCEEDED: context deadline exceeded'), { code: 4, details: '' });
  expect(serverTrouble(late, settings)?.message).toContain('could not do this now (DEADLINE_EXCEEDED: 4 DEADLINE');
  // Refusals that say something about the call, not the server's health, stay as they were.
  expect(serverTrouble(Object.assign(new Error('5 NOT_FOUND: x'), { code: 5 }), settings)).toBeUndefined();
  expect(serverTrouble(Object.assign(new Error('3 INVALID_ARGUMENT: x'), { code: 3 }), settings)).toBeUndefined();
  expect(serverTrouble(new Error('stage draft failed: 503 from api.example'), settings)).toBeUndefined();
});
