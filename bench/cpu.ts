/**
 * CPU time spent by this process (both workers and the clients) and by the dev server process, so a
 * throughput gap can be split into "more worker work" and "more server work" per item; and, from the same /proc,
 * a process's resident memory.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { round } from './statistics';

/** CPU milliseconds consumed so far. `serverMs` and `machineMs` are null where /proc is not available. */
export interface CpuSnapshot {
  processMs: number;
  serverMs: number | null;
  /** Busy time of all cores together, whoever used them. */
  machineMs: number | null;
}

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const parsed = Number(out.stdout?.trim());
    ticksPerSecond = out.status === 0 && Number.isFinite(parsed) && parsed > 0 ? parsed : 100;
  }
  return ticksPerSecond;
}

/** utime + stime of a process from /proc/<pid>/stat, in milliseconds; null where /proc cannot tell. */
export function processCpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 overall.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) / clockTicks()) * 1000;
  } catch {
    return null;
  }
}

/** A process's resident set (VmRSS) in MiB, or null once it has exited. */
export function residentMiB(pid: number): number | null {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? round(Number(match[1]) / 1024, 1) : null;
  } catch {
    return null;
  }
}

/** Busy (non-idle, non-iowait) time of all cores from /proc/stat, in milliseconds. */
function machineBusyMs(): number | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
    return (
      (((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) / clockTicks()) * 1000
    );
  } catch {
    return null;
  }
}

/** Reads the counters now. */
export function cpuSnapshot(serverPids: readonly number[] | number | undefined): CpuSnapshot {
  const own = process.cpuUsage();
  const pids = serverPids === undefined ? [] : typeof serverPids === 'number' ? [serverPids] : serverPids;
  const perServerProcess = pids.map(processCpuMs);
  return {
    processMs: (own.user + own.system) / 1000,
    // A server of several processes (a cluster, with PostgreSQL's): their sum.
    serverMs:
      pids.length === 0 || perServerProcess.includes(null)
        ? null
        : perServerProcess.reduce<number>((a, b) => a + b!, 0),
    machineMs: machineBusyMs(),
  };
}

/** CPU used between two snapshots. */
export function cpuSpent(from: CpuSnapshot, to: CpuSnapshot): CpuSnapshot {
  const delta = (a: number | null, b: number | null) => (a === null || b === null ? null : b - a);
  return {
    processMs: to.processMs - from.processMs,
    serverMs: delta(from.serverMs, to.serverMs),
    machineMs: delta(from.machineMs, to.machineMs),
  };
}

/** CPU the rest of the machine (other jobs) used during a span: machine busy time minus ours and the server's. */
export function otherCpuMs(spent: CpuSnapshot): number | null {
  return spent.machineMs === null || spent.serverMs === null
    ? null
    : Math.max(0, spent.machineMs - spent.processMs - spent.serverMs);
}

/**
 * CPU milliseconds used so far by each of this process's threads (`/proc/self/task`), keyed by name and
 * thread id; the main thread is `main`. Node names its worker threads (the SDK's workflow threads) and V8's
 * helper threads all `node`, so the id tells them apart. Empty where /proc cannot tell. For the profiling
 * harness: it splits a worker's CPU into the main thread (activities, clients), the workflow thread, the
 * SDK's Rust core (`tokio-runtime-w`) and the rest.
 */
export function threadCpuMs(): Map<string, number> {
  const byThread = new Map<string, number>();
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return byThread;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const name =
        Number(tid) === process.pid ? 'main' : `${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))}#${tid}`;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      byThread.set(name, ((Number(fields[11]) + Number(fields[12])) / clockTicks()) * 1000);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return byThread;
}
