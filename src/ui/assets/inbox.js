// The review inbox's only script (no framework, no bundler): login by token (also from a #token= fragment,
// on load or when the fragment changes), sign-out, answers posted as JSON (the server refuses anything else), the edit check before an edited artefact is
// sent, batch selection, the live event stream, and keyboard shortcuts. The page works without it for reading.
'use strict';

const $ = (selector, root) => (root || document).querySelector(selector);
const $$ = (selector, root) => Array.from((root || document).querySelectorAll(selector));
const byTestId = (id, root) => $(`[data-testid="${id}"]`, root);

/** POSTs JSON; resolves to { status, body } (body null when not JSON). A 401 sends a signed-in page to /login. */
async function post(url, payload) {
  const res = await fetch(url, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(payload),
  });
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  // Not from the login page itself: a refused token is said there, and a reload would wipe the notice.
  if (res.status === 401 && url !== '/login') location.assign('/login');
  return { status: res.status, body };
}

/** Shows a notice (text only: never HTML from a response). */
function notice(text, kind) {
  const box = $('#notices');
  if (!box) return;
  const p = document.createElement('p');
  p.className = `notice ${kind || ''}`;
  p.setAttribute('data-testid', 'notice');
  p.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  p.textContent = text;
  box.replaceChildren(p);
}

/** The notice for a decide answer; true when the decision is gone (decided here or elsewhere). */
function showOutcome(res) {
  const b = res.body || {};
  if (res.status === 200) {
    notice(`Done: ${b.outcome || 'decided'} by ${b.by}.`, 'ok');
    return true;
  }
  if (res.status === 409) {
    notice(`Already decided${b.by ? ` by ${b.by}` : ''}${b.outcome ? ` (${b.outcome})` : ''}.`, 'info');
    return true;
  }
  notice(b.message || `The server answered ${res.status}.`, 'error');
  return false;
}

// ---- login ----
/** The login form, a #token= fragment, and the sign-out button. */
function setupLogin() {
  const loginForm = $('form[data-login]');
  if (loginForm) {
    const field = byTestId('login-token');
    const signIn = async (token) => {
      const res = await post('/login', { token });
      if (res.status === 200) location.assign('/');
      else notice(`Sign-in failed: ${(res.body && res.body.message) || `the server answered ${res.status}`}.`, 'error');
    };
    loginForm.addEventListener('submit', (e) => {
      e.preventDefault();
      void signIn(field.value);
    });
    const fromFragment = () => {
      const match = /^#token=(.+)$/.exec(location.hash);
      if (!match) return;
      // The fragment never reaches the server's log; clear it from the address bar and history too.
      history.replaceState(null, '', '/login');
      void signIn(decodeURIComponent(match[1]));
    };
    fromFragment();
    // A #token= link opened in a tab already at /login changes only the fragment: no new page loads.
    window.addEventListener('hashchange', fromFragment);
  }

  const logout = $('#logout');
  if (logout)
    logout.addEventListener('click', async () => {
      await post('/logout', {});
      location.assign('/login');
    });
}

// ---- the list ----
const table = $('table.decisions');
const rows = () => $$('tbody tr[data-key]', table || document);
let cursor = -1;
function moveCursor(delta) {
  const all = rows();
  if (all.length === 0) return;
  cursor = Math.max(0, Math.min(all.length - 1, cursor + delta));
  all.forEach((r, i) => r.classList.toggle('cursor', i === cursor));
  all[cursor].scrollIntoView({ block: 'nearest' });
}
const currentRow = () => rows()[cursor];

function selectedKeys() {
  return $$('input[data-testid="select-row"]:checked').map((c) => c.value);
}
function updateBatchBar() {
  const bar = $('.batch');
  if (!bar) return;
  const n = selectedKeys().length;
  bar.hidden = n === 0;
  $('#batch-count').textContent = `${n} selected`;
}
function removeRow(key) {
  const row = rows().find((r) => r.dataset.key === key);
  if (row) row.remove();
  // No reload when the last row goes: it would wipe the notice that says what happened to the rows.
  if (table && rows().length === 0 && !byTestId('empty-state')) {
    table.hidden = true;
    const empty = document.createElement('p');
    empty.className = 'empty';
    empty.setAttribute('data-testid', 'empty-state');
    empty.textContent = 'Nothing waits for you.';
    table.after(empty);
  }
}

