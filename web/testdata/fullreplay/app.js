// Remote's page: a hash router over the chat list, a chat, the projects
// and a project terminal. All data comes from the daemon's API through
// remote-web; see docs/api.md.
import { el, api, notice } from './lib.js';
import { ChatView } from './chat.js';
import { TerminalView } from './terminal.js';

const view = document.getElementById('view');
let current = null;

function show(...nodes) {
  view.replaceChildren(...nodes);
}

function route() {
  if (current && current.destroy) current.destroy();
  current = null;
  const h = location.hash.replace(/^#/, '') || '/chats';
  const parts = h.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'chat' && parts[1]) {
    current = new ChatView(view, parts[1]);
  } else if (parts[0] === 'projects') {
    projectsView();
  } else if (parts[0] === 'project' && parts[1] && parts[2] === 'terminal') {
    current = new TerminalView(view, parts[1]);
  } else {
    chatsView();
  }
}

async function chatsView() {
  const list = el('ul', { id: 'chat-list', class: 'list' }, el('li', { class: 'muted' }, 'Loading…'));
  const form = newChatForm();
  show(el('section', {}, el('h2', {}, 'New chat'), form), el('section', {}, el('h2', {}, 'Chats'), list));
  try {
    const chats = (await api('GET', '/v1/chats')) || [];
    chats.sort((a, b) => String(b.lastMessageAt || b.createdAt).localeCompare(String(a.lastMessageAt || a.createdAt)));
    list.replaceChildren(...chats.map((c) => el('li', {},
      el('a', { href: `#/chat/${encodeURIComponent(c.id)}`, class: 'chat-link' }, c.title || c.id),
      el('span', { class: 'muted' }, ` ${c.provider}${c.project ? ' · ' + c.project : ''}`),
      c.running ? el('span', { class: 'badge running' }, 'running') : null)));
    if (!chats.length) list.replaceChildren(el('li', { class: 'muted' }, 'No chats yet.'));
  } catch (e) {
    list.replaceChildren(notice('error', `cannot list chats: ${e.message}`));
  }
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
  const cwd = el('input', { id: 'new-cwd', name: 'cwd', placeholder: 'working directory (optional)' });
  const title = el('input', { id: 'new-title', name: 'title', placeholder: 'title (optional)' });
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
  const name = el('input', { id: 'project-name', name: 'name', placeholder: 'name', required: true });
  const image = el('input', { id: 'project-image', name: 'image', placeholder: 'image (optional)' });
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
  const key = el('input', { placeholder: 'KEY', pattern: '[A-Za-z_][A-Za-z0-9_]*', required: true, class: 'secret-key' });
  const value = el('input', { placeholder: 'value', type: 'password', autocomplete: 'off', required: true, class: 'secret-value' });
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
      el('a', { href: `#/project/${n}/terminal`, class: 'button terminal-link' }, 'Terminal')),
    msg, details);
}

window.addEventListener('hashchange', route);
route();
