/**
 * The frame every inbox page shares (head, header bar, stylesheet and script from /assets, no inline script or
 * style, so the CSP can forbid both) and the login page, whose script reads a `#token=` fragment and posts it.
 */
import { html, type SafeHtml } from '../html';
import { TEST_IDS } from '../test-ids';

/** A whole page: `title` in the tab, `body` in <main>; `reviewer` shown in the header when signed in. */
export function page(title: string, body: SafeHtml, reviewer?: string): SafeHtml {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · Treadle inbox</title>
        <link rel="stylesheet" href="/assets/inbox.css" />
        <script src="/assets/inbox.js" defer></script>
      </head>
      <body>
        <header class="bar">
          <a class="brand" href="/">Treadle inbox</a>
          <a class="nav" href="/evals">Evaluations</a>
          ${reviewer ? html`<span class="who">${reviewer}</span><button type="button" class="link" id="logout">Sign out</button>` : ''}
          <button type="button" class="link" id="help-open" title="Keyboard shortcuts (?)">?</button>
        </header>
        <div id="notices" aria-live="polite"></div>
        <main>${body}</main>
      </body>
    </html>`;
}

/**
 * The login page: a token field, posted as JSON by inbox.js (a form post would not be JSON and is refused).
 * A `#token=…` fragment (what `treadle dev` prints) is never sent to the server; the script posts it and clears it.
 */
export function loginPage(message?: string): SafeHtml {
  return page(
    'Sign in',
    html`<section class="login">
      <h1>Sign in</h1>
      <p>Paste the reviewer token <code>treadle ui token add &lt;name&gt;</code> printed for you.</p>
      <form id="login-form" data-login>
        <label for="token">Token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="current-password"
          required
          data-testid="${TEST_IDS.loginToken}"
        />
        <button type="submit" data-testid="${TEST_IDS.loginSubmit}">Sign in</button>
      </form>
      ${message ? html`<p class="notice error" role="alert" data-testid="${TEST_IDS.notice}">${message}</p>` : ''}
    </section>`,
  );
}

/** A page saying what went wrong, with a way back. */
export function errorPage(title: string, message: string, reviewer?: string): SafeHtml {
  return page(
    title,
    html`<section>
      <h1>${title}</h1>
      <p class="notice error" data-testid="${TEST_IDS.notice}">${message}</p>
      <p><a href="/">Back to the inbox</a></p>
    </section>`,
    reviewer,
  );
}

/** Time left until `iso` (e.g. `in 9m 5s`), or `expired`; inbox.js keeps it ticking from the `datetime`. */
export function remaining(iso: string, now: number): string {
  const s = Math.round((Date.parse(iso) - now) / 1000);
  if (s <= 0) return 'expired';
  if (s < 3600) return `in ${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86_400) return `in ${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `in ${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`;
}
