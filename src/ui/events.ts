/**
 * The inbox's live stream (`GET /api/events`, server-sent events) fed by the decision index's subscribers:
 * `added` (each new or changed decision's row, rendered and escaped on the server), `removed` (keys), `counts`
 * (after every change), a heartbeat comment every 15 s, `reset` when a reconnecting client missed changes, and
 * `ended` (then the stream closes) once its reviewer is no longer signed in.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DecisionIndex, IndexEvent } from './decision-index';
import { decisionRow } from './pages/inbox';

const HEARTBEAT_MS = 15_000;
/**
 * How often an idle stream asks whether its reviewer is still signed in (a stat of the tokens file). Every
 * frame asks first as well, so nothing is sent after a sign-out or a token's removal; this bounds how long the
 * page goes on believing it is live.
 */
const SESSION_CHECK_MS = 2_000;
/** What the page shows when its stream ends because the reviewer is no longer signed in. */
const ENDED_MESSAGE =
  'Your session ended (signed out, or your token was removed or replaced): nothing new arrives. Sign in again.';

/** One SSE frame; data is JSON on one line, so no newline inside it can split the frame. */
function sseFrame(event: string, data: unknown, id?: number): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Frames already built: the index hands every subscriber the same event object, so each change renders once. */
const built = new WeakMap<IndexEvent, string>();

/** The frames a client hears for one index change, built once however many clients are connected. */
export function framesFor(index: DecisionIndex, event: IndexEvent, now: number): string {
  let frames = built.get(event);
  if (frames === undefined) {
    frames = buildFrames(index, event, now);
    built.set(event, frames);
  }
  return frames;
}

function buildFrames(index: DecisionIndex, event: IndexEvent, now: number): string {
  const frames: string[] = [];
  if (event.added.length > 0) {
    const rows = event.added.map((d) => ({ key: d.key, html: decisionRow(d, now).value }));
    frames.push(sseFrame('added', { rows }, event.version));
  }
  if (event.removed.length > 0) frames.push(sseFrame('removed', { keys: event.removed }, event.version));
  frames.push(sseFrame('counts', index.query({}, { limit: 1 }).counts, event.version));
  return frames.join('');
}

/**
 * Streams the index's changes to one client until it disconnects or `signedIn` says its reviewer no longer is
 * (checked before every frame and every {@link SESSION_CHECK_MS}): then it sends `ended` and closes. A
 * `Last-Event-ID` other than the current version means changes were missed (the index keeps no history): the
 * client is told to `reset` (reload).
 */
export function streamEvents(
  index: DecisionIndex,
  request: FastifyRequest,
  reply: FastifyReply,
  headers: Record<string, string>,
  signedIn: () => boolean,
): void {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8', connection: 'keep-alive' });
  const last = request.headers['last-event-id'];
  if (typeof last === 'string' && last !== String(index.version)) {
    res.write(sseFrame('reset', { version: index.version }, index.version));
  } else {
    res.write(`retry: 3000\nid: ${index.version}\n\n`);
  }
  /** Writes `frames` while the reviewer is signed in; else says why and closes the stream. */
  const send = (frames: () => string): void => {
    if (res.writableEnded) return;
    if (signedIn()) {
      const text = frames();
      if (text) res.write(text);
    } else res.end(sseFrame('ended', { message: ENDED_MESSAGE }));
  };
  const unsubscribe = index.subscribe((event) => send(() => framesFor(index, event, Date.now())));
  const heartbeat = setInterval(() => send(() => ': heartbeat\n\n'), HEARTBEAT_MS);
  const sessionCheck = setInterval(() => send(() => ''), SESSION_CHECK_MS);
  heartbeat.unref();
  sessionCheck.unref();
  const end = (): void => {
    clearInterval(heartbeat);
    clearInterval(sessionCheck);
    unsubscribe();
  };
  request.raw.on('close', end);
  res.on('close', end);
}