async function batch(action) {
  const keys = selectedKeys();
  if (keys.length === 0) return;
  const reason = (byTestId('batch-reason') || {}).value || '';
  if (action === 'reject' && !reason.trim()) {
    notice('A reason is required to reject.', 'error');
    byTestId('batch-reason').focus();
    return;
  }
  const res = await post('/api/batch', { keys, action, reason });
  if (res.status !== 200)
    return void notice((res.body && res.body.message) || `The server answered ${res.status}.`, 'error');
  const counts = { decided: 0, already_decided: 0, refused: 0 };
  const refusals = [];
  const others = new Set();
  for (const o of res.body.outcomes) {
    counts[o.status] = (counts[o.status] || 0) + 1;
    if (o.status === 'refused') refusals.push(o.message);
    else removeRow(o.key);
    if (o.status === 'already_decided' && o.by) others.add(o.by);
  }
  const by = others.size ? ` by ${[...others].join(', ')}` : '';
  notice(
    `${counts.decided} ${action === 'approve' ? 'approved' : 'rejected'}, ${counts.already_decided} already decided${by}` +
      (refusals.length ? `, ${refusals.length} refused: ${refusals[0]}` : '.'),
    refusals.length ? 'error' : 'ok',
  );
  updateBatchBar();
}

/**
 * Marks `row` read-only when its decision is addressed to reviewer groups the signed-in reviewer is in none of
 * (the table's `data-groups`; `*` is every group): a badge saying so, and its box cannot be selected. The server
 * refuses such an answer (403) in any case; this says so before anyone tries.
 */
function markReadOnly(row) {
  const groups = (table.dataset.groups || '').split(',').filter(Boolean);
  const required = (row.dataset.reviewers || '')
    .split(',')
    .map((g) => g.trim())
    .filter(Boolean);
  if (required.length === 0 || groups.includes('*') || required.some((g) => groups.includes(g))) return;
  if ('readOnly' in row.dataset) return;
  row.dataset.readOnly = '';
  const why = `Only members of ${required.join(' or ')} can answer this decision`;
  const box = $('input[data-testid="select-row"]', row);
  if (box) {
    box.disabled = true;
    box.checked = false;
    box.title = why;
  }
  const badge = document.createElement('span');
  badge.className = 'badge read-only';
  badge.setAttribute('data-testid', 'read-only-badge');
  badge.title = why;
  badge.textContent = 'read-only';
  const kind = $('.kind', row);
  if (kind) kind.after(' ', badge);
}

/** Row selection, the batch bar, and filters that apply on change. */
function setupList() {
  if (table) {
    rows().forEach(markReadOnly);
    table.addEventListener('change', (e) => {
      if (e.target.matches('[data-testid="select-all"]')) {
        $$('input[data-testid="select-row"]:not(:disabled)').forEach((c) => (c.checked = e.target.checked));
      }
      updateBatchBar();
    });
    const approveAll = byTestId('batch-approve');
    const rejectAll = byTestId('batch-reject');
    if (approveAll) approveAll.addEventListener('click', () => void batch('approve'));
    if (rejectAll) rejectAll.addEventListener('click', () => void batch('reject'));
    for (const select of $$('form.filters select')) select.addEventListener('change', () => select.form.submit());
  }
}

