/**
 * Finds the Temporal CLI binary that runs the dev server (DESIGN.md "The Temporal server"), in order:
 * `TEMPORAL_CLI`, `temporal` on PATH, the project cache (`~/.cache/treadle/bin`, or `TREADLE_CACHE_DIR`),
 * then `go install github.com/temporalio/cli/cmd/temporal@v1.5.1` into that cache when Go is available.
 * The caller falls back to the SDK's own download when this returns nothing and downloads are allowed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The CLI release we build: the newest tag whose go.mod has no `replace`, so `go install` works. */
export const TEMPORAL_CLI_MODULE = 'github.com/temporalio/cli/cmd/temporal@v1.5.1';

/** Where a binary was found, for messages. */
export interface ResolvedBinary {
  path: string;
  source: 'TEMPORAL_CLI' | 'PATH' | 'cache' | 'go install';
}

/** Every place that was tried, for the error when none worked. */
export class TemporalCliNotFoundError extends Error {
  constructor(readonly tried: string[]) {
    super(
      [
        'no Temporal CLI binary could be found or built. Tried:',
        ...tried.map((t) => `  - ${t}`),
        'Fix one of: set TEMPORAL_ADDRESS to use a running server; set TEMPORAL_CLI to a temporal binary;',
        `put temporal on PATH; install Go and let Treadle run go install ${TEMPORAL_CLI_MODULE};`,
        'or use docker compose up (see docs/deploy.md).',
      ].join('\n'),
    );
    this.name = 'TemporalCliNotFoundError';
  }
}

/** The cache folder for the built binary. */
export function cacheBinDir(): string {
  return process.env.TREADLE_CACHE_DIR
    ? path.join(process.env.TREADLE_CACHE_DIR, 'bin')
    : path.join(os.homedir(), '.cache', 'treadle', 'bin');
}

/** True when `file` is an executable file. */
export function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first executable called `name` on PATH. */
export function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    if (executable(candidate)) return candidate;
  }
  return undefined;
}

/** Options for {@link resolveTemporalCli}. */
export interface ResolveOptions {
  /** Build with `go install` when nothing else is found (default true). */
  allowBuild?: boolean;
  /** Progress messages (default: stderr). */
  progress?: (message: string) => void;
}

/**
 * Returns the binary to run, building it into the cache when needed; `tried` lists what was looked at.
 * Returns `undefined` (never throws for absence) so callers can try the SDK download next.
 */
export async function resolveTemporalCli(
  options: ResolveOptions = {},
): Promise<{ binary?: ResolvedBinary; tried: string[] }> {
  const progress = options.progress ?? ((m: string) => process.stderr.write(`${m}\n`));
  const tried: string[] = [];
  const fromEnv = process.env.TEMPORAL_CLI;
  if (fromEnv) {
    if (executable(fromEnv)) return { binary: { path: fromEnv, source: 'TEMPORAL_CLI' }, tried };
    tried.push(`TEMPORAL_CLI=${fromEnv} (not an executable file)`);
  } else tried.push('TEMPORAL_CLI (not set)');

  const found = onPath('temporal');
  if (found) return { binary: { path: found, source: 'PATH' }, tried };
  tried.push('temporal on PATH (not found)');

  const cached = path.join(cacheBinDir(), 'temporal');
  if (executable(cached)) return { binary: { path: cached, source: 'cache' }, tried };
  tried.push(`${cached} (not there)`);

  if (options.allowBuild === false) {
    tried.push('go install (not allowed here)');
    return { tried };
  }
  const go = onPath('go');
  if (!go) {
    tried.push('go install (go is not on PATH)');
    return { tried };
  }
  progress(
    `Building the Temporal CLI once with "go install ${TEMPORAL_CLI_MODULE}" into ${cacheBinDir()} (takes a few minutes; later runs reuse it)...`,
  );
  const result = await goInstall(go, [TEMPORAL_CLI_MODULE], 'the Temporal CLI', progress);
  if (result.ok && executable(cached)) {
    progress(`Built ${cached}`);
    return { binary: { path: cached, source: 'go install' }, tried };
  }
  tried.push(
    `go install ${TEMPORAL_CLI_MODULE} (failed: ${'error' in result ? result.error : 'no binary after the build'})`,
  );
  return { tried };
}

/**
 * `go install <modules>` into the cache folder with the machine's own Go (`GOTOOLCHAIN=local`, no cgo), reporting
 * every 25 modules downloaded and every 30 s of building as `what`.
 */
export function goInstall(
  go: string,
  modules: string[],
  what: string,
  progress: (m: string) => void,
): Promise<{ ok: true } | { ok: false; error: string }> {
  mkdirSync(cacheBinDir(), { recursive: true });
  return new Promise((resolve) => {
    const child = spawn(go, ['install', ...modules], {
      env: {
        ...process.env,
        GOBIN: cacheBinDir(),
        GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? 'local',
        CGO_ENABLED: '0',
        GOFLAGS: process.env.GOFLAGS ?? '-buildvcs=false',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let tail = '';
    let downloaded = 0;
    const onOutput = (chunk: Buffer): void => {
      const text = chunk.toString();
      tail = (tail + text).slice(-2_000);
      const downloads = text.split('\n').filter((l) => l.startsWith('go: downloading')).length;
      if (downloads > 0) {
        downloaded += downloads;
        if (downloaded % 25 < downloads) progress(`  go: ${downloaded} modules downloaded...`);
      }
    };
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    const started = Date.now();
    const ticker = setInterval(
      () => progress(`  still building ${what} (${Math.round((Date.now() - started) / 1000)}s)...`),
      30_000,
    );
    child.on('error', (error) => {
      clearInterval(ticker);
      resolve({ ok: false, error: error.message });
    });
    child.on('exit', (code) => {
      clearInterval(ticker);
      resolve(
        code === 0
          ? { ok: true }
          : { ok: false, error: `exit ${code}: ${tail.trim().split('\n').slice(-3).join(' | ')}` },
      );
    });
  });
}

/** The version line of a binary, or undefined when it does not run. */
export function cliVersion(binary: string): string | undefined {
  const out = spawnSync(binary, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  return out.status === 0 ? out.stdout.trim() : undefined;
}

/** True when the cache already holds a binary (so no build will happen). */
export function cachedBinaryExists(): boolean {
  return existsSync(path.join(cacheBinDir(), 'temporal'));
}
