/**
 * A secured Temporal endpoint for tests: nginx (Debian's package, which `.ci/run` installs) terminating TLS in
 * front of the run's dev server with `grpc_pass`, on two ports: one that wants an API key
 * (`authorization: Bearer <key>`; no key is answered 401, a wrong one 403, as proxies in front of Temporal
 * do), one that wants a client certificate (mTLS) its CA signed and has not revoked, and one that lets the
 * connection check through and refuses every other call with gRPC PERMISSION_DENIED, as Temporal does to a
 * key without access to the namespace. Certificates come from
 * the openssl CLI: a CA, a server certificate for localhost and 127.0.0.1, a client certificate, a revoked
 * one (listed in the CA's CRL), and a second CA that signed nothing the server presents.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../src/server/dev-server';

/** The files a client may need, by role. */
export interface TestCertificates {
  ca: string;
  /** A CA that did not sign the server's certificate. */
  wrongCa: string;
  clientCert: string;
  clientKey: string;
  /** A client certificate the CA signed and then revoked (the mTLS port's CRL lists it). */
  revokedCert: string;
  revokedKey: string;
  /** The CA's certificate revocation list. */
  crl: string;
}

/** The running proxy. */
export interface TlsProxy {
  /** TLS, and every request must carry `apiKey`. */
  apiKeyAddress: string;
  /** TLS with a client certificate the test CA signed. */
  mtlsAddress: string;
  /** TLS; GetSystemInfo (the connection check) reaches the server, every other call is PERMISSION_DENIED. */
  deniedAddress: string;
  apiKey: string;
  certs: TestCertificates;
  dir: string;
  stop(): Promise<void>;
}