// ---- live updates ----
/** The event stream: rows appear and go, the count follows. */
function setupLiveUpdates() {
  const count = byTestId('decision-count');
  if (count && typeof EventSource === 'function') {
    const params = new URLSearchParams(location.search);
    const filtered = params.toString() !== '';
    // A kind or pipeline filter can be applied here to a new row; a text or reviewer filter cannot.
    const rowFilter = [...params.keys()].every((k) => k === 'kind' || k === 'pipeline');
    const shown = (row) =>
      (!params.get('pipeline') || row.dataset.pipeline === params.get('pipeline')) &&
      (!params.get('kind') || params.get('kind').split(',').includes(row.dataset.kind));
    const events = new EventSource('/api/events');
    events.addEventListener('reset', () => location.reload());
    // Signed out elsewhere, or the token was removed: the server closed the stream; do not reconnect.
    events.addEventListener('ended', (e) => {
      events.close();
      notice(JSON.parse(e.data).message, 'error');
    });
    events.addEventListener('removed', (e) => JSON.parse(e.data).keys.forEach(removeRow));
    events.addEventListener('counts', (e) => {
      if (!filtered) count.textContent = `${JSON.parse(e.data).total} pending`;
    });
    events.addEventListener('added', (e) => {
      const { rows: added } = JSON.parse(e.data);
      if (!rowFilter || !table) {
        notice('New decisions arrived: reload to see them.', 'info');
        return;
      }
      const body = $('tbody', table);
      let appended = 0;
      for (const { key, html } of added) {
        // Server-rendered and escaped rows; the CSP forbids inline script in any case.
        const template = document.createElement('template');
        template.innerHTML = html.trim();
        if (!shown(template.content.firstElementChild)) continue;
        appended++;
        markReadOnly(template.content.firstElementChild);
        const old = rows().find((r) => r.dataset.key === key);
        if (old) old.replaceWith(template.content);
        else body.append(template.content);
      }
      if (appended === 0) return;
      table.hidden = false;
      const empty = byTestId('empty-state');
      if (empty) empty.remove();
    });
  }
}

// ---- the detail page ----
const detail = $('article.detail');
const key = detail && detail.dataset.key;
const editor = $('.editor');

async function answer(payload) {
  const res = await post(`/api/decisions/${encodeURIComponent(key)}`, payload);
  if (showOutcome(res)) {
    $$('.answer button').forEach((b) => (b.disabled = true));
    setTimeout(() => location.assign('/'), 1500);
  }
}
function reasonOrComplain() {
  const field = byTestId('reject-reason');
  const reason = field ? field.value.trim() : '';
  if (!reason) {
    notice('A reason is required.', 'error');
    if (field) field.focus();
  }
  return reason;
}
/** Cancels the decision's work item once the reviewer confirms; the page then goes back to the inbox. */
async function cancelItem(item) {
  if (!window.confirm(`Cancel work item ${item}? Its stages stop and its decisions leave the inbox.`)) return;
  const field = byTestId('cancel-reason');
  const reason = field ? field.value.trim() : '';
  const res = await post(`/api/decisions/${encodeURIComponent(key)}/cancel`, reason ? { reason } : {});
  const b = res.body || {};
  if (res.status !== 200) return void notice(b.message || `The server answered ${res.status}.`, 'error');
  notice(`Cancelled ${b.id} as ${b.by}${b.reason ? `: ${b.reason}` : ''}.`, 'ok');
  $$('.answer button, .cancel button').forEach((x) => (x.disabled = true));
  setTimeout(() => location.assign('/'), 1500);
}
/** Forks the decision's work item from the stage given, with the settings typed; the page stays. */
async function forkItem() {
  const from = byTestId('fork-from').value.trim();
  if (!from) return void notice('Name the stage to fork from.', 'error');
  const settings = byTestId('fork-settings').value;
  const res = await post(
    `/api/decisions/${encodeURIComponent(key)}/fork`,
    settings.trim() ? { from, settings } : { from },
  );
  const b = res.body || {};
  if (res.status !== 200) return void notice(b.message || `The server answered ${res.status}.`, 'error');
  const carried = b.carried.length > 0 ? b.carried.join(', ') : 'none';
  notice(
    `${b.existing ? 'Forked before' : 'Forked'} as ${b.id}: carried ${carried}; runs again ${b.rerun.join(', ')}.`,
    'ok',
  );
}
/** Checks the edited artefact (JSON syntax here, the schema on the server); nothing is sent until it passes. */
async function submitEdit() {
  const text = byTestId('editor').value;
  const error = byTestId('editor-error');
  const submit = byTestId('editor-submit');
  const fail = (message) => {
    error.textContent = message;
    error.hidden = false;
    // Stays disabled until the text changes: the same text would fail the same way.
    submit.disabled = true;
  };
  let artefact = text;
  if (editor.dataset.format === 'json') {
    try {
      artefact = JSON.parse(text);
    } catch (e) {
      return fail(`Not valid JSON: ${e.message}`);
    }
    const check = await post(`/api/decisions/${encodeURIComponent(key)}/check`, { artefact });
    if (check.status !== 200) return fail((check.body && check.body.message) || `The check answered ${check.status}.`);
    if (check.body.errors.length > 0) {
      return fail(check.body.errors.map((x) => `${x.path || '/'}: ${x.message}`).join('\n'));
    }
  } else if (!text.trim()) {
    return fail('Write an answer first.');
  }
  error.hidden = true;
  await answer({ action: 'edit', artefact });
}

