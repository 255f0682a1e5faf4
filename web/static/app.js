// Remote's page: a hash router over the chat list, a chat and its changes,
// the projects, a project terminal and the usage view, beside a sidebar of
// the user's chats kept live by the workspace socket (a drawer on a narrow screen).
// All data comes from the daemon's API through remote-web; see docs/api.md.
import { el, api, notice } from './lib.js';
import { ChatView } from './chat.js';
import { TerminalView } from './terminal.js';
import { FilesView } from './files.js';
import { ChangesView } from './changes.js';
import { ProvidersView } from './providers.js';
import { workspace, waiting } from './workspace.js';
import { notify, notificationState, askPermission } from './notify.js';

const view = document.getElementById('view');
const sideList = document.getElementById('side-chats');
const body = document.body;
let current = null;

function show(...nodes) {
  view.replaceChildren(...nodes);
}

function route() {
  if (current && current.destroy) current.destroy();
  current = null;
  closeDrawer();
  const h = location.hash.replace(/^#/, '') || '/chats';
  const parts = h.split('/').filter(Boolean).map(decodeURIComponent);
  body.dataset.view = parts[0] || 'chats';
  document.title = 'Remote';
  if (parts[0] === 'chat' && parts[1] && parts[2] === 'changes') {
    current = new ChangesView(view, parts[1]);
  } else if (parts[0] === 'chat' && parts[1]) {
    current = new ChatView(view, parts[1]);
  } else if (parts[0] === 'projects') {
    projectsView();
  } else if (parts[0] === 'project' && parts[1] && parts[2] === 'terminal') {
    current = new TerminalView(view, parts[1]);
  } else if (parts[0] === 'project' && parts[1] && parts[2] === 'files') {
    current = new FilesView(view, parts[1]);
  } else if (parts[0] === 'usage') {
    usageView();
  } else if (parts[0] === 'providers') {
    current = new ProvidersView(view);
  } else {
    chatsView();
  }
  renderSidebar();
}

// chatItem is one chat in a list: its title, where it runs, and badges
// for running, waiting for you and unread.
function chatItem(c, cls) {
  const open = workspace.openChat === c.id;
  return el('li', { class: cls + (open ? ' current' : ''), 'data-chat-id': c.id },
    el('a', { href: `#/chat/${encodeURIComponent(c.id)}`, class: 'chat-link', 'aria-current': open ? 'page' : null },
      workspace.unread(c) ? el('span', { class: 'unread', title: 'unread', 'aria-label': 'unread' }, '●') : null,
      el('span', { class: 'chat-link-title' }, c.title || c.id)),
    el('span', { class: 'muted chat-where' }, ` ${c.provider}${c.project ? ' · ' + c.project : ''}`),
    waiting(c) ? el('span', { class: 'badge waiting' }, 'waiting for you') : null,
    c.running ? el('span', { class: 'badge running' }, 'running') : null);
}

function renderSidebar() {
  const chats = workspace.sortedChats();
  sideList.replaceChildren(...chats.map((c) => chatItem(c, 'side-chat')));
  if (!chats.length) sideList.replaceChildren(el('li', { class: 'muted' }, workspace.live ? 'No chats yet.' : 'Loading…'));
  document.getElementById('ws-state').textContent = workspace.live ? '' : 'offline';
  const list = document.getElementById('chat-list');
  if (list) {
    list.replaceChildren(...chats.map((c) => chatItem(c, '')));
    if (!chats.length) list.replaceChildren(el('li', { class: 'muted' }, 'No chats yet.'));
  }
}

workspace.addEventListener('change', renderSidebar);
// Notifications for chats other than the one open here; the open chat's
// view notifies from its own socket.
workspace.addEventListener('attention', (e) => {
  const c = e.detail;
  if (c.id !== workspace.openChat) notify('Approval waiting', c.title || c.id, `attention:${c.id}:${c.lastMessageAt || ''}`, `#/chat/${c.id}`);
});
workspace.addEventListener('finished', async (e) => {
  const c = e.detail;
  if (c.id === workspace.openChat || document.visibilityState !== 'hidden') return;
  let kind = 'Run finished';
  let tag = `finished:${c.id}:${c.lastMessageAt || ''}`;
  try {
    const page = await api('GET', `/v1/chats/${encodeURIComponent(c.id)}/history?limit=20`);
    const last = (page.events || []).filter((ev) => ev.type === 'complete' || ev.type === 'error').pop();
    if (last) {
      tag = `run:${c.id}:${last.seq}`;
      if (last.type === 'error') kind = 'Run failed';
      else if (last.status === 'interrupted') kind = 'Run interrupted';
    }
  } catch { /* the generic notice will do */ }
  notify(kind, c.title || c.id, tag, `#/chat/${c.id}`);
});

// The drawer: the sidebar on a narrow screen.
const menu = document.getElementById('menu');
const scrim = document.getElementById('scrim');
function openDrawer() {
  body.classList.add('drawer-open');
  menu.setAttribute('aria-expanded', 'true');
  scrim.hidden = false;
  const first = sideList.querySelector('a') || document.getElementById('side-new');
  if (first) first.focus();
}
function closeDrawer() {
  if (!body.classList.contains('drawer-open')) return false;
  body.classList.remove('drawer-open');
  menu.setAttribute('aria-expanded', 'false');
  scrim.hidden = true;
  return true;
}
menu.addEventListener('click', () => (body.classList.contains('drawer-open') ? closeDrawer() : openDrawer()));
scrim.addEventListener('click', closeDrawer);
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && closeDrawer()) {
    e.preventDefault();
    menu.focus();
  }
});

