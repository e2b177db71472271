/**
 * `treadle dev` (a dev server and a worker in one process) and `treadle demo` (the same, plus the
 * review-demo work item with review prompts in the terminal).
 */
import type { Connection } from '@temporalio/client';
import { DefaultLogger, Runtime, type Worker } from '@temporalio/worker';
import { createInterface } from 'node:readline/promises';
import { TreadleClient } from '../client';
import { defaultReviewer } from '../client/errors';
import { loadConfig } from '../config';
import { connectClient, localServerSettings, temporalSettings, type TemporalSettings } from '../config/connection';
import type { Json, ReviewOutcome } from '../model/shapes';
import type { PendingReview, WorkItemState } from '../model/state';
import { findPipeline, readJsonFile, readPipelineFile } from '../pipelines/catalog';
import { startDevServer, type DevServer } from '../server/dev-server';
import { temporalAnswers } from '../server/probes';
import { ensureSearchAttributes } from '../server/search-attributes';
import { connectWorker, createWorker } from '../worker';
import { bundledRegistry, bundledWorkerOptions } from './bundled-examples';
import { exitCodeOf } from './exit-codes';
import { renderEvent, renderStatus } from './render';
import { inboxSettings } from '../ui/options';
import { loginUrl } from '../ui/address';
import { serveInbox } from '../ui/serve';
import { interrupted } from './interrupted';

interface DevOptions {
  port: number;
  uiPort: number;
  db: string;
  /** The review inbox's port; `inbox: false` (`--no-inbox`) does not start it. */
  inboxPort: number;
  inbox: boolean;
}

interface Running {
  address: string;
  /** How to reach the server the worker uses (a configured one, or the local dev server). */
  temporal: TemporalSettings;
  uiUrl?: string;
  /** The review inbox's address, when it runs. */
  inboxUrl?: string;
  worker: Worker;
  stop(): Promise<void>;
}

/** Starts (or reuses) the server and starts a worker; nothing is left running if a step fails. */
async function bringUp(opts: DevOptions): Promise<Running> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const config = loadConfig();
  const configured = temporalSettings();
  const namespace = configured.namespace;
  let server: DevServer | undefined;
  let target: TemporalSettings = configured;
  let uiUrl: string | undefined;
  const local = `127.0.0.1:${opts.port}`;
  if (configured.configured) {
    say(`Using the Temporal server at ${configured.summary}; no server started.`);
  } else if (await temporalAnswers(local)) {
    target = localServerSettings(local, namespace);
    uiUrl = `http://localhost:${opts.uiPort}`;
    say(`A Temporal server already answers at ${local}; using it.`);
  } else {
    server = await startDevServer({ port: opts.port, uiPort: opts.uiPort, dbFile: opts.db, namespace, progress: say });
    target = localServerSettings(server.address, namespace);
    uiUrl = server.uiUrl;
    say(`Temporal dev server: ${server.address} (SQLite ${server.dbFile}, binary ${server.binary})`);
  }
  const address = target.address;
  try {
    if (!server) {
      const added = await withClientConnection(target, (c) => ensureSearchAttributes(c, namespace));
      if (added.length) say(`Registered search attributes ${added.join(', ')} in namespace ${namespace}.`);
    }
    const connection = await connectWorker(target);
    const worker = await createWorker({
      connection,
      namespace,
      taskQueue: config.taskQueue,
      ...bundledWorkerOptions(),
    });
    const running = worker.run().catch(async (error: unknown) => {
      // The worker stopped on its own (server gone, fatal error): say so and take the server down too.
      say(`treadle: the worker stopped: ${(error as Error).message}`);
      await server?.stop();
      process.exit(1);
    });
    say(`Worker: task queue ${config.taskQueue}, namespace ${namespace}`);
    if (uiUrl) say(`Web UI: ${uiUrl}/namespaces/${namespace}/workflows`);
    const inbox = opts.inbox ? await startInbox(target, opts.inboxPort, uiUrl) : undefined;
    let stopped: Promise<void> | undefined;
    return {
      address,
      temporal: target,
      ...(uiUrl ? { uiUrl } : {}),
      ...(inbox ? { inboxUrl: inbox.url } : {}),
      worker,
      stop: () =>
        (stopped ??= (async () => {
          await inbox?.close();
          if (worker.getState() === 'RUNNING') worker.shutdown();
          await running;
          await connection.close();
          await server?.stop();
        })()),
    };
  } catch (error) {
    await server?.stop();
    throw error;
  }
}

/**
 * The review inbox next to the dev server, over a client of its own. The first run makes a token for
 * $TREADLE_REVIEWER / $USER and prints the address that signs in with it; the inbox not starting (port taken,
 * a tokens file it cannot read) is a warning, not a reason to stop the dev server.
 */
async function startInbox(
  temporal: TemporalSettings,
  port: number,
  uiUrl: string | undefined,
): Promise<{ url: string; close(): Promise<void> } | undefined> {
  const client = await TreadleClient.connect({ temporal });
  try {
    const settings = inboxSettings({ ...(uiUrl ? { TREADLE_WEB_UI_URL: uiUrl } : {}), ...process.env });
    const reviewer = defaultReviewer();
    const inbox = await serveInbox(client, { port, settings, firstReviewer: reviewer });
    if (inbox.newToken) {
      say(`Review inbox: ${loginUrl(inbox.url, inbox.newToken)}`);
      say(`  (signs you in as ${reviewer}; the token is in ${inbox.tokensFile} as a hash and is not shown again)`);
    } else say(`Review inbox: ${inbox.url} (reviewer tokens: ${inbox.tokensFile}; treadle ui token add <name>)`);
    return {
      url: inbox.url,
      close: async () => {
        await inbox.close();
        await client.close();
      },
    };
  } catch (error) {
    await client.close();
    say(`Review inbox not started: ${(error as Error).message} (--inbox-port <port> or --no-inbox)`);
    return undefined;
  }
}

