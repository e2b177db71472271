/**
 * Is a Temporal server answering at an address? Each probe is independent of every earlier one:
 *
 * - a TCP connect first, so a closed port costs no gRPC channel at all;
 * - then a gRPC channel with its own subchannel pool (`grpc.use_local_subchannel_pool`), always closed.
 *
 * Why: @grpc/grpc-js keeps subchannels in a process-wide pool keyed by address and channel options. A
 * failed `Connection.connect` is never closed, so its channel keeps reconnecting that shared subchannel with
 * exponential backoff (up to 120 s); every later connection with the same options gets the subchannel in
 * backoff and fails until the timer runs out, although the server answers a fresh process at once. A probe
 * made before a minutes-long `go install` made the first run's readiness check fail for over a minute.
 */
import { Connection } from '@temporalio/client';
import { connect as tcpConnect } from 'node:net';

/** gRPC options for probes: a private subchannel, and no retries (the caller's loop retries). */
const PROBE_CHANNEL_ARGS = { 'grpc.use_local_subchannel_pool': 1 } as const;

/** The result of one probe: an answer, or the reason there was none, in one line. */
export type ProbeResult = { ok: true } | { ok: false; reason: string };

/** Splits `host:port` (IPv6 in brackets) into its parts. */
export function splitAddress(address: string): { host: string; port: number } {
  const match = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (!match) throw new Error(`"${address}" is not a host:port address`);
  return { host: match[1]!, port: Number(match[2]) };
}

/** Resolves true when something accepts TCP connections at host:port within `timeoutMs`. */
export function portAccepts(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host, port });
    const done = (open: boolean): void => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * One probe: the port accepts TCP, then the frontend answers `DescribeNamespace` for `namespace` (so the
 * server has finished starting, not only opened its port) within `timeoutMs`.
 */
export async function probeTemporal(address: string, namespace: string, timeoutMs = 2_000): Promise<ProbeResult> {
  const { host, port } = splitAddress(address);
  if (!(await portAccepts(host, port, timeoutMs))) return { ok: false, reason: `nothing listens on ${address} yet` };
  const deadline = Date.now() + timeoutMs;
  const connection = Connection.lazy({
    address,
    connectTimeout: timeoutMs,
    channelArgs: PROBE_CHANNEL_ARGS,
    interceptors: [],
  });
  try {
    await connection.ensureConnected();
    await connection.withDeadline(deadline, () => connection.workflowService.describeNamespace({ namespace }));
    return { ok: true };
  } catch (error) {
    return { ok: false, reason: oneLine((error as Error).message) };
  } finally {
    await connection.close();
  }
}

/** True when a Temporal server answers at `address` (any namespace: `GetSystemInfo`). */
export async function temporalAnswers(address: string, timeoutMs = 2_000): Promise<boolean> {
  const { host, port } = splitAddress(address);
  if (!(await portAccepts(host, port, timeoutMs))) return false;
  const connection = Connection.lazy({
    address,
    connectTimeout: timeoutMs,
    channelArgs: PROBE_CHANNEL_ARGS,
    interceptors: [],
  });
  try {
    await connection.ensureConnected();
    return true;
  } catch {
    return false;
  } finally {
    await connection.close();
  }
}

function oneLine(text: string): string {
  return text.split('\n')[0]!.trim();
}
