// The chat view. It opens with the newest page of stored events
// (GET /v1/chats/{id}/history?limit=200) and the chat socket from that
// page's lastSeq (/ws/chat/{id}?since=lastSeq), never a replay from seq 0;
// older pages load when the reader scrolls to the top. Stored events are
// applied once, by seq; the socket reconnects with backoff from the last
// seq seen.
import { el, api, wsURL, notice, renderMarkdown } from './lib.js';
import { obj, toolCard, setToolResult, approvalCard, approvalText, resolveCard, pushedCard, pullRequestCard } from './cards.js';
import { notify } from './notify.js';
import { workspace } from './workspace.js';

const MAX_BACKOFF_MS = 10000;
// PAGE is how many stored events one history page holds.
export const PAGE = 200;
const ROUTINE_TURN = new Set(['active', 'inProgress', 'idle', 'completed', 'running', 'started']);
// Daemon notices worth a line; every other system event is provider
// bookkeeping (init, status, thinking tokens, retries, hooks) and is shown
// only behind the "System events" toggle.
const SYSTEM_LABELS = {
  container_starting: 'starting the project container…',
  container_preparing: 'preparing the project container…',
  session_recovered: 'session recovered',
  daemon_restarted: 'the daemon restarted; the run was interrupted',
  checkpoint_restored: 'the project was restored to a checkpoint',
};

const fmt = new Intl.NumberFormat('en');

// usageLine reads a complete event's usage (the snake_case names of api.md).
export function usageLine(u) {
  if (!u || typeof u !== 'object') return '';
  const parts = [];
  const add = (n, label) => { if (typeof n === 'number' && n > 0) parts.push(`${fmt.format(n)} ${label}`); };
  add(u.input_tokens, 'in');
  add(u.output_tokens, 'out');
  add(u.cache_read_input_tokens, 'cache read');
  add(u.cache_creation_input_tokens, 'cache write');
  if (typeof u.total_cost_usd === 'number' && u.total_cost_usd > 0) parts.push('$' + u.total_cost_usd.toFixed(4));
  return parts.join(' · ');
}

// Segment is one run of rendered events: the live tail, or an older page
// put in front of it.
class Segment {
  constructor() {
    this.node = el('div', { class: 'segment' });
    this.messages = new Map();
    this.thinking = null;
  }
}

export class ChatView {
  constructor(root, chatId) {
    this.root = root;
    this.id = chatId;
    this.lastSeq = 0;
    this.firstSeq = 0;
    this.hasMore = false;
    this.running = false;
    this.closed = false;
    this.synced = false;
    this.ws = null;
    this.backoff = 250;
    this.clientSeq = 0;
    this.chat = null;
    this.tools = new Map(); // tool id -> card
    this.interactions = new Map(); // interactionId -> card
    this.resolved = new Map(); // interactionId -> status, for older pages
    this.ended = new Map(); // tool id -> tool_use_end, for older pages
    this.pending = 0;
    this.sysCount = 0;
    this.renderQueued = new Set();
    this.build();
    this.seg = new Segment();
    this.log.append(this.seg.node);
    this.onKey = (e) => this.key(e);
    document.addEventListener('keydown', this.onKey);
    // A rename elsewhere (another tab, the daemon's own title) shows here.
    this.onWorkspace = () => {
      const c = workspace.chats.get(this.id);
      if (c && this.chat && c.title && c.title !== this.chat.title) this.showMeta({ ...this.chat, title: c.title });
    };
    workspace.addEventListener('change', this.onWorkspace);
    workspace.setOpen(this.id);
    this.loadMeta();
    this.loadUsage();
    this.open();
  }

