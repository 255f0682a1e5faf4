// Cards a person reads: a tool call as its name and a one-line summary
// (output collapsed), file changes as diffs, and approval requests as the
// sentence of what will happen with the answers the request offers.
// Everything here builds DOM with textContent; no agent text is HTML.
import { el, pretty } from './lib.js';

const SUMMARY_MAX = 140;

// obj parses a tool or request input into an object ({} when it is not one).
export function obj(raw) {
  if (raw && typeof raw === 'object') return raw;
  if (typeof raw === 'string') {
    try {
      const v = JSON.parse(raw);
      return v && typeof v === 'object' ? v : { value: v };
    } catch { return { value: raw }; }
  }
  return {};
}

function oneLine(s) {
  s = String(s ?? '').replace(/\s+/g, ' ').trim();
  return s.length > SUMMARY_MAX ? s.slice(0, SUMMARY_MAX - 1) + '…' : s;
}

// commandText turns Codex's command (a string or an argv array) into text.
export function commandText(c) {
  if (Array.isArray(c)) return c.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${String(a).replace(/'/g, `'\\''`)}'`)).join(' ');
  return String(c ?? '');
}

// toolSummary is the one line shown next to a tool's name.
export function toolSummary(name, input) {
  const i = obj(input);
  const base = String(name || '').split('/').pop();
  switch (base) {
    case 'Bash': return i.command ? '$ ' + oneLine(commandText(i.command)) : oneLine(i.description);
    case 'Read': case 'Write': case 'Edit': case 'MultiEdit': case 'NotebookEdit': case 'NotebookRead':
      return oneLine(i.file_path || i.notebook_path || i.path);
    case 'Grep': case 'Glob': return oneLine([i.pattern, i.path && 'in ' + i.path].filter(Boolean).join(' '));
    case 'WebFetch': return oneLine(i.url);
    case 'WebSearch': return oneLine(i.query);
    case 'Task': case 'Agent': return oneLine(i.description || i.prompt);
    case 'TodoWrite': return Array.isArray(i.todos) ? `${i.todos.length} to-dos` : '';
    case 'Patch': {
      const ch = changeList(i.changes);
      return ch.length === 1 ? oneLine(ch[0].path) : `${ch.length} files: ` + oneLine(ch.map((c) => c.path).join(', '));
    }
    default: {
      for (const v of Object.values(i)) if (typeof v === 'string' && v.trim()) return oneLine(v);
      return '';
    }
  }
}

// changeList normalizes Codex's file changes ([{path, kind, diff}] or
// {path: {...}}) to [{path, kind, diff}].
export function changeList(changes) {
  if (Array.isArray(changes)) {
    return changes.map((c) => ({ path: c.path || '', kind: kindName(c.kind), diff: c.diff || c.unified_diff || c.content || '' }));
  }
  if (changes && typeof changes === 'object') {
    return Object.entries(changes).map(([path, c]) => {
      const kind = c && typeof c === 'object' ? (c.type || Object.keys(c)[0] || '') : String(c);
      const inner = c && typeof c === 'object' ? (c[kind] && typeof c[kind] === 'object' ? c[kind] : c) : {};
      const diff = inner.unified_diff || inner.diff || (inner.content ? addLines(inner.content) : '');
      return { path, kind: kindName(kind), diff };
    });
  }
  return [];
}

function kindName(k) {
  if (k && typeof k === 'object') return k.type || Object.keys(k)[0] || '';
  return String(k || '');
}

function addLines(text) {
  return String(text).split('\n').map((l) => '+' + l).join('\n');
}

// fileDiffs returns [{path, kind, diff}] for a tool call that changes
// files, or null for one that does not.
export function fileDiffs(name, input) {
  const i = obj(input);
  switch (String(name || '').split('/').pop()) {
    case 'Edit':
      return [{ path: i.file_path, kind: 'update', diff: editDiff(i.old_string, i.new_string) }];
    case 'MultiEdit':
      return [{ path: i.file_path, kind: 'update', diff: (i.edits || []).map((e) => editDiff(e.old_string, e.new_string)).join('\n') }];
    case 'Write':
      return [{ path: i.file_path, kind: 'write', diff: addLines(i.content ?? '') }];
    case 'Patch':
      return changeList(i.changes);
    default:
      return null;
  }
}

