// The chat view: one WebSocket on /ws/chat/{id}?since=<last seq>, events
// rendered in order and deduplicated by seq, reconnect with backoff.
import { el, api, wsURL, notice, pretty, renderMarkdown } from './lib.js';

const MAX_BACKOFF_MS = 10000;
const ROUTINE_TURN = new Set(['active', 'inProgress', 'idle', 'completed', 'running', 'started']);
// Provider bookkeeping that is not worth a line in the chat.
const QUIET_SYSTEM = new Set(['init', 'status', 'hook_started', 'hook_response']);

export class ChatView {
  constructor(root, chatId) {
    this.root = root;
    this.id = chatId;
    this.lastSeq = 0;
    this.running = false;
    this.closed = false;
    this.ws = null;
    this.backoff = 250;
    this.clientSeq = 0;
    this.messages = new Map(); // messageId -> {node, text, kind}
    this.tools = new Map(); // tool id -> card
    this.interactions = new Map(); // interactionId -> card
    this.renderQueued = new Set();
    this.build();
    this.loadMeta();
    this.connect();
  }

  build() {
    this.title = el('h2', { class: 'chat-title' }, 'Chat ' + this.id);
    this.status = el('span', { id: 'chat-status', class: 'status', 'data-running': 'unknown' }, 'connecting…');
    this.conn = el('span', { id: 'conn-status', class: 'conn' }, '');
    this.log = el('div', { id: 'chat-log', class: 'chat-log', 'aria-live': 'polite' });
    this.input = el('textarea', { id: 'prompt', rows: 3, placeholder: 'Message (Enter sends, Shift+Enter for a new line)' });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.sendPrompt();
      }
    });
    this.sendBtn = el('button', { id: 'send', type: 'button', onclick: () => this.sendPrompt() }, 'Send');
    this.cancelBtn = el('button', { id: 'cancel', type: 'button', class: 'secondary', onclick: () => this.cancel() }, 'Cancel');
    this.root.replaceChildren(
      el('div', { class: 'chat' },
        el('div', { class: 'chat-head' }, el('a', { href: '#/chats' }, '← Chats'), this.title, this.status, this.conn),
        this.log,
        el('div', { class: 'composer' }, this.input, el('div', { class: 'composer-buttons' }, this.sendBtn, this.cancelBtn))));
    this.setRunning(false, true);
  }

  async loadMeta() {
    try {
      const c = await api('GET', `/v1/chats/${encodeURIComponent(this.id)}`);
      const where = c.project ? `project ${c.project}` : 'host';
      const prefs = [c.approvalPolicy && `approvals: ${c.approvalPolicy}`, c.reasoningEffort && `effort: ${c.reasoningEffort}`].filter(Boolean);
      this.title.textContent = [`${c.title || 'Chat ' + c.id}`, c.provider, where, ...prefs].join(' · ');
    } catch (e) {
      this.log.append(notice('error', `cannot load chat: ${e.message}`));
    }
  }

  destroy() {
    this.closed = true;
    if (this.ws) this.ws.close(1000, 'view closed');
    clearTimeout(this.retryTimer);
  }

  connect() {
    if (this.closed) return;
    this.conn.textContent = 'connecting…';
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
        this.log.append(notice('error', 'unreadable frame from the server'));
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
      this.log.append(notice('error', `prompt not sent: ${e.message}`));
    }
  }

  async cancel() {
    if (this.send({ type: 'cancel' })) return;
    try {
      await api('POST', `/v1/chats/${encodeURIComponent(this.id)}/cancel`);
    } catch (e) {
      this.log.append(notice('error', `cancel failed: ${e.message}`));
    }
  }

  async answer(ev, decision, card) {
    for (const b of card.querySelectorAll('button')) b.disabled = true;
    const result = { decision };
    if (this.send({ type: 'interaction_response', interactionId: ev.interactionId, result })) return;
    try {
      await api('POST', `/v1/chats/${encodeURIComponent(this.id)}/interactions`, { interactionId: ev.interactionId, result });
    } catch (e) {
      for (const b of card.querySelectorAll('button')) b.disabled = false;
      card.append(notice('error', `answer not sent: ${e.message}`));
    }
  }

  setRunning(running, initial) {
    this.running = running;
    this.status.dataset.running = initial ? 'unknown' : String(running);
    this.status.textContent = initial ? 'connecting…' : running ? 'running' : 'idle';
    this.status.className = 'status ' + (running ? 'running' : 'idle');
    this.cancelBtn.disabled = !running;
  }

  // handle applies one event; stored events (seq > 0) are applied once.
  handle(ev) {
    if (ev.seq) {
      if (ev.seq <= this.lastSeq) return;
      this.lastSeq = ev.seq;
      this.log.dataset.lastSeq = String(ev.seq);
    }
    const stick = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 40;
    this.apply(ev);
    if (stick) this.log.scrollTop = this.log.scrollHeight;
  }

  apply(ev) {
    switch (ev.type) {
      case 'sync':
        this.setRunning(!!ev.running);
        return;
      case 'user':
        this.log.append(el('div', { class: 'msg msg-user', 'data-seq': ev.seq }, el('div', { class: 'msg-body' }, ev.text || '')));
        return;
      case 'assistant_text':
        this.appendText(ev, 'assistant');
        return;
      case 'thinking':
        this.appendText(ev, 'thinking');
        return;
      case 'tool_use_start':
        this.toolStart(ev);
        return;
      case 'tool_use_end':
        this.toolEnd(ev);
        return;
      case 'interaction_request':
        this.interactionRequest(ev);
        return;
      case 'interaction_resolved':
        this.interactionResolved(ev);
        return;
      case 'error':
        this.log.append(notice('error', ev.message || 'error'));
        return;
      case 'system':
        this.system(ev);
        return;
      case 'complete':
        this.log.append(notice('complete', 'run complete'));
        return;
      case 'turn_status':
        // Routine progress is what the running indicator shows; only the
        // unusual (interrupted, failed, ...) earns a line.
        if (ev.status && !ROUTINE_TURN.has(ev.status)) this.log.append(notice('status', `turn ${ev.status}`));
        return;
      case 'session':
      case 'usage_update':
      case 'provider_event':
      case 'collaboration':
        return; // bookkeeping, not shown
      default:
        return;
    }
  }

  appendText(ev, kind) {
    const key = kind + ':' + (ev.messageId || ev.turnId || 'm');
    let m = this.messages.get(key);
    if (!m) {
      let node, body;
      if (kind === 'thinking') {
        body = el('div', { class: 'thinking-body' });
        node = el('details', { class: 'thinking' }, el('summary', {}, 'Thinking'), body);
      } else {
        body = el('div', { class: 'msg-body markdown' });
        node = el('div', { class: 'msg msg-assistant', 'data-message-id': ev.messageId || '' }, body);
      }
      m = { node, body, text: '', kind };
      this.messages.set(key, m);
      this.log.append(node);
    }
    m.text += ev.text || '';
    if (kind === 'thinking') {
      m.body.textContent = m.text;
      return;
    }
    if (!this.renderQueued.has(m)) {
      this.renderQueued.add(m);
      requestAnimationFrame(() => {
        this.renderQueued.delete(m);
        renderMarkdown(m.body, m.text);
      });
    }
  }

  toolStart(ev) {
    const out = el('pre', { class: 'tool-output' });
    const card = el('details', { class: 'card tool running', 'data-tool-id': ev.id || '' },
      el('summary', {}, el('span', { class: 'tool-name' }, ev.name || 'tool'), ' ', el('span', { class: 'tool-state' }, 'running')),
      el('pre', { class: 'tool-input' }, pretty(ev.input)),
      out);
    card._out = out;
    if (ev.id) this.tools.set(ev.id, card);
    this.log.append(card);
  }

  toolEnd(ev) {
    let card = this.tools.get(ev.id);
    if (!card) {
      this.toolStart({ id: ev.id, name: ev.name || ev.toolName || 'tool' });
      card = this.tools.get(ev.id) || this.log.lastElementChild;
    }
    card.classList.remove('running');
    card.classList.add(ev.isError ? 'failed' : 'done');
    card.querySelector('.tool-state').textContent = ev.isError ? 'failed' : 'done';
    card._out.textContent = ev.output || '';
  }

  interactionRequest(ev) {
    const accept = el('button', { type: 'button', class: 'accept' }, 'Accept');
    const decline = el('button', { type: 'button', class: 'decline secondary' }, 'Decline');
    const state = el('span', { class: 'interaction-state' }, 'waiting for you');
    const card = el('div', { class: 'card interaction pending', 'data-interaction-id': ev.interactionId || '' },
      el('div', { class: 'interaction-head' }, el('strong', {}, ev.name || 'request'), ' ', state),
      el('pre', { class: 'interaction-input' }, pretty(ev.input)),
      el('div', { class: 'interaction-buttons' }, accept, decline));
    card._state = state;
    accept.addEventListener('click', () => this.answer(ev, 'accept', card));
    decline.addEventListener('click', () => this.answer(ev, 'decline', card));
    if (ev.interactionId) this.interactions.set(ev.interactionId, card);
    this.log.append(card);
  }

  interactionResolved(ev) {
    const card = this.interactions.get(ev.interactionId);
    if (!card) {
      this.log.append(notice('status', `request resolved: ${ev.status || 'done'}`));
      return;
    }
    card.classList.remove('pending');
    card.classList.add('resolved');
    card._state.textContent = ev.status || 'resolved';
    for (const b of card.querySelectorAll('button')) b.disabled = true;
  }

  system(ev) {
    if (ev.subtype === 'prompt_accepted') return;
    if (ev.subtype === 'prompt_rejected') {
      this.log.append(notice('error', `prompt rejected: ${ev.message || 'rejected'}`));
      return;
    }
    const labels = {
      container_starting: 'starting the project container…',
      container_preparing: 'preparing the project container…',
      session_recovered: 'session recovered',
      daemon_restarted: 'the daemon restarted; the run was interrupted',
    };
    if (!labels[ev.subtype] && QUIET_SYSTEM.has(ev.subtype)) return;
    const text = labels[ev.subtype] || (ev.subtype ? `system: ${ev.subtype}` : 'system notice');
    this.log.append(notice('system', text));
  }
}
