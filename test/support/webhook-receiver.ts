/**
 * A local webhook receiver for the notification tests (node:http on 127.0.0.1): it records every POST (path,
 * headers, raw body), answers with the status the test sets, and can be taken down and brought back on its port.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One POST as received. */
export interface ReceivedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** When it arrived (ms since the epoch). */
  at: number;
}

/** The receiver (see the module's comment). */
export class WebhookReceiver {
  readonly received: ReceivedRequest[] = [];
  /** The status answered: 200 unless a test says otherwise. */
  status = 200;
  private server: Server | undefined;
  port = 0;

  /** Starts listening (on the port it had before, once it has one). */
  async up(): Promise<void> {
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        this.received.push({
          path: request.url ?? '',
          headers: request.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          at: Date.now(),
        });
        response.writeHead(this.status, { 'content-type': 'text/plain' });
        response.end(this.status < 300 ? 'ok' : 'not now');
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops listening: connections are refused until {@link up}. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** The POSTs received on `path`. */
  on(path: string): ReceivedRequest[] {
    return this.received.filter((r) => r.path === path);
  }
}
