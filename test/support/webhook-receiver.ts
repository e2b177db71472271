/**
 * A local webhook receiver for the notification tests (node:http on 127.0.0.1): it records every POST (path,
 * headers, raw body), answers with the status the test sets, can hold its answers (a POST stays in flight), and can
 * be taken down and brought back on its port.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eventually } from './harness';

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
  /** While set, POSTs are recorded when their body arrives but answered only once it resolves. */
  private held: Promise<void> | undefined;
  port = 0;

  /**
   * Holds every answer from now on until the returned function is called: the sender's POST stays in flight (a
   * sender that dies meanwhile never gets its answer).
   */
  hold(): () => void {
    let release = (): void => undefined;
    this.held = new Promise<void>((resolve) => (release = resolve));
    return () => {
      this.held = undefined;
      release();
    };
  }

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
        const answer = (): void => {
          if (request.socket.destroyed) return; // the sender went away while its answer was held
          response.writeHead(this.status, { 'content-type': 'text/plain' });
          response.end(this.status < 300 ? 'ok' : 'not now');
        };
        if (this.held) void this.held.then(answer);
        else answer();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /**
   * The JSON announcements received on `path` whose fields equal `fields` (e.g. `{ key, event }` or
   * `{ itemId, event }`), with when each arrived.
   */
  announcements(path: string, fields: Record<string, unknown>): { body: Record<string, unknown>; at: number }[] {
    return this.on(path)
      .map((r) => ({ body: JSON.parse(r.body) as Record<string, unknown>, at: r.at }))
      .filter(({ body }) => Object.entries(fields).every(([name, value]) => body[name] === value));
  }

  /** Waits until at least `count` announcements on `path` match `fields` ({@link announcements}); resolves with them. */
  arrived(
    path: string,
    fields: Record<string, unknown>,
    count = 1,
  ): Promise<{ body: Record<string, unknown>; at: number }[]> {
    return eventually(
      async () => {
        const got = this.announcements(path, fields);
        return got.length >= count ? got : undefined;
      },
      90_000,
      `${count} announcement(s) ${JSON.stringify(fields)} on ${path}`,
    );
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
