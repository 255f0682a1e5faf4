// The live workspace: one WebSocket on /ws/workspace (a snapshot of the
// caller's chats and projects, then chat.upsert/chat.delete/
// project.upsert/project.delete), reconnecting with backoff. Without the
// socket (an older daemon) it polls GET /v1/chats. Unread marks compare a
// chat's lastMessageAt with when this browser last had it open.
import { api, wsURL } from './lib.js';

const SEEN_KEY = 'remote.seen';
const POLL_MS = 15000;

// waiting reports whether a chat waits for its user: api.Chat's live
// attention ("approval" while a run waits for an answer).
export function waiting(c) {
  return !!(c && c.attention);
}

function chatTime(c) {
  return String(c.lastMessageAt || c.createdAt || '');
}

class Workspace extends EventTarget {
  constructor() {
    super();
    this.chats = new Map();
    this.projects = new Map();
    this.openChat = '';
    this.live = false;
    this.backoff = 500;
    try { this.seen = JSON.parse(localStorage.getItem(SEEN_KEY) || '{}') || {}; } catch { this.seen = {}; }
    this.firstRun = localStorage.getItem(SEEN_KEY) === null;
    window.addEventListener('storage', (e) => {
      if (e.key !== SEEN_KEY) return;
      try { this.seen = JSON.parse(e.newValue || '{}') || {}; } catch { /* keep ours */ }
      this.changed();
    });
  }

  start() {
    if (this.started) return;
    this.started = true;
    this.connect();
  }

  connect() {
    const ws = new WebSocket(wsURL('/ws/workspace'));
    this.ws = ws;
    let opened = false;
    ws.onopen = () => { opened = true; this.backoff = 500; };
    ws.onmessage = (m) => {
      let msg;
      try { msg = JSON.parse(m.data); } catch { return; }
      this.apply(msg);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.live = false;
      this.changed();
      if (!opened) {
        api('GET', '/v1/info').catch(() => {}); // to the login page on 401
        this.poll();
      }
      const wait = this.backoff;
      this.backoff = Math.min(this.backoff * 2, 30000);
      setTimeout(() => this.connect(), wait);
    };
  }

  // poll is the fallback while the socket is not there.
  async poll() {
    if (this.live || this.polling) return;
    this.polling = true;
    try {
      const chats = (await api('GET', '/v1/chats')) || [];
      if (!this.live) this.apply({ type: 'workspace.snapshot', chats, projects: [...this.projects.values()] }, true);
    } catch { /* the next connect or poll tries again */ }
    this.polling = false;
    setTimeout(() => { if (!this.live) this.poll(); }, POLL_MS);
  }

  apply(msg, polled) {
    switch (msg.type) {
      case 'workspace.snapshot': {
        if (!polled) this.live = true;
        const old = this.chats;
        this.chats = new Map((msg.chats || []).map((c) => [c.id, c]));
        this.projects = new Map((msg.projects || []).map((p) => [p.id || p.name, p]));
        if (this.firstRun) {
          for (const c of this.chats.values()) this.seen[c.id] = chatTime(c);
          this.firstRun = false;
          this.saveSeen();
        }
        if (old.size) for (const c of this.chats.values()) this.transition(old.get(c.id), c);
        break;
      }
      case 'chat.upsert': {
        const c = msg.chat;
        if (!c || !c.id) return;
        const prev = this.chats.get(c.id);
        this.chats.set(c.id, c);
        if (!prev && !(c.id in this.seen) && this.openChat !== c.id) {
          this.seen[c.id] = String(c.createdAt || '');
          this.saveSeen();
        }
        this.transition(prev, c);
        break;
      }
      case 'chat.delete':
        this.chats.delete(msg.id);
        break;
      case 'project.upsert':
        if (msg.project) this.projects.set(msg.project.id || msg.project.name, msg.project);
        break;
      case 'project.delete':
        this.projects.delete(msg.id);
        break;
      default:
        return;
    }
    if (this.openChat && this.chats.has(this.openChat)) this.markSeen(this.openChat, false);
    this.changed();
  }

  // transition tells listeners what changed in one chat: an approval
  // began waiting, or a run ended.
  transition(prev, c) {
    if (!prev) return;
    if (!waiting(prev) && waiting(c)) this.dispatchEvent(new CustomEvent('attention', { detail: c }));
    if (prev.running && !c.running) this.dispatchEvent(new CustomEvent('finished', { detail: c }));
  }

  changed() {
    this.dispatchEvent(new Event('change'));
  }

  unread(c) {
    if (c.id === this.openChat) return false;
    // A chat this browser never listed is new since it last looked.
    const seen = this.seen[c.id] ?? String(c.createdAt || '');
    return chatTime(c) > seen;
  }

  markSeen(id, notify = true) {
    const c = this.chats.get(id);
    const t = c ? chatTime(c) : new Date().toISOString();
    if (this.seen[id] === t) return;
    this.seen[id] = t;
    this.saveSeen();
    if (notify) this.changed();
  }

  saveSeen() {
    try { localStorage.setItem(SEEN_KEY, JSON.stringify(this.seen)); } catch { /* private mode */ }
  }

  setOpen(id) {
    this.openChat = id || '';
    if (id) this.markSeen(id, false);
    this.changed();
  }

  // upsertLocal applies a change this tab made (a rename) before the
  // socket echoes it.
  upsertLocal(c) {
    if (c && c.id) this.apply({ type: 'chat.upsert', chat: { ...(this.chats.get(c.id) || {}), ...c } });
  }

  sortedChats() {
    return [...this.chats.values()].sort((a, b) => chatTime(b).localeCompare(chatTime(a)));
  }
}

export const workspace = new Workspace();
