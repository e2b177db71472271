/**
 * Content-addressed blob store (DESIGN.md principle 4): large artefacts live here and only a
 * `sha256:<hex>` reference enters the workflow history. The default store is a folder of files; the
 * S3-compatible one (`s3-blob-store.ts`) serves workers on several machines.
 */
import { createHash, randomUUID } from 'node:crypto';
import { link, mkdir, open, readFile, readdir, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { homeLocation } from '../config/home';
import { load } from './lazy-modules';
import type { Artefact, BlobRef, Json } from '../model/shapes';

// The schemas (zod) load on the first artefact checked, not with the store: a client that only lists or reads
// state (`treadle status`, `reviews`) never needs them (issue 26 §5, CLI start).
/** `isBlobRef` of src/model/shapes.ts, loading the schemas on its first call. */
export const isBlobRef = (value: unknown): value is BlobRef => load.shapes().isBlobRef(value);

/**
 * Where blobs live; implement it to put them in S3, GCS, a database... Blobs are immutable and addressed by
 * their sha256; names (e.g. a conversation id) are the only mutable state, and change by compare-and-swap.
 */
export interface BlobStore {
  /** Stores bytes under their sha256 and returns the reference; storing the same bytes twice is a no-op. */
  put(bytes: Buffer, mediaType: string, summary: string): Promise<BlobRef>;
  /** Reads the bytes behind a reference; throws {@link BlobNotFoundError} when absent. */
  get(ref: string): Promise<Buffer>;
  /** Points a name at a reference, whatever it pointed at (last writer wins; prefer {@link compareAndSetName}). */
  setName(name: string, ref: string): Promise<void>;
  /** The reference a name points at, or undefined. */
  getName(name: string): Promise<string | undefined>;
  /**
   * Points `name` at `next` only if it points at `expected` now (`undefined`: only if it points nowhere), and
   * says whether it did. Atomic across processes and machines sharing the store: of concurrent callers that
   * expect the same value, at most one gets `true`; the others re-read and try again.
   */
  compareAndSetName(name: string, expected: string | undefined, next: string): Promise<boolean>;
  /**
   * Every stored blob, with its size and when it was stored (`treadle blobs gc`). Optional: a store without it
   * cannot be collected, only bounded by its own means (an S3 lifecycle rule, say).
   */
  list?(): AsyncIterable<StoredBlob>;
  /** Deletes a blob; deleting a missing one is not an error. Optional, with {@link list}. */
  delete?(ref: string): Promise<void>;
  /** The references every name points at now: garbage collection keeps them. Optional, with {@link list}. */
  namedRefs?(): AsyncIterable<string>;
}

/** A blob as a store lists it. */
export interface StoredBlob {
  ref: string;
  bytes: number;
  /** When it was stored (or last stored again: the same bytes put twice). */
  modified: Date;
}

/** `sha256:<hex>` → `<hex>`; throws on anything else. */
export function blobHex(ref: string): string {
  const match = /^sha256:([0-9a-f]{64})$/.exec(ref);
  if (!match) throw new Error(`not a blob reference: ${ref}`);
  return match[1]!;
}

/**
 * The blob behind a reference is not in the store. `settings` names what chose the store, since the usual cause
 * is a CLI and a worker that use different ones.
 */
export class BlobNotFoundError extends Error {
  constructor(
    readonly ref: string,
    where: string,
    settings?: string,
  ) {
    super(`blob ${ref} not found in ${where}${settings ? ` (${settings})` : ''}`);
    this.name = 'BlobNotFoundError';
  }
}

export { DEFAULT_BLOB_THRESHOLD_BYTES } from './defaults';

/** What a missing blob in a folder store says about where the folder comes from. */
const FILE_STORE_SETTINGS = 'TREADLE_BLOB_DIR; the workers and the CLI must share it, or use TREADLE_BLOB_STORE=s3';

/**
 * Blobs as files `<dir>/<first two hex>/<rest>`, written atomically. A name is a folder of numbered versions
 * `<dir>/pointers/<sha256 of name>/<n>`, the highest one current. A compare-and-swap that read version `n`
 * creates `n+1` with link(2), which fails if the file exists, so of two writers (in any processes on any
 * machines sharing the folder over a filesystem with POSIX link semantics) exactly one wins. Versions are
 * never deleted: deleting one could let a slow writer recreate it and "win" behind the current version.
 */
export class FileBlobStore implements BlobStore {
  /** The folder, absolute. */
  readonly dir: string;

  /** A store in `dir` (relative: to the working directory); default `TREADLE_BLOB_DIR`, else `<TREADLE_HOME>/blobs`. */
  constructor(dir: string = homeLocation('TREADLE_BLOB_DIR')) {
    this.dir = path.resolve(dir);
  }

  async put(bytes: Buffer, mediaType: string, summary: string): Promise<BlobRef> {
    const hex = createHash('sha256').update(bytes).digest('hex');
    const file = this.fileFor(hex);
    const exists = await stat(file).then(
      (s) => s.size === bytes.length,
      () => false,
    );
    if (exists) {
      // Stored again: its time is now, so garbage collection's grace period covers this put as it does a new blob.
      const now = new Date();
      await utimes(file, now, now).catch(() => undefined);
    } else {
      await mkdir(path.dirname(file), { recursive: true });
      const temp = `${file}.${randomUUID()}.tmp`;
      await writeFile(temp, bytes);
      await rename(temp, file);
    }
    return { ref: `sha256:${hex}`, bytes: bytes.length, mediaType, summary };
  }

  async get(ref: string): Promise<Buffer> {
    const hex = blobHex(ref);
    try {
      return await readFile(this.fileFor(hex));
    } catch {
      throw new BlobNotFoundError(ref, this.dir, FILE_STORE_SETTINGS);
    }
  }

  async setName(name: string, ref: string): Promise<void> {
    for (;;) {
      const current = await this.currentVersion(name);
      if (await this.createVersion(name, current.version + 1, ref)) return;
    }
  }

  async getName(name: string): Promise<string | undefined> {
    return (await this.currentVersion(name)).ref;
  }

  async compareAndSetName(name: string, expected: string | undefined, next: string): Promise<boolean> {
    const current = await this.currentVersion(name);
    if (current.ref !== expected) return false;
    return this.createVersion(name, current.version + 1, next);
  }

  /** The highest version of a name and its reference; version 0 is "unset" (or a pre-versioning pointer file). */
  private async currentVersion(name: string): Promise<{ version: number; ref: string | undefined }> {
    const folder = this.pointerFolder(name);
    let entries: string[];
    try {
      entries = await readdir(folder);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      entries = [];
    }
    const version = entries.filter((e) => /^[0-9]+$/.test(e)).reduce((max, e) => Math.max(max, Number(e)), 0);
    if (version === 0) return { version: 0, ref: await this.legacyName(name) };
    return { version, ref: parsePointer(await readFile(path.join(folder, String(version)), 'utf8'), name) };
  }

  /** Creates version `version` of a name, complete and synced before it becomes visible; false if it exists. */
  private async createVersion(name: string, version: number, ref: string): Promise<boolean> {
    const folder = this.pointerFolder(name);
    await mkdir(folder, { recursive: true });
    const temp = path.join(folder, `.${randomUUID()}.tmp`);
    const handle = await open(temp, 'wx');
    try {
      await handle.writeFile(JSON.stringify({ name, ref }));
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await link(temp, path.join(folder, String(version)));
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw error;
    } finally {
      await unlink(temp);
    }
  }

  /** A pointer written before names were versioned (`<dir>/names/<sha256 of name>`), read as version 0. */
  private async legacyName(name: string): Promise<string | undefined> {
    let text: string;
    try {
      text = await readFile(path.join(this.dir, 'names', nameHash(name)), 'utf8');
    } catch (error) {
      // Only "no such name" means new; any other failure must not pass for an empty history.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    return parsePointer(text, name);
  }

  async *list(): AsyncIterable<StoredBlob> {
    for (const shard of await readdir(this.dir).catch(() => [] as string[])) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      for (const rest of await readdir(path.join(this.dir, shard)).catch(() => [] as string[])) {
        if (!/^[0-9a-f]{62}$/.test(rest)) continue; // an interrupted put's temporary file is not a blob
        const info = await stat(path.join(this.dir, shard, rest)).catch(() => undefined);
        if (info) yield { ref: `sha256:${shard}${rest}`, bytes: info.size, modified: info.mtime };
      }
    }
  }

  async delete(ref: string): Promise<void> {
    await unlink(this.fileFor(blobHex(ref))).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
  }

  async *namedRefs(): AsyncIterable<string> {
    const pointers = path.join(this.dir, 'pointers');
    for (const folder of await readdir(pointers).catch(() => [] as string[])) {
      const versions = (await readdir(path.join(pointers, folder)).catch(() => [] as string[])).filter((e) =>
        /^[0-9]+$/.test(e),
      );
      const current = versions.reduce((max, e) => Math.max(max, Number(e)), 0);
      if (current > 0) yield parsePointer(await readFile(path.join(pointers, folder, String(current)), 'utf8'), folder);
    }
    // Pointers written before names were versioned, read as version 0 when a name has no versions.
    const legacy = path.join(this.dir, 'names');
    for (const file of await readdir(legacy).catch(() => [] as string[]))
      yield parsePointer(await readFile(path.join(legacy, file), 'utf8'), file);
  }

  private pointerFolder(name: string): string {
    return path.join(this.dir, 'pointers', nameHash(name));
  }

  private fileFor(hex: string): string {
    return path.join(this.dir, hex.slice(0, 2), hex.slice(2));
  }
}

/** Names are hashed into file and object keys: any string is a valid name, and none can escape the store. */
export function nameHash(name: string): string {
  return createHash('sha256').update(name).digest('hex');
}

/** Reads a stored pointer `{ name, ref }`; throws naming the pointer when it is not one. */
export function parsePointer(text: string, name: string): string {
  let ref: unknown;
  try {
    ref = (JSON.parse(text) as { ref?: unknown }).ref;
  } catch {
    ref = undefined;
  }
  if (typeof ref !== 'string') throw new Error(`the stored pointer for name "${name}" is not {name, ref} JSON`);
  return ref;
}

/** Replaces an artefact by a blob reference when its JSON exceeds the threshold. */
export async function offloadArtefact(
  artefact: Artefact | undefined,
  blobs: BlobStore,
  thresholdBytes: number,
  summary?: string,
): Promise<Artefact | undefined> {
  if (artefact === undefined || isBlobRef(artefact)) return artefact;
  const text = JSON.stringify(artefact);
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= thresholdBytes) return artefact;
  return blobs.put(bytes, 'application/json', summary ?? describeJson(artefact, text));
}