// The notifications switch: permission is asked on this click only.
const notifyBtn = document.getElementById('notify-toggle');
function showNotifyState() {
  const st = notificationState();
  notifyBtn.hidden = st === 'unsupported';
  notifyBtn.dataset.state = st;
  notifyBtn.disabled = st !== 'default';
  notifyBtn.textContent = st === 'granted' ? 'Notifications on' : st === 'denied' ? 'Notifications blocked' : 'Enable notifications';
  notifyBtn.title = st === 'granted' ? 'You are notified of approvals and finished runs while this tab is hidden'
    : st === 'denied' ? 'Allow notifications for this site in the browser settings' : '';
}
notifyBtn.addEventListener('click', async () => {
  await askPermission();
  showNotifyState();
});
showNotifyState();

async function chatsView() {
  const list = el('ul', { id: 'chat-list', class: 'list' }, el('li', { class: 'muted' }, 'Loading…'));
  const form = newChatForm();
  show(el('section', {}, el('h2', {}, 'New chat'), form), el('section', {}, el('h2', {}, 'Chats'), list));
  renderSidebar();
}

// usageView shows GET /v1/usage grouped by a key the user picks.
function usageView() {
  const by = el('select', { id: 'usage-by', name: 'by' },
    ...[['chat', 'Chat'], ['project', 'Project'], ['provider', 'Provider'], ['day', 'Day'], ['user', 'User']]
      .map(([v, l]) => el('option', { value: v }, l)));
  const from = el('input', { id: 'usage-from', type: 'date', name: 'from' });
  const to = el('input', { id: 'usage-to', type: 'date', name: 'to' });
  const out = el('div', { id: 'usage-out' });
  const form = el('form', { id: 'usage-form', class: 'row-form' },
    el('label', {}, 'Group by ', by), el('label', {}, 'From ', from), el('label', {}, 'To ', to),
    el('button', { type: 'submit', id: 'usage-show' }, 'Show'));
  const n = new Intl.NumberFormat('en');
  const load = async () => {
    const q = new URLSearchParams({ by: by.value });
    if (from.value) q.set('from', from.value);
    if (to.value) q.set('to', to.value);
    out.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
    try {
      const res = await api('GET', '/v1/usage?' + q);
      const rows = (res && res.rows) || [];
      if (!rows.length) {
        out.replaceChildren(el('p', { class: 'muted' }, 'No runs in this range.'));
        return;
      }
      const total = rows.reduce((t, r) => ({
        runs: t.runs + r.runs, inputTokens: t.inputTokens + r.inputTokens, outputTokens: t.outputTokens + r.outputTokens,
        cacheReadTokens: t.cacheReadTokens + r.cacheReadTokens, cacheCreationTokens: t.cacheCreationTokens + r.cacheCreationTokens,
        costUsd: t.costUsd + (r.costUsd || 0),
      }), { runs: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheCreationTokens: 0, costUsd: 0 });
      const cells = (r, key) => [key, n.format(r.runs), n.format(r.inputTokens), n.format(r.outputTokens),
        n.format(r.cacheReadTokens), n.format(r.cacheCreationTokens), r.costUsd ? '$' + r.costUsd.toFixed(4) : '—'];
      const label = (r) => {
        if (by.value !== 'chat') return r.key || '(none)';
        const c = workspace.chats.get(r.key);
        return el('a', { href: `#/chat/${encodeURIComponent(r.key)}` }, (c && c.title) || r.key);
      };
      const heads = [by.options[by.selectedIndex].text, 'Runs', 'Input', 'Output', 'Cache read', 'Cache write', 'Cost'];
      out.replaceChildren(el('div', { class: 'table-wrap' }, el('table', { id: 'usage-table', class: 'usage' },
        el('thead', {}, el('tr', {}, heads.map((h, i) => el('th', { scope: 'col', class: i ? 'num' : '' }, h)))),
        el('tbody', {}, rows.map((r) => el('tr', { 'data-key': r.key }, cells(r, label(r)).map((v, i) => el(i ? 'td' : 'th', i ? { class: 'num' } : { scope: 'row' }, v))))),
        el('tfoot', {}, el('tr', {}, cells(total, 'Total').map((v, i) => el(i ? 'td' : 'th', i ? { class: 'num' } : { scope: 'row' }, v)))))));
    } catch (e) {
      out.replaceChildren(notice('error', `cannot load usage: ${e.message}`));
    }
  };
  form.addEventListener('submit', (e) => { e.preventDefault(); load(); });
  by.addEventListener('change', load);
  show(el('section', {}, el('h2', {}, 'Usage'), el('p', { class: 'muted' }, 'Tokens and cost of your runs.'), form, out));
  load();
}

