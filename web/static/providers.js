// The providers view: each provider's readiness (binary, version, tested,
// login, what to do) from GET /v1/providers, and a login per host CLI
// that is not logged in: the daemon runs the CLI's own login as the host
// user (POST /v1/providers/{id}/login) and this page shows its sign-in
// URL, the one-time code (Codex) or a box for the code the sign-in page
// shows (Claude Code). Only the host user (or root) may do this; anyone
// else sees the daemon's refusal.
import { el, api, notice } from './lib.js';

const LOGIN_PROVIDERS = new Set(['claude', 'codex']);

export class ProvidersView {
  constructor(root) {
    this.root = root;
    this.timer = null;
    this.list = el('div', { id: 'provider-list' }, el('p', { class: 'muted' }, 'Loading…'));
    root.replaceChildren(el('section', {}, el('h2', {}, 'Providers'),
      el('p', { class: 'muted' }, 'The agent CLIs on this host: installed, version, login, what to do.'), this.list));
    this.load();
  }

  destroy() {
    clearTimeout(this.timer);
    this.dead = true;
  }

  async load() {
    try {
      const ps = (await api('GET', '/v1/providers')) || [];
      if (this.dead) return;
      this.list.replaceChildren(...ps.map((p) => this.card(p)));
    } catch (e) {
      this.list.replaceChildren(notice('error', `cannot list providers: ${e.message}`));
    }
  }

  card(p) {
    const r = p.readiness;
    const rows = [];
    const row = (k, v) => rows.push(el('dt', {}, k), el('dd', { 'data-field': k }, v));
    let state = 'unknown';
    if (!p.enabled) {
      state = 'disabled';
    } else if (r) {
      state = r.ready ? 'ready' : 'not ready';
      row('binary', r.binaryFound ? r.binary : `not found (${r.binary})`);
      if (r.binaryFound) row('version', (r.version || '?') + (r.tested ? ' (tested)' : r.testedVersion ? ` (untested; tested: ${r.testedVersion})` : ''));
      row('login', r.loggedIn ? `logged in: ${r.auth}` : `not logged in (${r.auth})`);
    }
    const out = el('div', { class: 'provider-login' });
    const card = el('article', { class: 'provider-card', 'data-provider': p.id, 'data-ready': String(!!(r && r.ready)) },
      el('h3', {}, p.label || p.id, ' ', el('span', { class: `badge ${state === 'ready' ? 'running' : 'waiting'}`, 'data-state': state }, state)),
      rows.length ? el('dl', {}, rows) : el('p', { class: 'muted' }, p.enabled ? 'This provider reports no readiness.' : 'Disabled in the daemon\'s config.'),
      r && r.action ? el('p', { class: 'action', 'data-field': 'action' }, r.action) : null,
      out);
    if (r && r.binaryFound && LOGIN_PROVIDERS.has(p.id)) {
      if (!r.loggedIn) {
        card.append(el('button', { type: 'button', class: 'login-start', onclick: () => this.startLogin(p.id, out) }, `Log in to ${p.label || p.id}`));
      } else {
        card.append(el('button', { type: 'button', class: 'secondary logout-start', onclick: () => this.logout(p.id, out) }, 'Log out'));
      }
    }
    return card;
  }

  async startLogin(id, out) {
    out.replaceChildren(notice('status', 'Starting the login…'));
    try {
      const l = await api('POST', `/v1/providers/${encodeURIComponent(id)}/login`, {});
      this.follow(id, l, out);
    } catch (e) {
      out.replaceChildren(notice('error', `cannot log in: ${e.message}`));
    }
  }

  follow(id, l, out) {
    if (this.dead) return;
    const path = `/v1/providers/${encodeURIComponent(id)}/login/${encodeURIComponent(l.id)}`;
    const parts = [];
    if (l.url) {
      parts.push(el('p', {}, 'Open this link and sign in: ',
        el('a', { href: l.url, target: '_blank', rel: 'noopener noreferrer', class: 'login-url' }, l.url)));
    }
    if (l.userCode) parts.push(el('p', {}, 'Then enter this one-time code: ', el('code', { class: 'login-code' }, l.userCode)));
    if (l.needsCode) {
      const input = el('input', { class: 'login-paste', 'aria-label': 'Code from the sign-in page', autocomplete: 'off', placeholder: 'code from the sign-in page' });
      const form = el('form', { class: 'row-form login-code-form' }, input, el('button', { type: 'submit' }, 'Submit code'));
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        try {
          const next = await api('POST', `${path}/code`, { code: input.value.trim() });
          input.value = '';
          this.follow(id, next, out);
        } catch (e2) {
          out.append(notice('error', `code refused: ${e2.message}`));
        }
      });
      parts.push(el('p', {}, 'After signing in, paste the code the page shows:'), form);
    }
    const done = ['succeeded', 'failed', 'cancelled'].includes(l.state);
    parts.push(el('p', { class: `login-state login-${l.state}`, 'data-state': l.state },
      l.state === 'succeeded' ? 'Logged in.' : l.message || (done ? l.state : 'Waiting for the sign-in…')));
    if (!done) {
      parts.push(el('button', { type: 'button', class: 'secondary login-cancel', onclick: () => api('DELETE', path).catch(() => {}) }, 'Cancel'));
    }
    // Keep a code being typed: redraw only when the login moved on.
    const key = JSON.stringify([l.state, l.url, l.userCode, l.needsCode, l.message]);
    if (out.dataset.key !== key) {
      out.dataset.key = key;
      out.replaceChildren(...parts);
    }
    clearTimeout(this.timer);
    if (done) {
      if (l.state === 'succeeded') this.load();
      return;
    }
    this.timer = setTimeout(async () => {
      try {
        this.follow(id, await api('GET', path), out);
      } catch (e) {
        out.replaceChildren(notice('error', `login: ${e.message}`));
      }
    }, 1000);
  }

  async logout(id, out) {
    try {
      const r = await api('POST', `/v1/providers/${encodeURIComponent(id)}/logout`);
      out.replaceChildren(notice('status', r.message || 'Logged out.'));
      this.load();
    } catch (e) {
      out.replaceChildren(notice('error', `cannot log out: ${e.message}`));
    }
  }
}