function editDiff(oldS, newS) {
  const minus = String(oldS ?? '').split('\n').map((l) => '-' + l);
  const plus = String(newS ?? '').split('\n').map((l) => '+' + l);
  return ['@@', ...minus, ...plus].join('\n');
}

// diffView renders files' diffs with added, removed and hunk lines marked.
export function diffView(files) {
  return el('div', { class: 'diffs' }, files.map((f) => el('div', { class: 'diff-file' },
    el('div', { class: 'diff-path' }, el('code', {}, f.path || '(file)'), f.kind ? el('span', { class: 'muted' }, ' ' + f.kind) : null),
    diffPre(f.diff))));
}

// diffPre renders unified diff text as a <pre>, one text node per line
// marked added, removed, hunk header or file header.
export function diffPre(text, attrs) {
  return el('pre', { class: 'diff', ...attrs }, String(text || '').split('\n').map((line) => {
    let cls = 'ctx';
    if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff --git ') || line.startsWith('index ')) cls = 'meta';
    else if (line.startsWith('+')) cls = 'add';
    else if (line.startsWith('-')) cls = 'del';
    else if (line.startsWith('@@')) cls = 'hunk';
    return el('span', { class: 'dl ' + cls }, line + '\n');
  }));
}

// httpURL returns u when it is an absolute http(s) URL, else null: only
// such a URL from the daemon (a forge's answer) becomes a link.
export function httpURL(u) {
  if (typeof u !== 'string') return null;
  try {
    const p = new URL(u);
    return p.protocol === 'http:' || p.protocol === 'https:' ? u : null;
  } catch { return null; }
}

// pushedCard shows system/pushed {branch, sha}.
export function pushedCard(data) {
  const d = obj(data);
  return el('div', { class: 'card git-event pushed' }, el('strong', {}, 'Pushed'), ' branch ',
    el('code', { class: 'pushed-branch' }, String(d.branch ?? '')), ' at ',
    el('code', { class: 'pushed-sha', title: String(d.sha ?? '') }, String(d.sha ?? '').slice(0, 12)));
}

// pullRequestCard shows system/pull_request {url, number}: the link opens
// in a new tab with no handle on this page, and only for an http(s) URL
// (anything else is shown as text).
export function pullRequestCard(data) {
  const d = obj(data);
  const url = String(d.url ?? '');
  const safe = httpURL(url);
  const label = `#${Number(d.number) || '?'}`;
  return el('div', { class: 'card git-event pull-request' }, el('strong', {}, 'Pull request'), ' ',
    safe ? el('a', { class: 'pr-link', href: safe, target: '_blank', rel: 'noopener noreferrer' }, `${label} ${safe}`)
      : el('span', { class: 'pr-url' }, `${label} ${url}`, el('span', { class: 'muted' }, ' (not a web address: no link)')));
}

// toolCard builds a collapsed tool card; setResult fills its output.
export function toolCard(ev) {
  const name = ev.name || ev.toolName || 'tool';
  const state = el('span', { class: 'tool-state' }, 'running');
  const out = el('pre', { class: 'tool-output', hidden: true });
  const diffs = fileDiffs(name, ev.input);
  const body = [];
  if (diffs && diffs.length) body.push(diffView(diffs));
  else if (ev.input !== undefined && Object.keys(obj(ev.input)).length) {
    body.push(el('details', { class: 'tool-input-box' }, el('summary', {}, 'Input'), el('pre', { class: 'tool-input' }, pretty(ev.input))));
  }
  body.push(out);
  const card = el('details', { class: 'card tool running' + (diffs ? ' file-change' : ''), 'data-tool-id': ev.id || '' },
    el('summary', {}, el('span', { class: 'tool-name' }, name), ' ',
      el('span', { class: 'tool-summary' }, toolSummary(name, ev.input)), ' ', state),
    ...body);
  if (diffs) card.open = true; // a change is what the reader wants to see
  card._out = out;
  card._state = state;
  card._diffs = diffs;
  card._name = name;
  card._input = ev.input;
  return card;
}

export function setToolResult(card, ev) {
  card.classList.remove('running');
  card.classList.add(ev.isError ? 'failed' : 'done');
  card._state.textContent = ev.isError ? 'failed' : 'done';
  card._out.textContent = ev.output || '';
  card._out.hidden = !ev.output;
}

// SESSION_METHODS are the requests whose answer takes acceptForSession
// even when they list no availableDecisions (providers.md, Approvals).
const SESSION_METHODS = new Set(['item/commandExecution/requestApproval', 'item/fileChange/requestApproval']);

