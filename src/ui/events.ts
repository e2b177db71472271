/**
 * The inbox's live stream (`GET /api/events`, server-sent events) fed by the decision index's subscribers:
 * `added` (each new or changed decision's row, rendered and escaped on the server), `removed` (keys), `counts`
 * (after every change), a heartbeat comment every 15 s, and `reset` when a reconnecting client missed changes.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DecisionIndex, IndexEvent } from './decision-index';
import { decisionRow } from './pages/inbox';

const HEARTBEAT_MS = 15_000;

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
 * Streams the index's changes to one client until it disconnects. A `Last-Event-ID` other than the current
 * version means changes were missed (the index keeps no history): the client is told to `reset` (reload).
 */
export function streamEvents(
  index: DecisionIndex,
  request: FastifyRequest,
  reply: FastifyReply,
  headers: Record<string, string>,
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
  const unsubscribe = index.subscribe((event) => res.write(framesFor(index, event, Date.now())));
  const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), HEARTBEAT_MS);
  heartbeat.unref();
  const end = (): void => {
    clearInterval(heartbeat);
    unsubscribe();
  };
  request.raw.on('close', end);
  res.on('close', end);
}
