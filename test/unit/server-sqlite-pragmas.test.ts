/**
 * The SQLite pragmas every dev server starts with: the WAL + synchronous=NORMAL default,
 * `TREADLE_SQLITE_PRAGMAS` overriding it pragma by pragma, the caller's own over both, malformed values
 * rejected in one line, and the `--sqlite-pragma` arguments they become.
 */
import {
  DEFAULT_SQLITE_PRAGMAS,
  parseSqlitePragmas,
  resolveSqlitePragmas,
  sqlitePragmaArgs,
} from '../../src/server/sqlite-pragmas';

describe('SQLite pragmas of the dev server', () => {
  it('default to WAL with synchronous=NORMAL when nothing overrides them', () => {
    expect(resolveSqlitePragmas(undefined, {})).toEqual({ journal_mode: 'WAL', synchronous: 'NORMAL' });
    expect(DEFAULT_SQLITE_PRAGMAS).toEqual({ journal_mode: 'WAL', synchronous: 'NORMAL' });
  });

  it('take TREADLE_SQLITE_PRAGMAS over the defaults pragma by pragma, and the caller over both', () => {
    const env = { TREADLE_SQLITE_PRAGMAS: ' synchronous = FULL , busy_timeout=5000' };
    expect(resolveSqlitePragmas(undefined, env)).toEqual({
      journal_mode: 'WAL',
      synchronous: 'FULL',
      busy_timeout: '5000',
    });
    expect(resolveSqlitePragmas({ synchronous: 'OFF' }, env)).toEqual({
      journal_mode: 'WAL',
      synchronous: 'OFF',
      busy_timeout: '5000',
    });
    expect(resolveSqlitePragmas(undefined, { TREADLE_SQLITE_PRAGMAS: 'journal_mode=DELETE' })).toEqual({
      journal_mode: 'DELETE',
      synchronous: 'NORMAL',
    });
    expect(resolveSqlitePragmas(undefined, { TREADLE_SQLITE_PRAGMAS: '' })).toEqual(DEFAULT_SQLITE_PRAGMAS);
  });

  it.each([
    'synchronous',
    'synchronous=',
    '=WAL',
    'journal_mode=WAL=1',
    'journal_mode=WAL;DROP TABLE x',
    'synchronous=NORMAL journal_mode=WAL',
  ])('rejects %p in one line naming the variable', (text) => {
    expect(() => parseSqlitePragmas(text)).toThrow(
      /^TREADLE_SQLITE_PRAGMAS must be comma-separated name=value pairs such as "journal_mode=WAL,synchronous=NORMAL"; ".*" is not one$/,
    );
  });

  it('rejects a malformed pragma from the caller too', () => {
    expect(() => resolveSqlitePragmas({ synchronous: 'OFF; PRAGMA x' }, {})).toThrow(
      /^sqlitePragmas must be comma-separated name=value pairs/,
    );
  });

  it('become one --sqlite-pragma argument each', () => {
    expect(sqlitePragmaArgs({ journal_mode: 'WAL', synchronous: 'NORMAL' })).toEqual([
      '--sqlite-pragma',
      'journal_mode=WAL',
      '--sqlite-pragma',
      'synchronous=NORMAL',
    ]);
  });
});
