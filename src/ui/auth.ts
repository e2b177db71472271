/**
 * Who the reviewer is, for the review inbox: a tokens file of `name sha256:<hex> [groups=a,b]` lines (only hashes
 * are stored), tokens presented at login or as `Authorization: Bearer`, and an optional user header (and groups
 * header) set by a trusted proxy. The identity found here is what `decide` records; a name in a request body never
 * is. A reviewer's groups decide which decisions they may answer ({@link mayAnswer}).
 */
import { requiredGroups } from '../model/decisions';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** How long a login lasts. */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

/** A reviewer's name, the SHA-256 of their token, and the reviewer groups they belong to (`*`: every group). */
export interface TokenEntry {
  name: string;
  hash: Buffer;
  groups: readonly string[];
}

/** A signed-in reviewer: the name `decide` records and the groups they may answer for. */
export interface Reviewer {
  name: string;
  groups: readonly string[];
}

/** The group that stands for every group: its member may answer any decision. */
export const EVERY_GROUP = '*';

/** A tokens file that cannot be used (unreadable by others' standards, or malformed). */
export class TokensFileError extends Error {
  /** A configuration problem: the CLI exits 2. */
  readonly code = 'config';
  constructor(message: string) {
    super(message);
    this.name = 'TokensFileError';
  }
}

const NAME = /^[A-Za-z0-9._@+-]{1,128}$/;
const LINE = /^(\S+)\s+sha256:([0-9a-f]{64})(?:\s+(\S.*))?$/;
const GROUP = /^[A-Za-z0-9._@+-]{1,64}$/;

/**
 * A comma-separated list of groups (`legal,leads`, `*`), or why it is not one. Shared by the tokens file,
 * `treadle ui token add --groups` and the proxy's groups header.
 */
export function parseGroups(text: string): string[] | string {
  const groups = text.split(',').map((g) => g.trim());
  const bad = groups.find((g) => g !== EVERY_GROUP && !GROUP.test(g));
  if (bad !== undefined)
    return bad === ''
      ? 'an empty group name (a stray comma?)'
      : `not a group name: ${JSON.stringify(bad)} (letters, digits, . _ @ + -, or * for every group)`;
  return [...new Set(groups)];
}

/**
 * Parses a tokens file's text: `name sha256:<hex>` per line, optionally followed by `groups=legal,leads`; `#`
 * comments and blank lines ignored.
 */
export function parseTokens(text: string, file = 'tokens file'): TokenEntry[] {
  const entries: TokenEntry[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const match = LINE.exec(line);
    if (!match || !NAME.test(match[1]!)) {
      throw new TokensFileError(`${file}:${i + 1}: expected "<name> sha256:<64 hex digits> [groups=<group>,…]"`);
    }
    let groups: string[] = [];
    if (match[3] !== undefined) {
      const field = /^groups=(\S+)$/.exec(match[3]);
      const parsed = field ? parseGroups(field[1]!) : 'expected "groups=<group>,…" after the hash';
      if (typeof parsed === 'string') throw new TokensFileError(`${file}:${i + 1}: ${parsed}`);
      groups = parsed;
    }
    entries.push({ name: match[1]!, hash: Buffer.from(match[2]!, 'hex'), groups });
  });
  return entries;
}

/** The groups of reviewer `name` in `entries` (every line of that name; none when it has no line). */
export function groupsOf(entries: readonly TokenEntry[], name: string): string[] {
  return [...new Set(entries.filter((e) => e.name === name).flatMap((e) => e.groups))];
}

/**
 * The group under which `reviewer` may answer a decision addressed to `reviewers`: undefined when the decision
 * names no group (anyone may answer, no group is recorded), the first required group they belong to (`*`
 * belongs to all), or `false` when they belong to none.
 */
export function answeringGroup(reviewer: Reviewer, reviewers: string | undefined): string | false | undefined {
  const required = requiredGroups(reviewers);
  if (required.length === 0) return undefined;
  const member = required.find((g) => reviewer.groups.includes(g) || reviewer.groups.includes(EVERY_GROUP));
  return member ?? false;
}

/** Reads a tokens file, refusing one that group or others can read (a copied hash list is a guessing target). */
export function readTokensFile(file: string): TokenEntry[] {
  const mode = statSync(file).mode;
  if ((mode & 0o077) !== 0) {
    throw new TokensFileError(
      `${file} is readable by group or others (mode ${(mode & 0o777).toString(8)}); run: chmod 600 ${file}`,
    );
  }
  return parseTokens(readFileSync(file, 'utf8'), file);
}