async function withClientConnection<T>(
  settings: TemporalSettings,
  fn: (connection: Connection) => Promise<T>,
): Promise<T> {
  const connection = await connectClient(settings);
  try {
    return await fn(connection);
  } finally {
    await connection.close();
  }
}

function say(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** `treadle dev`. */
export async function runDev(opts: DevOptions): Promise<void> {
  const running = await bringUp(opts);
  say('Ready. Press Ctrl-C to stop.');
  await interrupted();
  say('Stopping the worker and the server...');
  await running.stop();
  say('Stopped.');
}

/** `treadle demo`. */
export async function runDemo(opts: DevOptions & { exit?: boolean }): Promise<void> {
  const running = await bringUp(opts);
  let client: TreadleClient | undefined;
  const stopOnSignal = interrupted().then(async () => {
    say('\nStopping the worker and the server...');
    await client?.close();
    await running.stop();
    process.exit(130);
  });
  void stopOnSignal;
  try {
    client = await TreadleClient.connect({ temporal: running.temporal, known: bundledRegistry().names() });
    const entry = findPipeline('review-demo');
    const { id } = await client.start(readPipelineFile(entry.specFile), readJsonFile(entry.sampleInputFile));
    say(`\nStarted work item ${id} on pipeline review-demo.`);
    if (running.uiUrl)
      say(`Follow it in the Web UI: ${running.uiUrl}/namespaces/${running.temporal.namespace}/workflows/${id}`);
    say('');
    let seen = 0;
    for (;;) {
      const state = await client.watch(id, (e) => process.stdout.write(`${renderEvent(e)}\n`), {
        untilReview: true,
        afterSeq: seen,
        patient: true,
      });
      seen = state.eventCount;
      if (state.status === 'completed' || state.status === 'failed') {
        process.stdout.write(`\n${renderStatus(state)}\n`);
        // With --exit the demo ends with the item, so its exit code says how the item ended.
        process.exitCode = exitCodeOf(state.status);
        break;
      }
      process.stdout.write(`\n${renderStatus(state)}\n\n`);
      if (running.inboxUrl) say(`Answer here, or decide in the review inbox: ${running.inboxUrl}`);
      await answerReviews(client, state);
    }
    if (!opts.exit) {
      say(
        `\nDone. The server keeps running so you can read the history${running.uiUrl ? ` at ${running.uiUrl}` : ''}; try "treadle status ${id}" in another terminal. Ctrl-C stops.`,
      );
      await stopOnSignal;
    }
  } finally {
    await client?.close();
    await running.stop();
  }
}

/** Asks in the terminal when it is interactive; otherwise waits for an answer from another terminal. */
async function answerReviews(client: TreadleClient, state: WorkItemState): Promise<void> {
  if (!process.stdin.isTTY) {
    say('Answer from another terminal (see the commands above); waiting...');
    await waitUntilAnswered(client, state);
    return;
  }
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    for (const review of state.pendingReviews) await promptOne(rl, client, state.id, review);
  } finally {
    rl.close();
  }
}

async function promptOne(
  rl: ReturnType<typeof createInterface>,
  client: TreadleClient,
  id: string,
  review: PendingReview,
): Promise<void> {
  for (;;) {
    const answer = (
      await rl.question(`Review ${review.stage}: [a]pprove, [r]eject, [e]dit (enter JSON), [v]iew output? `)
    )
      .trim()
      .toLowerCase();
    let outcome: ReviewOutcome | undefined;
    if (answer === 'a' || answer === 'approve') outcome = { kind: 'approve' };
    else if (answer === 'r' || answer === 'reject')
      outcome = { kind: 'reject', reason: (await rl.question('Reason: ')).trim() || 'rejected in the demo' };
    else if (answer === 'e' || answer === 'edit') {
      const text = await rl.question('Edited artefact (one line of JSON): ');
      try {
        outcome = { kind: 'approve_with_edits', artefact: JSON.parse(text) as Json, note: 'edited in the demo' };
      } catch (error) {
        say(`not JSON: ${(error as Error).message}`);
        continue;
      }
    } else if (answer === 'v' || answer === 'view') {
      const state = await client.getState(id);
      const attempts = state.stages[review.stage]?.attempts ?? [];
      for (const a of attempts)
        process.stdout.write(
          `attempt ${a.attempt}: ${JSON.stringify(await client.readArtefact(a.artefact))}\n  verdict: ${JSON.stringify(a.verdict ?? null)}\n`,
        );
      continue;
    } else continue;
    try {
      const done = await client.review(id, review.stage, outcome, defaultReviewer());
      say(`${done.stage}: ${done.outcome.replace(/_/g, ' ')} by ${done.reviewer}\n`);
      return;
    } catch (error) {
      say((error as Error).message);
      return;
    }
  }
}

async function waitUntilAnswered(client: TreadleClient, state: WorkItemState): Promise<void> {
  const waiting = new Set(state.pendingReviews.map((r) => r.stage));
  for (;;) {
    await new Promise((r) => setTimeout(r, 500));
    const now = await client.getState(state.id);
    if (!now.pendingReviews.some((r) => waiting.has(r.stage))) return;
  }
}