// APPROVAL_POLICIES are Codex's AskForApproval values (api.ApprovalPolicies).
const APPROVAL_POLICIES = [
  ['untrusted', 'untrusted: ask before commands that are not known safe'],
  ['on-request', 'on-request: ask when the agent wants to leave the sandbox'],
  ['on-failure', 'on-failure: ask after a sandboxed command fails'],
  ['never', 'never: never ask'],
];

function newChatForm() {
  const provider = el('select', { id: 'new-provider', name: 'provider', required: true });
  const project = el('select', { id: 'new-project', name: 'project' }, el('option', { value: '' }, '(none: on the host)'));
  const cwd = el('input', { id: 'new-cwd', name: 'cwd', 'aria-label': 'Working directory', placeholder: 'working directory (optional)' });
  const title = el('input', { id: 'new-title', name: 'title', 'aria-label': 'Title', placeholder: 'title (optional)' });
  // Approvals and effort are offered only where the provider's
  // capabilities declare them (approvals: Codex and MiniMax).
  const approval = el('select', { id: 'new-approval', name: 'approvalPolicy' },
    el('option', { value: '' }, '(default: never ask)'),
    ...APPROVAL_POLICIES.map(([v, label]) => el('option', { value: v }, label)));
  const approvalLabel = el('label', { id: 'new-approval-label', hidden: true }, 'Approvals ', approval);
  const effort = el('select', { id: 'new-effort', name: 'reasoningEffort' });
  const effortLabel = el('label', { id: 'new-effort-label', hidden: true }, 'Effort ', effort);
  const err = el('div', {});
  const form = el('form', { id: 'new-chat', class: 'row-form' },
    el('label', {}, 'Provider ', provider), el('label', {}, 'Project ', project), approvalLabel, effortLabel, cwd, title,
    el('button', { type: 'submit', id: 'create-chat' }, 'Create'), err);
  const caps = new Map();
  const showChoices = () => {
    const c = caps.get(provider.value) || {};
    approvalLabel.hidden = !c.approvals;
    if (!c.approvals) approval.value = '';
    const efforts = c.efforts || [];
    effortLabel.hidden = efforts.length === 0;
    effort.replaceChildren(el('option', { value: '' }, '(default)'), ...efforts.map((e) => el('option', { value: e }, e)));
  };
  provider.addEventListener('change', showChoices);
  api('GET', '/v1/providers').then((ps) => {
    for (const p of ps || []) {
      if (p.enabled === false) continue;
      caps.set(p.id, p.capabilities || {});
      provider.append(el('option', { value: p.id }, p.label || p.id));
    }
    showChoices();
  }).catch((e) => err.replaceChildren(notice('error', `cannot list providers: ${e.message}`)));
  api('GET', '/v1/projects').then((ps) => {
    for (const p of ps || []) project.append(el('option', { value: p.name }, p.name));
  }).catch(() => { /* projects are optional */ });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { provider: provider.value };
    if (project.value) body.project = project.value;
    if (cwd.value.trim()) body.cwd = cwd.value.trim();
    if (title.value.trim()) body.title = title.value.trim();
    if (!approvalLabel.hidden && approval.value) body.approvalPolicy = approval.value;
    if (!effortLabel.hidden && effort.value) body.reasoningEffort = effort.value;
    try {
      const c = await api('POST', '/v1/chats', body);
      location.hash = `#/chat/${encodeURIComponent(c.id)}`;
    } catch (e2) {
      err.replaceChildren(notice('error', `cannot create chat: ${e2.message}`));
    }
  });
  return form;
}