/** "members of legal" / "members of legal or leads": who may answer a decision addressed to `reviewers`. */
export function membersOf(reviewers: string): string {
  const groups = requiredGroups(reviewers);
  return `members of ${groups.length > 1 ? `${groups.slice(0, -1).join(', ')} or ${groups.at(-1)}` : groups[0]}`;
}

/** "in leads, ops" / "in no reviewer group": the groups a reviewer belongs to, in a sentence. */
export function inGroups(reviewer: Reviewer): string {
  return reviewer.groups.length > 0 ? `in ${reviewer.groups.join(', ')}` : 'in no reviewer group';
}

/**
 * The tokens file line for `name` (in `groups`, when given) and a new token (the token is shown once; only its
 * hash is kept).
 */
export function newToken(name: string, groups: readonly string[] = []): { token: string; line: string } {
  if (!NAME.test(name))
    throw new TokensFileError(`not a reviewer name: ${JSON.stringify(name)} (letters, digits, . _ @ + -)`);
  const checked = groups.length > 0 ? parseGroups(groups.join(',')) : [];
  if (typeof checked === 'string') throw new TokensFileError(`--groups: ${checked}`);
  const token = `trd_${randomBytes(24).toString('base64url')}`;
  const suffix = checked.length > 0 ? ` groups=${checked.join(',')}` : '';
  return { token, line: `${name} sha256:${sha256(token).toString('hex')}${suffix}` };
}

/** The reviewer a token belongs to, or undefined; compared in constant time. */
export function reviewerForToken(entries: readonly TokenEntry[], token: string): string | undefined {
  const hash = sha256(token);
  let found: string | undefined;
  for (const entry of entries) if (timingSafeEqual(entry.hash, hash)) found ??= entry.name;
  return found;
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer\s+(\S+)$/i.exec(header ?? '');
  return match?.[1];
}

/** Trusted proxy header settings: the headers are honoured only from these addresses. */
export interface ProxyIdentity {
  header: string;
  /** The header naming the reviewer's groups, comma-separated (default {@link PROXY_GROUPS_HEADER}). */
  groupsHeader?: string;
  trustedAddresses: readonly string[];
}

/** The header a trusted proxy names the reviewer's groups in, unless configured otherwise. */
export const PROXY_GROUPS_HEADER = 'X-Treadle-Groups';

/**
 * The groups a trusted proxy's groups header names for its reviewer (call it only once {@link reviewerFromProxy}
 * found one): none when the header is absent or malformed, so a proxy's mistake grants nothing.
 */
export function groupsFromProxy(
  proxy: ProxyIdentity,
  headers: Record<string, string | string[] | undefined>,
): string[] {
  const value = headers[(proxy.groupsHeader ?? PROXY_GROUPS_HEADER).toLowerCase()];
  if (typeof value !== 'string' || value.trim() === '') return [];
  const groups = parseGroups(value);
  return typeof groups === 'string' ? [] : groups;
}

/** The reviewer a trusted proxy names, or undefined when not configured, not from the proxy, or empty. */
export function reviewerFromProxy(
  proxy: ProxyIdentity | undefined,
  remoteAddress: string | undefined,
  headers: Record<string, string | string[] | undefined>,
): string | undefined {
  if (!proxy || remoteAddress === undefined) return undefined;
  if (!proxy.trustedAddresses.includes(normaliseAddress(remoteAddress))) return undefined;
  const value = headers[proxy.header.toLowerCase()];
  const name = Array.isArray(value) ? undefined : value?.trim();
  return name && NAME.test(name) ? name : undefined;
}