/** Resolves a blob reference back to the JSON it stands for; inline artefacts pass through. */
export async function resolveArtefact(artefact: Artefact | undefined, blobs: BlobStore): Promise<Json | undefined> {
  if (!isBlobRef(artefact)) return artefact;
  const bytes = await blobs.get(artefact.ref);
  if (artefact.mediaType === 'application/json') return JSON.parse(bytes.toString('utf8')) as Json;
  return bytes.toString('utf8');
}

function describeJson(value: Json, text: string): string {
  const shape = Array.isArray(value)
    ? `array of ${value.length}`
    : value !== null && typeof value === 'object'
      ? `object with keys ${Object.keys(value).slice(0, 8).join(', ')}`
      : typeof value;
  return `${shape} (${text.length} chars of JSON)`;
}

/** Blobs in memory: for tests and short-lived tools; lost when the process ends. */
export class MemoryBlobStore implements BlobStore {
  private readonly blobs = new Map<string, Buffer>();
  private readonly stored = new Map<string, Date>();
  private readonly names = new Map<string, string>();

  async put(bytes: Buffer, mediaType: string, summary: string): Promise<BlobRef> {
    const ref = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    this.blobs.set(ref, Buffer.from(bytes));
    this.stored.set(ref, new Date());
    return { ref, bytes: bytes.length, mediaType, summary };
  }