async function projectsView() {
  const list = el('div', { id: 'project-list' }, el('p', { class: 'muted' }, 'Loading…'));
  const name = el('input', { id: 'project-name', name: 'name', 'aria-label': 'Project name', placeholder: 'name', required: true });
  const image = el('input', { id: 'project-image', name: 'image', 'aria-label': 'Image', placeholder: 'image (optional)' });
  const err = el('div', {});
  const form = el('form', { id: 'new-project-form', class: 'row-form' }, name, image,
    el('button', { type: 'submit', id: 'create-project' }, 'Create project'), err);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { name: name.value.trim() };
    if (image.value.trim()) body.image = image.value.trim();
    try {
      await api('POST', '/v1/projects', body);
      name.value = '';
      image.value = '';
      err.replaceChildren();
      loadProjects(list);
    } catch (e2) {
      err.replaceChildren(notice('error', `cannot create project: ${e2.message}`));
    }
  });
  show(el('section', {}, el('h2', {}, 'New project'), form), el('section', {}, el('h2', {}, 'Projects'), list));
  loadProjects(list);
}

async function loadProjects(list) {
  try {
    const ps = (await api('GET', '/v1/projects')) || [];
    list.replaceChildren(...ps.map((p) => projectCard(p, list)));
    if (!ps.length) list.replaceChildren(el('p', { class: 'muted' }, 'No projects yet.'));
  } catch (e) {
    list.replaceChildren(notice('error', `cannot list projects: ${e.message}`));
  }
}

function projectCard(p, list) {
  const n = encodeURIComponent(p.name);
  const msg = el('div', {});
  const act = (verb) => async () => {
    msg.replaceChildren(notice('status', `${verb}…`));
    try {
      await api('POST', `/v1/projects/${n}/${verb}`);
      loadProjects(list);
    } catch (e) {
      msg.replaceChildren(notice('error', `${verb} failed: ${e.message}`));
    }
  };
  const secrets = el('ul', { class: 'secrets' });
  const key = el('input', { 'aria-label': 'Secret name', placeholder: 'KEY', pattern: '[A-Za-z_][A-Za-z0-9_]*', required: true, class: 'secret-key' });
  const value = el('input', { 'aria-label': 'Secret value', placeholder: 'value', type: 'password', autocomplete: 'off', required: true, class: 'secret-value' });
  const secretForm = el('form', { class: 'row-form' }, key, value, el('button', { type: 'submit' }, 'Set secret'));
  const loadSecrets = async () => {
    try {
      const ss = (await api('GET', `/v1/projects/${n}/secrets`)) || [];
      secrets.replaceChildren(...ss.map((s) => el('li', {}, el('code', {}, s.key), ' ',
        el('button', { type: 'button', class: 'secondary small', onclick: async () => {
          try { await api('DELETE', `/v1/projects/${n}/secrets/${encodeURIComponent(s.key)}`); loadSecrets(); } catch (e) { msg.replaceChildren(notice('error', e.message)); }
        } }, 'Delete'))));
      if (!ss.length) secrets.replaceChildren(el('li', { class: 'muted' }, 'No secrets.'));
    } catch (e) {
      secrets.replaceChildren(el('li', {}, notice('error', `cannot list secrets: ${e.message}`)));
    }
  };
  secretForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      await api('PUT', `/v1/projects/${n}/secrets/${encodeURIComponent(key.value)}`, { value: value.value });
      key.value = '';
      value.value = '';
      loadSecrets();
    } catch (e2) {
      msg.replaceChildren(notice('error', `cannot set secret: ${e2.message}`));
    }
  });
  const details = el('details', { class: 'project-secrets' }, el('summary', {}, 'Secrets'), secrets, secretForm);
  details.addEventListener('toggle', () => { if (details.open) loadSecrets(); });
  return el('div', { class: 'card project', 'data-project': p.name },
    el('div', { class: 'project-head' }, el('strong', {}, p.name), ' ',
      el('span', { class: 'badge ' + (p.status || 'unknown') }, p.status || 'unknown'),
      el('span', { class: 'muted' }, ` ${p.container || ''}`)),
    el('div', { class: 'project-buttons' },
      el('button', { type: 'button', onclick: act('start'), class: 'start' }, 'Start'),
      el('button', { type: 'button', onclick: act('stop'), class: 'secondary stop' }, 'Stop'),
      el('a', { href: `#/project/${n}/terminal`, class: 'button terminal-link' }, 'Terminal'),
      el('a', { href: `#/project/${n}/files`, class: 'button secondary files-link' }, 'Files'),
      // Previews open on remote-web's preview origin, never on this one.
      ...(p.ports || []).map((port) => el('a', { href: `/preview/${n}/${port}`, target: '_blank', rel: 'noopener noreferrer',
        class: 'button secondary preview-link', 'data-port': String(port) }, `Preview :${port}`))),
    msg, details);
}

window.addEventListener('hashchange', route);
workspace.start();
route();