/** The answer buttons, the edit check, and the diff picker. */
function setupDetail() {
  if (detail) {
    detail.addEventListener('click', (e) => {
      const button = e.target.closest('button[data-action]');
      if (!button) return;
      const action = button.dataset.action;
      if (action === 'approve' || action === 'resume') void answer({ action });
      else if (action === 'approve_attempt') void answer({ action, attempt: Number($('#approve-attempt').value) });
      else if (action === 'reject' || action === 'abandon') {
        const reason = reasonOrComplain();
        if (reason) void answer({ action, reason });
      } else if (action === 'guidance') {
        const note = byTestId('guidance').value.trim();
        if (note) void answer({ action, note });
        else notice('Write the guidance first.', 'error');
      } else if (action === 'request_changes') {
        const field = byTestId('changes-note');
        const note = field.value.trim();
        if (note) void answer({ action, note });
        else {
          notice('Write what to change first: the note is required.', 'error');
          field.focus();
        }
      } else if (action === 'edit-open') {
        editor.hidden = false;
        byTestId('editor').focus();
      } else if (action === 'edit') void submitEdit();
      else if (action === 'cancel-item') void cancelItem(button.dataset.item);
      else if (action === 'fork-item') void forkItem();
    });
    if (editor) byTestId('editor').addEventListener('input', () => (byTestId('editor-submit').disabled = false));
    const picker = $('form.diff-picker');
    if (picker)
      picker.addEventListener('submit', async (e) => {
        e.preventDefault();
        const params = new URLSearchParams(new FormData(picker));
        const res = await fetch(`${picker.getAttribute('action')}?${params}`, { credentials: 'same-origin' });
        const view = $('#diff-view');
        if (res.ok)
          view.innerHTML = await res.text(); // server-rendered, escaped
        else notice(`The diff failed (${res.status}).`, 'error');
      });
    if (location.hash === '#reject' && byTestId('reject-reason')) byTestId('reject-reason').focus();
  }
}

// ---- expiry countdowns ----
/** Time left until `iso`, as the server renders it (pages/layout.ts `remaining`). */
function remaining(iso, now) {
  const s = Math.round((Date.parse(iso) - now) / 1000);
  if (s <= 0) return 'expired';
  if (s < 3600) return `in ${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `in ${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `in ${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}
/** Ticks every expiry countdown once a second (rows added live included). */
function setupCountdowns() {
  setInterval(() => {
    for (const t of $$('time[data-countdown]')) t.textContent = remaining(t.getAttribute('datetime'), Date.now());
  }, 1000);
}

// ---- keyboard ----
const HELP = [
  ['j / k', 'next / previous row'],
  ['o or Enter', 'open the row'],
  ['x', 'select the row'],
  ['A / R', 'approve / reject the selected rows'],
  ['a', 'approve (detail) or approve the row'],
  ['r', 'reject: focus the reason'],
  ['e', 'edit the artefact'],
  ['/', 'search'],
  ['?', 'this help'],
];
function toggleHelp() {
  let dialog = $('#help');
  if (!dialog) {
    dialog = document.createElement('dialog');
    dialog.id = 'help';
    const list = document.createElement('dl');
    for (const [k, what] of HELP) {
      const dt = document.createElement('dt');
      dt.textContent = k;
      const dd = document.createElement('dd');
      dd.textContent = what;
      list.append(dt, dd);
    }
    const close = document.createElement('button');
    close.textContent = 'Close';
    close.addEventListener('click', () => dialog.close());
    dialog.append(list, close);
    document.body.append(dialog);
  }
  if (dialog.open) dialog.close();
  else dialog.showModal();
}
/** The help dialog and the keyboard shortcuts. */
function setupKeyboard() {
  const helpButton = $('#help-open');
  if (helpButton) helpButton.addEventListener('click', toggleHelp);

  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target.closest('input, textarea, select')) {
      if (e.key === 'Escape') e.target.blur();
      return;
    }
    // Enter on a focused link or button keeps its own meaning.
    if (e.key === 'Enter' && e.target !== document.body) return;
    const click = (id) => {
      const el = byTestId(id);
      if (el) el.click();
      return Boolean(el);
    };
    const handlers = {
      '?': toggleHelp,
      '/': () => byTestId('filter-text') && byTestId('filter-text').focus(),
      j: () => moveCursor(1),
      k: () => moveCursor(-1),
      o: () => currentRow() && location.assign($('a', currentRow()).href),
      Enter: () => currentRow() && location.assign($('a', currentRow()).href),
      x: () => {
        const box = currentRow() && $('input[type="checkbox"]', currentRow());
        if (box) box.checked = !box.checked;
        updateBatchBar();
      },
      A: () => void batch('approve'),
      R: () => void batch('reject'),
      a: () => {
        if (detail) return click('action-approve');
        const row = currentRow();
        if (row && row.dataset.answers.split(' ').includes('approve')) {
          void post(`/api/decisions/${encodeURIComponent(row.dataset.key)}`, { action: 'approve' }).then((res) => {
            if (showOutcome(res)) removeRow(row.dataset.key);
          });
        }
      },
      r: () => {
        if (detail) return byTestId('reject-reason') && byTestId('reject-reason').focus();
        if (currentRow()) location.assign(`${$('a', currentRow()).href}#reject`);
      },
      e: () => detail && click('action-edit'),
    };
    const handler = handlers[e.key];
    if (handler) {
      e.preventDefault();
      handler();
    }
  });
}

