/**
 * The inbox's settings from the environment, the refusal to start without a way to identify reviewers, and
 * `treadle ui token add`'s file handling (mode 0600, the token shown once, only its hash stored, no duplicates).
 */
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addToken, readTokensFile, reviewerForToken } from '../../src/ui/auth';
import { inboxAuth, inboxSettings } from '../../src/ui/options';

const home = () => mkdtempSync(join(tmpdir(), 'treadle-ui-home-'));

describe('inbox settings', () => {
  it('defaults the tokens file into the home and proxies to loopback', () => {
    const dir = home();
    expect(inboxSettings({ TREADLE_HOME: dir })).toEqual({
      tokensFile: join(dir, 'ui-tokens'),
      trustedProxies: ['127.0.0.1', '::1'],
      allowedHosts: [],
    });
    const set = inboxSettings({
      TREADLE_HOME: dir,
      TREADLE_UI_TOKENS: 'team/tokens',
      TREADLE_UI_USER_HEADER: 'X-Forwarded-User',
      TREADLE_UI_TRUSTED_PROXIES: '10.0.0.2, 10.0.0.3',
      TREADLE_UI_ALLOWED_HOSTS: 'inbox.example:443',
      TREADLE_WEB_UI_URL: 'http://localhost:8233',
    });
    expect(set).toMatchObject({
      tokensFile: join(dir, 'team/tokens'),
      userHeader: 'X-Forwarded-User',
      trustedProxies: ['10.0.0.2', '10.0.0.3'],
      allowedHosts: ['inbox.example:443'],
      webUiUrl: 'http://localhost:8233',
    });
  });

  it('names the variable of a malformed value', () => {
    expect(() => inboxSettings({ TREADLE_UI_USER_HEADER: 'X User: alice' })).toThrow('TREADLE_UI_USER_HEADER');
    expect(() => inboxSettings({ TREADLE_WEB_UI_URL: 'javascript:alert(1)' })).toThrow('TREADLE_WEB_UI_URL');
  });

  it('refuses to identify nobody, and accepts a tokens file or a proxy header', () => {
    const dir = home();
    const settings = inboxSettings({ TREADLE_HOME: dir });
    expect(() => inboxAuth(settings)).toThrow('no way to identify reviewers');
    expect(inboxAuth({ ...settings, userHeader: 'X-Forwarded-User' }).proxy).toEqual({
      header: 'X-Forwarded-User',
      trustedAddresses: ['127.0.0.1', '::1'],
    });
    const token = addToken(settings.tokensFile, 'alice');
    const auth = inboxAuth(settings);
    const tokens = typeof auth.tokens === 'function' ? auth.tokens() : (auth.tokens ?? []);
    expect(reviewerForToken(tokens, token)).toBe('alice');
  });
});

describe('ui token add', () => {
  it('creates the file 0600, stores only the hash, and refuses a second token for a name', () => {
    const file = join(home(), 'sub', 'ui-tokens');
    const token = addToken(file, 'alice');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8')).not.toContain(token);
    expect(() => addToken(file, 'alice')).toThrow('alice already has a token');
    addToken(file, 'bob');
    expect(readTokensFile(file).map((e) => e.name)).toEqual(['alice', 'bob']);
    expect(() => addToken(file, 'not a name')).toThrow('not a reviewer name');
  });
});
