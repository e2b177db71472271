/**
 * Which repositories a TDD tree may work in (seed 001): a spec or a start request names its repository, and
 * the worker admits only those under the folders it was told to allow.
 */
import path from 'node:path';
import { homeLocations } from '../../../config/home';

/** Folders (separated by `path.delimiter`) whose repositories TDD trees may work in. */
export const TDD_REPOS_ENV = 'TREADLE_TDD_REPOS';

/**
 * The repository roots TDD trees may use, absolute: `TREADLE_TDD_REPOS` (relative folders are taken from the
 * home), else `<TREADLE_HOME>/repos`; never the worker's working directory.
 */
export function allowedRepoRoots(env: NodeJS.ProcessEnv = process.env): string[] {
  return homeLocations(TDD_REPOS_ENV, env);
}

/** Refuses a repository outside the allowed roots (a spec or a start request is not trusted to name one). */
export function checkRepo(repo: string, roots: string[]): string | null {
  if (!path.isAbsolute(repo)) return `repository "${repo}" must be an absolute path on the worker`;
  const resolved = path.resolve(repo);
  if (roots.some((root) => resolved === root || resolved.startsWith(root + path.sep))) return null;
  return `repository ${resolved} is outside the folders this worker allows (${TDD_REPOS_ENV}: ${roots.join(path.delimiter)})`;
}