// ---- a human stage's form (issue 40; rendered by pages/human-form.ts) ----
/** The value of one generated field, or undefined when an optional one is left empty. Throws on bad JSON. */
function fieldValue(node) {
  const kind = node.dataset.kind;
  const required = node.dataset.required === 'true';
  const input = $(':scope > [data-input], :scope > select, :scope > textarea', node) || $('[data-input]', node);
  if (kind === 'object') {
    const out = {};
    for (const child of $$(':scope > .fields > [data-kind]', node)) {
      const value = fieldValue(child);
      if (value !== undefined) out[child.dataset.name] = value;
    }
    // An optional object left empty is left out.
    return !required && Object.keys(out).length === 0 ? undefined : out;
  }
  if (kind === 'array')
    return $$(':scope > .rows > .row > [data-kind]', node)
      .map(fieldValue)
      .filter((v) => v !== undefined);
  if (kind === 'boolean') return input.checked;
  const text = input.value;
  if (text === '' && !required) return undefined;
  if (kind === 'number' || kind === 'integer') return text === '' ? undefined : Number(text);
  if (kind === 'enum') return text === '' ? undefined : JSON.parse(text);
  if (kind === 'json') {
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new Error(`${node.dataset.name}: not valid JSON: ${e.message}`);
    }
  }
  return text;
}
/** Builds the output from the form, checks it on the server (the stage's output_schema), then sends it. */
async function submitHumanForm(form) {
  const error = byTestId('human-form-error');
  const fail = (message) => {
    error.textContent = message;
    error.hidden = false;
  };
  let output;
  try {
    output = fieldValue($('.human-root > [data-kind]', form));
  } catch (e) {
    return fail(e.message);
  }
  const check = await post(`/api/decisions/${encodeURIComponent(key)}/check`, { artefact: output });
  if (check.status !== 200) return fail((check.body && check.body.message) || `The check answered ${check.status}.`);
  if (check.body.errors.length > 0)
    return fail(check.body.errors.map((x) => `${x.path || '/'}: ${x.message}`).join('\n'));
  error.hidden = true;
  await answer({ action: 'respond', artefact: output });
}
function setupHumanForm() {
  const form = byTestId('human-form');
  if (!form) return;
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    void submitHumanForm(form);
  });
  form.addEventListener('click', (e) => {
    const button = e.target.closest('button[data-form-action]');
    if (!button) return;
    if (button.dataset.formAction === 'remove-row') button.closest('.row').remove();
    else {
      const fieldset = button.closest('fieldset');
      const template = $(':scope > template', fieldset);
      $(':scope > .rows', fieldset).append(template.content.cloneNode(true));
    }
  });
}

setupLogin();
setupList();
setupLiveUpdates();
setupDetail();
setupHumanForm();
setupCountdowns();
setupKeyboard();
