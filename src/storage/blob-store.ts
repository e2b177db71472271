/**
 * Content-addressed blob store (DESIGN.md principle 4): large artefacts live here and only a
 * `sha256:<hex>` reference enters the workflow history. The default store is a folder of files.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isBlobRef, type Artefact, type BlobRef, type Json } from '../model/shapes';

/** Where blobs live; implement it to put them in S3, GCS, a database... */
export interface BlobStore {
  /** Stores bytes under their sha256 and returns the reference; storing the same bytes twice is a no-op. */
  put(bytes: Buffer, mediaType: string, summary: string): Promise<BlobRef>;
  /** Reads the bytes behind a reference; throws {@link BlobNotFoundError} when absent. */
  get(ref: string): Promise<Buffer>;
  /** Points a name (e.g. a conversation id) at a reference, replacing what it pointed at. */
  setName(name: string, ref: string): Promise<void>;
  /** The reference a name points at, or undefined. */
  getName(name: string): Promise<string | undefined>;
}

/** The blob behind a reference is not in the store. */
export class BlobNotFoundError extends Error {
  constructor(readonly ref: string, where: string) {
    super(`blob ${ref} not found in ${where}`);
    this.name = 'BlobNotFoundError';
  }
}

/** Default blob folder, relative to the working directory. */
export const DEFAULT_BLOB_DIR = path.join('.treadle', 'blobs');

/** Blobs as files `<dir>/<first two hex>/<rest>`, written atomically. */
export class FileBlobStore implements BlobStore {
  constructor(readonly dir: string = process.env.TREADLE_BLOB_DIR ?? DEFAULT_BLOB_DIR) {}

  async put(bytes: Buffer, mediaType: string, summary: string): Promise<BlobRef> {
    const hex = createHash('sha256').update(bytes).digest('hex');
    const file = this.fileFor(hex);
    const exists = await stat(file).then(
      (s) => s.size === bytes.length,
      () => false,
    );
    if (!exists) {
      await mkdir(path.dirname(file), { recursive: true });
      const temp = `${file}.${randomUUID()}.tmp`;
      await writeFile(temp, bytes);
      await rename(temp, file);
    }
    return { ref: `sha256:${hex}`, bytes: bytes.length, mediaType, summary };
  }

  async get(ref: string): Promise<Buffer> {
    const match = /^sha256:([0-9a-f]{64})$/.exec(ref);
    if (!match) throw new Error(`not a blob reference: ${ref}`);
    try {
      return await readFile(this.fileFor(match[1]!));
    } catch {
      throw new BlobNotFoundError(ref, this.dir);
    }
  }

  async setName(name: string, ref: string): Promise<void> {
    const file = this.nameFile(name);
    await mkdir(path.dirname(file), { recursive: true });
    const temp = `${file}.${randomUUID()}.tmp`;
    await writeFile(temp, JSON.stringify({ name, ref }));
    await rename(temp, file);
  }

  async getName(name: string): Promise<string | undefined> {
    let text: string;
    try {
      text = await readFile(this.nameFile(name), 'utf8');
    } catch (error) {
      // Only "no such name" means new; any other failure must not pass for an empty history.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    return (JSON.parse(text) as { ref: string }).ref;
  }

  private nameFile(name: string): string {
    return path.join(this.dir, 'names', createHash('sha256').update(name).digest('hex'));
  }

  private fileFor(hex: string): string {
    return path.join(this.dir, hex.slice(0, 2), hex.slice(2));
  }
}

/** Artefacts whose JSON is larger than this go to the blob store (override: `TREADLE_BLOB_THRESHOLD`). */
export const DEFAULT_BLOB_THRESHOLD_BYTES = 16 * 1024;

/** Replaces an artefact by a blob reference when its JSON exceeds the threshold. */
export async function offloadArtefact(artefact: Artefact | undefined, blobs: BlobStore, thresholdBytes: number, summary?: string): Promise<Artefact | undefined> {
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
  const shape = Array.isArray(value) ? `array of ${value.length}` : value !== null && typeof value === 'object' ? `object with keys ${Object.keys(value).slice(0, 8).join(', ')}` : typeof value;
  return `${shape} (${text.length} chars of JSON)`;
}

/** Blobs in memory: for tests and short-lived tools; lost when the process ends. */
export class MemoryBlobStore implements BlobStore {
  private readonly blobs = new Map<string, Buffer>();
  private readonly names = new Map<string, string>();

  async put(bytes: Buffer, mediaType: string, summary: string): Promise<BlobRef> {
    const ref = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    this.blobs.set(ref, Buffer.from(bytes));
    return { ref, bytes: bytes.length, mediaType, summary };
  }

  async get(ref: string): Promise<Buffer> {
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
}