function nginxBinary(): string {
  for (const candidate of [process.env.NGINX, '/usr/sbin/nginx', '/usr/bin/nginx']) {
    if (candidate && existsSync(candidate)) return candidate;
  }
  throw new Error('nginx is not installed; .ci/run installs it (apt-get install nginx-light), or set NGINX');
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/**
 * A CA, a server certificate (DNS localhost, IP 127.0.0.1), a client certificate, a revoked one with the CA's
 * CRL, and an unrelated CA.
 */
export function makeCertificates(dir: string): TestCertificates {
  writeFileSync(
    path.join(dir, 'ext.cnf'),
    [
      '[server]',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
      'basicConstraints=CA:FALSE',
      'keyUsage=digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      '[client]',
      'basicConstraints=CA:FALSE',
      'keyUsage=digitalSignature,keyEncipherment',
      'extendedKeyUsage=clientAuth',
      '',
    ].join('\n'),
  );
  const ca = (name: string, subject: string) =>
    openssl(
      [
        ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2'],
        ...['-keyout', `${name}.key`, '-out', `${name}.crt`, '-subj', subject],
        ...['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
      ],
      dir,
    );
  const leaf = (name: string, subject: string, extensions: string) => {
    openssl(
      ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject],
      dir,
    );
    openssl(
      [
        ...['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial'],
        ...['-out', `${name}.crt`, '-days', '2', '-extfile', 'ext.cnf', '-extensions', extensions],
      ],
      dir,
    );
  };
  ca('ca', '/CN=Treadle test CA');
  ca('wrong-ca', '/CN=Some other CA');
  leaf('server', '/CN=localhost', 'server');
  leaf('client', '/CN=treadle-worker', 'client');
  leaf('revoked', '/CN=revoked-worker', 'client');
  // `openssl ca` keeps its revocations in a database of its own; only the CRL it writes is used.
  writeFileSync(path.join(dir, 'index.txt'), '');
  writeFileSync(path.join(dir, 'crlnumber'), '01\n');
  writeFileSync(
    path.join(dir, 'ca.cnf'),
    [
      '[ca]',
      'default_ca = test',
      '[test]',
      'database = index.txt',
      'crlnumber = crlnumber',
      'default_md = sha256',
      'default_crl_days = 2',
      '',
    ].join('\n'),
  );
  const caTool = (args: string[]) =>
    openssl(['ca', '-config', 'ca.cnf', '-keyfile', 'ca.key', '-cert', 'ca.crt', ...args], dir);
  caTool(['-revoke', 'revoked.crt']);
  caTool(['-gencrl', '-out', 'ca.crl']);
  return {
    ca: path.join(dir, 'ca.crt'),
    wrongCa: path.join(dir, 'wrong-ca.crt'),
    clientCert: path.join(dir, 'client.crt'),
    clientKey: path.join(dir, 'client.key'),
    revokedCert: path.join(dir, 'revoked.crt'),
    revokedKey: path.join(dir, 'revoked.key'),
    crl: path.join(dir, 'ca.crl'),
  };
}

function nginxConfig(
  dir: string,
  upstream: string,
  ports: { apiKey: number; mtls: number; denied: number },
  apiKey: string,
): string {
  const tls = (port: number) => [
    `    listen 127.0.0.1:${port} ssl http2;`,
    `    ssl_certificate ${dir}/server.crt;`,
    `    ssl_certificate_key ${dir}/server.key;`,
    // Workers long-poll for minutes and make many calls on one connection.
    '    grpc_read_timeout 300s;',
    '    grpc_send_timeout 300s;',
    '    keepalive_requests 1000000;',
    '    keepalive_timeout 600s;',
  ];
  return [
    'worker_processes 1;',
    'error_log stderr error;',
    `pid ${dir}/nginx.pid;`,
    ...(process.getuid?.() === 0 ? ['user root;'] : []),
    'events { worker_connections 1024; }',
    'http {',
    '  access_log off;',
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${dir}/${t};`),
    '  http2_max_concurrent_streams 1000;',
    // No key: 401 (who are you?); a wrong one: 403 (not you), as a proxy checking keys in front of Temporal answers.
    `  map $http_authorization $key { "" none; "Bearer ${apiKey}" ok; default wrong; }`,
    '  server {',
    ...tls(ports.apiKey),
    '    location / {',
    '      if ($key = none) { return 401; }',
    '      if ($key = wrong) { return 403; }',
    `      grpc_pass grpc://${upstream};`,
    '    }',
    '  }',
    '  server {',
    ...tls(ports.mtls),
    `    ssl_client_certificate ${dir}/ca.crt;`,
    `    ssl_crl ${dir}/ca.crl;`,
    '    ssl_verify_client on;',
    `    location / { grpc_pass grpc://${upstream}; }`,
    '  }',
    '  server {',
    ...tls(ports.denied),
    `    location = /temporal.api.workflowservice.v1.WorkflowService/GetSystemInfo { grpc_pass grpc://${upstream}; }`,
    // A trailers-only gRPC answer: the status in the headers, no message.
    '    location / {',
    '      default_type application/grpc;',
    '      add_header grpc-status 7 always;',
    '      add_header grpc-message "Request unauthorized." always;',
    '      return 200;',
    '    }',
    '  }',
    '}',
    '',
  ].join('\n');
}

async function listening(port: number, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nginx did not listen on 127.0.0.1:${port} within ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts nginx in front of `upstream` (the dev server's host:port); `stop()` ends it. */
export async function startTlsProxy(upstream: string): Promise<TlsProxy> {
  const binary = nginxBinary();
  const dir = mkdtempSync(path.join(process.env.TREADLE_TEST_DIR ?? os.tmpdir(), 'tls-proxy-'));
  const certs = makeCertificates(dir);
  for (const t of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(path.join(dir, t));
  const apiKey = `test-key-${Math.random().toString(36).slice(2, 12)}`;
  const ports = { apiKey: await freePort(), mtls: await freePort(), denied: await freePort() };
  const conf = path.join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConfig(dir, upstream, ports, apiKey));
  const child: ChildProcess = spawn(binary, ['-p', dir, '-c', conf, '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await Promise.race([
      Promise.all(Object.values(ports).map((port) => listening(port, 10_000))),
      exited.then(() => {
        throw new Error(`nginx exited at start: ${stderr.trim()}`);
      }),
    ]);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return {
    apiKeyAddress: `localhost:${ports.apiKey}`,
    mtlsAddress: `localhost:${ports.mtls}`,
    deniedAddress: `localhost:${ports.denied}`,
    apiKey,
    certs,
    dir,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGQUIT');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000).unref())]);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
    },
  };
}