  build() {
    this.name = el('span', { class: 'chat-name' }, 'Chat ' + this.id);
    this.meta = el('span', { class: 'chat-meta muted' });
    this.title = el('h2', { class: 'chat-title' }, this.name, this.meta);
    this.renameBtn = el('button', { type: 'button', id: 'rename', class: 'secondary small', onclick: () => this.startRename() }, 'Rename');
    this.status = el('span', { id: 'chat-status', class: 'status', 'data-running': 'unknown', role: 'status' }, 'connecting…');
    this.conn = el('span', { id: 'conn-status', class: 'conn' }, '');
    this.usage = el('span', { id: 'chat-usage', class: 'chat-usage muted', title: 'Tokens used by this chat' });
    // Changes: shown once the chat's project is known to have a repository.
    this.changesLink = el('a', { id: 'changes-link', class: 'button secondary small', href: `#/chat/${encodeURIComponent(this.id)}/changes`, hidden: true }, 'Changes');
    this.sysBtn = el('button', { type: 'button', id: 'toggle-system', class: 'secondary small', 'aria-pressed': 'false',
      onclick: () => this.toggleSystem() }, 'System events (0)');
    this.olderBtn = el('button', { type: 'button', id: 'load-older', class: 'secondary small', hidden: true,
      onclick: () => this.loadOlder() }, 'Load earlier messages');
    this.older = el('div', { class: 'older' }, this.olderBtn);
    this.log = el('div', { id: 'chat-log', class: 'chat-log', 'aria-live': 'polite', tabindex: '0', 'aria-label': 'Conversation' }, this.older);
    this.log.addEventListener('scroll', () => {
      if (this.log.scrollTop < 300 && this.hasMore && !this.loadingOlder) this.loadOlder();
    }, { passive: true });
    this.input = el('textarea', { id: 'prompt', rows: 3, 'aria-label': 'Message',
      placeholder: 'Message (Enter sends, Shift+Enter new line, Esc cancels the run)' });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.sendPrompt();
      }
    });
    this.sendBtn = el('button', { id: 'send', type: 'button', onclick: () => this.sendPrompt() }, 'Send');
    this.cancelBtn = el('button', { id: 'cancel', type: 'button', class: 'secondary', onclick: () => this.cancel() }, 'Cancel');
    this.titleBox = el('div', { class: 'chat-title-box' }, this.title, this.renameBtn);
    this.root.replaceChildren(
      el('div', { class: 'chat' },
        el('div', { class: 'chat-head' }, this.titleBox,
          el('div', { class: 'chat-head-row' }, this.status, this.usage, this.changesLink, this.sysBtn, this.conn)),
        this.log,
        el('div', { class: 'composer' }, this.input, el('div', { class: 'composer-buttons' }, this.sendBtn, this.cancelBtn))));
    this.setRunning(false, true);
  }

  async loadMeta() {
    try {
      const c = await api('GET', `/v1/chats/${encodeURIComponent(this.id)}`);
      this.showMeta(c);
      if (c.project) {
        api('GET', `/v1/projects/${encodeURIComponent(c.project)}`)
          .then((p) => { this.changesLink.hidden = !(p && p.repo); })
          .catch(() => { /* no project, no Changes */ });
      }
    } catch (e) {
      this.seg.node.append(notice('error', `cannot load chat: ${e.message}`));
    }
  }

  showMeta(c) {
    this.chat = c;
    const where = c.project ? `project ${c.project}` : 'host';
    const prefs = [c.approvalPolicy && `approvals: ${c.approvalPolicy}`, c.reasoningEffort && `effort: ${c.reasoningEffort}`].filter(Boolean);
    this.name.textContent = c.title || 'Chat ' + c.id;
    this.meta.textContent = ' · ' + [c.provider, where, ...prefs].join(' · ');
    document.title = `${c.title || 'Chat'} · Remote`;
  }

  chatTitle() {
    return (this.chat && this.chat.title) || 'Chat ' + this.id;
  }

  async loadUsage() {
    try {
      const res = await api('GET', '/v1/usage?by=chat');
      const row = ((res && res.rows) || []).find((r) => r.key === this.id);
      if (!row) {
        this.usage.textContent = '';
        return;
      }
      const parts = [`${fmt.format(row.inputTokens)} in`, `${fmt.format(row.outputTokens)} out`];
      if (row.cacheReadTokens) parts.push(`${fmt.format(row.cacheReadTokens)} cache read`);
      if (row.cacheCreationTokens) parts.push(`${fmt.format(row.cacheCreationTokens)} cache write`);
      if (row.costUsd) parts.push('$' + row.costUsd.toFixed(4));
      this.usage.textContent = `${row.runs} run${row.runs === 1 ? '' : 's'} · ` + parts.join(' · ');
    } catch {
      this.usage.textContent = '';
    }
  }

  startRename() {
    const input = el('input', { id: 'rename-input', 'aria-label': 'Chat title', value: this.chatTitle(), maxlength: 200 });
    const err = el('span', { class: 'notice-error' });
    const done = () => { form.replaceWith(this.titleBox); this.renameBtn.focus(); };
    const form = el('form', { class: 'rename-form row-form' }, input,
      el('button', { type: 'submit', id: 'rename-save', class: 'small' }, 'Save'),
      el('button', { type: 'button', class: 'secondary small', onclick: done }, 'Cancel'), err);
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') {
        e.preventDefault();
        e.stopPropagation();
        done();
      }
    });
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const title = input.value.trim();
      if (!title) { err.textContent = 'a title cannot be empty'; return; }
      try {
        const c = await api('PATCH', `/v1/chats/${encodeURIComponent(this.id)}`, { title });
        this.showMeta(c);
        workspace.upsertLocal(c);
        done();
      } catch (e2) {
        err.textContent = `cannot rename: ${e2.message}`;
      }
    });
    this.titleBox.replaceWith(form);
    input.focus();
    input.select();
  }

  key(e) {
    if (e.key !== 'Escape' || e.defaultPrevented) return;
    if (this.running) {
      e.preventDefault();
      this.cancel();
    }
  }

  toggleSystem() {
    const on = !this.log.classList.contains('show-system');
    this.log.classList.toggle('show-system', on);
    this.sysBtn.setAttribute('aria-pressed', String(on));
  }

  destroy() {
    this.closed = true;
    document.removeEventListener('keydown', this.onKey);
    workspace.removeEventListener('change', this.onWorkspace);
    workspace.setOpen('');
    if (this.ws) this.ws.close(1000, 'view closed');
    clearTimeout(this.retryTimer);
  }

  // open shows the newest page and then follows the socket from its
  // lastSeq. A daemon without the history route gets the old full replay.
  async open() {
    const t0 = performance.now();
    try {
      const page = await api('GET', `/v1/chats/${encodeURIComponent(this.id)}/history?limit=${PAGE}`);
      if (this.closed) return;
      const evs = page.events || [];
      this.firstSeq = evs.length ? evs[0].seq : page.lastSeq + 1;
      this.hasMore = !!page.hasMore;
      for (const ev of evs) this.handle(ev);
      this.lastSeq = Math.max(this.lastSeq, page.lastSeq || 0);
      this.log.dataset.lastSeq = String(this.lastSeq);
      this.olderBtn.hidden = !this.hasMore;
      this.log.scrollTop = this.log.scrollHeight;
    } catch (e) {
      if (this.closed) return;
      if (e.status !== 404 && e.status !== 405) this.seg.node.append(notice('error', `cannot load history: ${e.message}`));
    }
    this.log.dataset.openMs = String(Math.round(performance.now() - t0));
    this.connect();
  }

  async loadOlder() {
    if (!this.hasMore || this.loadingOlder || this.closed) return;
    this.loadingOlder = true;
    this.olderBtn.textContent = 'Loading…';
    try {
      const page = await api('GET', `/v1/chats/${encodeURIComponent(this.id)}/history?limit=${PAGE}&before=${this.firstSeq}`);
      const evs = page.events || [];
      const live = this.seg;
      const seg = new Segment();
      this.seg = seg;
      try {
        for (const ev of evs) this.apply(ev, true);
      } finally {
        this.seg = live;
      }
      const before = this.log.scrollHeight;
      this.older.after(seg.node);
      this.log.scrollTop += this.log.scrollHeight - before;
      if (evs.length) this.firstSeq = evs[0].seq;
      this.hasMore = !!page.hasMore && evs.length > 0;
      this.log.dataset.firstSeq = String(this.firstSeq);
    } catch (e) {
      this.older.append(notice('error', `cannot load earlier messages: ${e.message}`));
    }
    this.olderBtn.textContent = 'Load earlier messages';
    this.olderBtn.hidden = !this.hasMore;
    this.loadingOlder = false;
  }

  connect() {
    if (this.closed) return;
    this.conn.textContent = 'connecting…';
    this.synced = false;
    const ws = new WebSocket(wsURL(`/ws/chat/${encodeURIComponent(this.id)}?since=${this.lastSeq}`));
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.backoff = 250;
      this.conn.textContent = '';
    };
    ws.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch {
        this.seg.node.append(notice('error', 'unreadable frame from the server'));
        return;
      }
      this.handle(ev);
    };
    ws.onclose = (e) => {
      if (this.ws !== ws || this.closed) return;
      this.ws = null;
      // A refused handshake may mean the session ended: api() sends the
      // browser to the login page on 401.
      if (!opened) api('GET', '/v1/info').catch(() => {});
      const wait = this.backoff;
      this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
      this.conn.textContent = `disconnected${e.reason ? ' (' + e.reason + ')' : ''}; reconnecting in ${Math.round(wait / 100) / 10}s`;
      this.retryTimer = setTimeout(() => this.connect(), wait);
    };
  }

  send(obj) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(obj));
    return true;
  }

  async sendPrompt() {
    const text = this.input.value;
    if (!text.trim()) return;
    const clientId = 'c' + (++this.clientSeq);
    if (this.send({ type: 'prompt', text, clientId })) {
      this.input.value = '';
      return;
    }
    try {
      await api('POST', `/v1/chats/${encodeURIComponent(this.id)}/prompt`, { text });
      this.input.value = '';
    } catch (e) {
      this.seg.node.append(notice('error', `prompt not sent: ${e.message}`));
    }
  }

  async cancel() {
    if (this.send({ type: 'cancel' })) return;
    try {
      await api('POST', `/v1/chats/${encodeURIComponent(this.id)}/cancel`);
    } catch (e) {
      this.seg.node.append(notice('error', `cancel failed: ${e.message}`));
    }
  }

  async answer(ev, decision, card) {
    for (const b of card.querySelectorAll('.interaction-buttons button')) b.disabled = true;
    const result = { decision };
    card._state.textContent = 'sending…';
    if (this.send({ type: 'interaction_response', interactionId: ev.interactionId, result })) return;
    try {
      await api('POST', `/v1/chats/${encodeURIComponent(this.id)}/interactions`, { interactionId: ev.interactionId, result });
    } catch (e) {
      for (const b of card.querySelectorAll('.interaction-buttons button')) b.disabled = false;
      card._state.textContent = 'waiting for you';
      card.append(notice('error', `answer not sent: ${e.message}`));
    }
  }

  setRunning(running, initial) {
    this.running = running;
    this.status.dataset.running = initial ? 'unknown' : String(running);
    this.showStatus(initial);
    this.cancelBtn.disabled = !running;
  }

  showStatus(initial) {
    const waitingNow = this.pending > 0;
    this.status.dataset.waiting = String(waitingNow);
    this.status.textContent = initial ? 'connecting…' : waitingNow ? 'waiting for you' : this.running ? 'running' : 'idle';
    this.status.className = 'status ' + (waitingNow ? 'waiting' : this.running ? 'running' : 'idle');
  }

  // handle applies one event; stored events (seq > 0) are applied once.
  handle(ev) {
    if (ev.seq) {
      if (ev.seq <= this.lastSeq) return;
      this.lastSeq = ev.seq;
      this.log.dataset.lastSeq = String(ev.seq);
    }
    const stick = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 40;
    this.apply(ev, false);
    if (this.synced && ev.seq) workspace.markSeen(this.id);
    if (stick) this.log.scrollTop = this.log.scrollHeight;
  }

  // live reports whether an event happens now rather than in replay.
  live(older) {
    return !older && this.synced;
  }

  add(node) {
    this.seg.node.append(node);
    return node;
  }

  systemNote(text) {
    this.sysCount++;
    this.sysBtn.textContent = `System events (${this.sysCount})`;
    this.add(el('div', { class: 'notice notice-system sys' }, text));
  }

  apply(ev, older) {
    switch (ev.type) {
      case 'sync':
        this.synced = true;
        this.setRunning(!!ev.running);
        return;
      case 'user':
        this.seg.thinking = null;
        this.add(el('div', { class: 'msg msg-user', 'data-seq': ev.seq }, el('div', { class: 'msg-body' }, ev.text || '')));
        return;
      case 'assistant_text':
        this.appendText(ev);
        return;
      case 'thinking':
        this.appendThinking(ev);
        return;
      case 'tool_use_start':
        this.toolStart(ev);
        return;
      case 'tool_use_end':
        this.toolEnd(ev, older);
        return;
      case 'interaction_request':
        this.interactionRequest(ev, older);
        return;
      case 'interaction_resolved':
        this.interactionResolved(ev, older);
        return;
      case 'error':
        this.add(notice('error', ev.message || 'error'));
        if (this.live(older) && ev.seq) notify('Run failed', `${this.chatTitle()}: ${ev.message || 'error'}`, `run:${this.id}:${ev.seq}`, `#/chat/${this.id}`);
        return;
      case 'system':
        this.system(ev);
        return;
      case 'complete': {
        const interrupted = ev.status === 'interrupted';
        const line = usageLine(ev.usage);
        this.add(el('div', { class: 'notice notice-complete' + (interrupted ? ' interrupted' : '') },
          interrupted ? 'run interrupted' : 'run complete', line ? el('span', { class: 'turn-usage muted' }, ' · ' + line) : null));
        if (this.live(older)) {
          this.loadUsage();
          notify(interrupted ? 'Run interrupted' : 'Run finished', this.chatTitle(), `run:${this.id}:${ev.seq}`, `#/chat/${this.id}`);
        }
        return;
      }
      case 'turn_status':
        // Routine progress is what the running indicator shows; only the
        // unusual (interrupted, failed, ...) earns a line.
        if (ev.status && !ROUTINE_TURN.has(ev.status)) this.add(notice('status', `turn ${ev.status}`));
        else this.systemNote(`turn ${ev.status || 'status'}`);
        return;
      case 'checkpoint':
        this.systemNote('checkpoint taken');
        return;
      default:
        return; // session, usage_update, provider_event, collaboration: bookkeeping
    }
  }

  appendText(ev) {
    const key = ev.messageId || ev.turnId || 'm';
    let m = this.seg.messages.get(key);
    if (!m) {
      const body = el('div', { class: 'msg-body markdown' });
      const node = el('div', { class: 'msg msg-assistant', 'data-message-id': ev.messageId || '' }, body);
      m = { node, body, text: '' };
      this.seg.messages.set(key, m);
      this.add(node);
    }
    this.seg.thinking = null;
    m.text += ev.text || '';
    if (!this.renderQueued.has(m)) {
      this.renderQueued.add(m);
      requestAnimationFrame(() => {
        this.renderQueued.delete(m);
        renderMarkdown(m.body, m.text);
      });
    }
  }

  // appendThinking groups a message's thinking into one collapsed block:
  // consecutive thinking pieces share it, whatever their ids.
  appendThinking(ev) {
    let g = this.seg.thinking;
    if (!g || g.node !== this.seg.node.lastElementChild) {
      const body = el('div', { class: 'thinking-body' });
      const node = el('details', { class: 'thinking' }, el('summary', {}, 'Thinking'), body);
      g = { node, body, text: '' };
      this.seg.thinking = g;
      this.add(node);
    }
    g.text += ev.text || '';
    g.body.textContent = g.text;
  }

  toolStart(ev) {
    this.seg.thinking = null;
    const card = toolCard(ev);
    if (ev.id) this.tools.set(ev.id, card);
    const end = ev.id && this.ended.get(ev.id);
    if (end) setToolResult(card, end);
    this.add(card);
  }

  toolEnd(ev, older) {
    let card = this.tools.get(ev.id);
    if (older) this.ended.set(ev.id, ev);
    if (!card) {
      if (!older && this.firstSeq > 1) {
        // Its start is on an older page; it is completed when that loads.
        this.ended.set(ev.id, ev);
      }
      this.toolStart({ id: ev.id, name: ev.name || ev.toolName || 'tool' });
      card = this.tools.get(ev.id) || this.seg.node.lastElementChild;
    }
    setToolResult(card, ev);
  }

  findChanges(itemId) {
    const card = itemId && this.tools.get(itemId);
    return card && card._diffs ? card._diffs : null;
  }

  interactionRequest(ev, older) {
    this.seg.thinking = null;
    const card = approvalCard(ev, (id) => this.findChanges(id), (decision, c) => this.answer(ev, decision, c));
    if (ev.interactionId) this.interactions.set(ev.interactionId, card);
    this.add(card);
    const status = this.resolved.get(ev.interactionId);
    if (status) {
      resolveCard(card, status);
      return;
    }
    this.pending++;
    this.showStatus(this.status.dataset.running === 'unknown');
    if (this.live(older)) {
      const a = approvalText(ev, (id) => this.findChanges(id));
      const what = a.code ? `${a.title} ${a.code}${a.cwd ? ' in ' + a.cwd : ''}?` : `${a.title}?`;
      notify('Approval waiting', `${this.chatTitle()}: ${what}`, `approval:${this.id}:${ev.interactionId}`, `#/chat/${this.id}`);
    }
  }

  interactionResolved(ev, older) {
    if (older) this.resolved.set(ev.interactionId, ev.status || 'resolved');
    const card = this.interactions.get(ev.interactionId);
    if (!card) {
      this.resolved.set(ev.interactionId, ev.status || 'resolved');
      this.systemNote(`request resolved: ${ev.status || 'done'}`);
      return;
    }
    if (card.classList.contains('pending')) {
      this.pending = Math.max(0, this.pending - 1);
      this.showStatus(this.status.dataset.running === 'unknown');
    }
    resolveCard(card, ev.status);
  }

  system(ev) {
    if (ev.subtype === 'prompt_accepted') return;
    if (ev.subtype === 'prompt_rejected') {
      this.add(notice('error', `prompt rejected: ${ev.message || 'rejected'}`));
      return;
    }
    const d = obj(ev.data);
    switch (ev.subtype) {
      case 'pushed':
        this.add(pushedCard(d));
        return;
      case 'pull_request':
        this.add(pullRequestCard(d));
        return;
      case 'repo_cloned':
        this.add(notice('system', `cloned ${d.url || 'the repository'}${d.ref ? ' (' + d.ref + ')' : ''} at ${String(d.sha || '').slice(0, 12)}`));
        return;
      case 'repo_clone_failed':
        this.add(notice('error', `cannot clone ${d.url || 'the repository'}: ${d.error || 'failed'}`));
        return;
      default:
    }
    const label = SYSTEM_LABELS[ev.subtype];
    if (label) this.add(notice('system', label));
    else this.systemNote(ev.subtype ? `system: ${ev.subtype}` : 'system notice');
  }
}