/** `::ffff:127.0.0.1` (IPv4 on a dual-stack socket) compares as `127.0.0.1`. */
function normaliseAddress(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * The tokens of `file`, re-read whenever its modification time or size changes (one stat per call), so a
 * removed or replaced line ends that reviewer's sessions at their next request. A file that became unusable yields no
 * tokens (every session ends) and is reported to `onError`.
 */
export function tokensFileSource(file: string, onError: (e: unknown) => void = () => {}): () => readonly TokenEntry[] {
  let stamp = fileStamp(file);
  let entries: readonly TokenEntry[] = readTokensFile(file);
  return () => {
    try {
      const now = fileStamp(file);
      if (now !== stamp) {
        entries = readTokensFile(file);
        stamp = now;
      }
    } catch (e) {
      entries = [];
      stamp = '';
      onError(e);
    }
    return entries;
  };
}

const fileStamp = (file: string): string => {
  const st = statSync(file);
  return `${st.mtimeMs}:${st.size}:${st.mode}`;
};

/** Hex digits of the token's hash a session keeps: enough to tell a replaced token from the one signed in with. */
const SESSION_HASH_HEX = 16;
/** Random bytes naming one session, so signing out can end it and no other. */
const SESSION_ID_BYTES = 12;
const SESSION = new RegExp(`^([^|]+)\\|([0-9a-f]{${SESSION_HASH_HEX}})\\|(\\d+)\\|([A-Za-z0-9_-]{16})$`);

/** A session cookie's parts, or undefined when the value is not a session. */
function parseSession(value: string): { name: string; prefix: string; end: number; id: string } | undefined {
  const match = SESSION.exec(value);
  return match ? { name: match[1]!, prefix: match[2]!, end: Number(match[3]), id: match[4]! } : undefined;
}

/**
 * The value a session cookie signs: the reviewer, a prefix of the hash of the token they signed in with, when
 * the session ends, and a random id. The prefix ties the session to that token, so replacing a leaked token
 * ends it; the id lets "Sign out" end this session on the server ({@link SignedOutSessions}).
 */
export function sessionValue(name: string, token: string, now: number): string {
  const prefix = sha256(token).toString('hex').slice(0, SESSION_HASH_HEX);
  return `${name}|${prefix}|${now + SESSION_TTL_MS}|${randomBytes(SESSION_ID_BYTES).toString('base64url')}`;
}

/**
 * The sessions signed out before they expired, by id, each kept until it would have ended anyway: a copied
 * cookie stops working at sign-out, not 12 hours later. Kept in memory: cookies are signed with a secret made
 * per process, so no session outlives the server that remembers its sign-out.
 */
export class SignedOutSessions {
  private readonly ends = new Map<string, number>();

  /** Ends the session `value` names (a value that is not a session, or expired, needs nothing). */
  add(value: string, now: number): void {
    for (const [id, end] of this.ends) if (end <= now) this.ends.delete(id);
    const session = parseSession(value);
    if (session && session.end > now) this.ends.set(session.id, session.end);
  }

  /** Whether the session with this id was signed out. */
  has(id: string): boolean {
    return this.ends.has(id);
  }
}

/**
 * The reviewer of a verified session value, or undefined when it expired, was signed out, or the token it
 * was signed in with is no longer in `tokens` (removed, or replaced by `token remove` + `token add`).
 */
export function sessionReviewer(
  value: string,
  tokens: readonly TokenEntry[],
  now: number,
  signedOut?: SignedOutSessions,
): string | undefined {
  const session = parseSession(value);
  if (!session || session.end <= now || signedOut?.has(session.id)) return undefined;
  const { name, prefix } = session;
  return tokens.some((t) => t.name === name && t.hash.toString('hex').startsWith(prefix)) ? name : undefined;
}

/**
 * `treadle ui token add <name> [--groups a,b]`: appends a new token's hash (and the reviewer's groups) to `file`
 * (created with mode 0600) and returns the token, which is shown once. A name that already has a token is
 * refused: remove its line first.
 */
export function addToken(file: string, name: string, groups: readonly string[] = []): string {
  const existing = existsSync(file) ? readTokensFile(file) : [];
  if (existing.some((e) => e.name === name)) {
    throw new TokensFileError(
      `${name} already has a token in ${file}; treadle ui token remove ${name} first to replace it`,
    );
  }
  const { token, line } = newToken(name, groups);
  mkdirSync(dirname(file), { recursive: true });
  appendFileSync(file, `${line}\n`, { mode: 0o600 });
  return token;
}

/**
 * `treadle ui token remove <name>`: drops `name`'s line from `file` (comments and other lines kept). Its sessions
 * end at their next request and its open event streams within seconds, since the server re-reads the file. An
 * unknown name is refused.
 */
export function removeToken(file: string, name: string): void {
  const entries = existsSync(file) ? readTokensFile(file) : [];
  if (!entries.some((e) => e.name === name)) throw new TokensFileError(`${name} has no token in ${file}`);
  const kept = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim().split(/\s+/)[0] !== name || line.trim().startsWith('#'));
  writeFileSync(file, kept.join('\n'), { mode: 0o600 });
}

export { requiredGroups };