// approvalText describes a request as a person reads it: a title, code
// to show, the working directory, the agent's reason, and which answers
// the request offers. findChanges(itemId) returns the diffs of the file
// change the request is about, when the page has seen it.
export function approvalText(ev, findChanges) {
  const i = obj(ev.input);
  const method = ev.name || '';
  const r = { title: '', code: '', cwd: i.cwd || '', reason: i.reason || i.justification || '', diffs: null, session: false };
  const decisions = Array.isArray(i.availableDecisions) ? i.availableDecisions.filter((d) => typeof d === 'string') : null;
  r.session = decisions ? decisions.includes('acceptForSession') : SESSION_METHODS.has(method);
  if (method === 'item/commandExecution/requestApproval' || method === 'execCommandApproval' || (i.command && !i.changes && !i.fileChanges)) {
    r.title = 'Run';
    r.code = commandText(i.command);
  } else if (method === 'item/fileChange/requestApproval' || method === 'applyPatchApproval' || i.changes || i.fileChanges) {
    r.title = 'Apply file changes';
    const own = changeList(i.changes || i.fileChanges);
    r.diffs = own.length ? own : (findChanges && findChanges(i.itemId)) || null;
    if (i.grantRoot) r.grantRoot = i.grantRoot;
  } else if (method === 'item/permissions/requestApproval') {
    r.title = 'Grant permissions';
    r.code = oneLine(pretty(i.permissions ?? i));
  } else {
    const tool = i.tool_name || i.toolName || i.name || method || 'the tool';
    const ti = i.input || i.tool_input || i.arguments || i;
    r.title = `Use ${tool}`;
    r.code = toolSummary(tool, ti);
    const d = fileDiffs(tool, ti);
    if (d) r.diffs = d;
  }
  return r;
}

// approvalCard builds the card; answer(decision) sends the answer.
export function approvalCard(ev, findChanges, answer) {
  const a = approvalText(ev, findChanges);
  const q = el('p', { class: 'approval-question' });
  if (a.code) {
    q.append(a.title + ' ', el('code', { class: 'approval-command' }, a.code));
    if (a.cwd) q.append(' in ', el('code', { class: 'approval-cwd' }, a.cwd));
    q.append('?');
  } else {
    q.append(a.title + (a.cwd ? ' in ' : ''), a.cwd ? el('code', { class: 'approval-cwd' }, a.cwd) : '', '?');
  }
  if (a.grantRoot) q.append(' ', el('span', { class: 'muted' }, 'It also asks to write anywhere under '), el('code', {}, a.grantRoot), '.');
  const state = el('span', { class: 'interaction-state' }, 'waiting for you');
  const buttons = [el('button', { type: 'button', class: 'accept' }, 'Accept')];
  if (a.session) buttons.push(el('button', { type: 'button', class: 'accept-session secondary' }, 'Accept for this session'));
  buttons.push(el('button', { type: 'button', class: 'decline secondary' }, 'Decline'));
  const card = el('div', { class: 'card interaction pending', role: 'group', 'aria-label': 'Approval request', 'data-interaction-id': ev.interactionId || '' },
    el('div', { class: 'interaction-head' }, el('strong', {}, 'Approval needed'), ' ', state),
    q,
    a.reason ? el('p', { class: 'approval-reason' }, el('span', { class: 'muted' }, 'Reason: '), a.reason) : null,
    a.diffs && a.diffs.length ? diffView(a.diffs) : null,
    el('div', { class: 'interaction-buttons' }, buttons),
    el('details', { class: 'interaction-raw' }, el('summary', {}, 'Request details'),
      el('p', { class: 'muted' }, ev.name || ''), el('pre', {}, pretty(ev.input))));
  const decisions = { accept: 'accept', 'accept-session': 'acceptForSession', decline: 'decline' };
  for (const b of buttons) {
    const d = decisions[b.className.split(' ')[0]];
    b.addEventListener('click', () => answer(d, card));
  }
  card._state = state;
  return card;
}

// resolveCard marks an approval card answered.
export function resolveCard(card, status) {
  card.classList.remove('pending');
  card.classList.add('resolved');
  card._state.textContent = status || 'resolved';
  for (const b of card.querySelectorAll('.interaction-buttons button')) b.disabled = true;
}