  async get(ref: string): Promise<Buffer> {
    blobHex(ref);
    const bytes = this.blobs.get(ref);
    if (!bytes) throw new BlobNotFoundError(ref, 'memory');
    return bytes;
  }

  async setName(name: string, ref: string): Promise<void> {
    this.names.set(name, ref);
  }

  async getName(name: string): Promise<string | undefined> {
    return this.names.get(name);
  }

  async *list(): AsyncIterable<StoredBlob> {
    for (const [ref, bytes] of this.blobs) yield { ref, bytes: bytes.length, modified: this.stored.get(ref)! };
  }

  async delete(ref: string): Promise<void> {
    blobHex(ref);
    this.blobs.delete(ref);
    this.stored.delete(ref);
  }

  async *namedRefs(): AsyncIterable<string> {
    yield* this.names.values();
  }

  // No await between the read and the write: a JavaScript turn is atomic, so this is a true CAS.
  async compareAndSetName(name: string, expected: string | undefined, next: string): Promise<boolean> {
    if (this.names.get(name) !== expected) return false;
    this.names.set(name, next);
    return true;
  }
}

/** Reads a JSON blob. */
export async function readJson<T>(blobs: BlobStore, ref: string): Promise<T> {
  return JSON.parse((await blobs.get(ref)).toString('utf8')) as T;
}

/** Stores `value` as a JSON blob and returns its `sha256:` reference. */
export async function storeJson(blobs: BlobStore, value: unknown, summary: string): Promise<string> {
  return (
    await blobs.put(
      Buffer.from(JSON.stringify(value)),
      'application/json',
      summary.length > 200 ? `${summary.slice(0, 199)}…` : summary,
    )
  ).ref;
}
