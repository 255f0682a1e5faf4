// A project chat's Changes: the files its work changed and their unified
// diff (GET /v1/chats/{id}/diff), for the whole chat or one turn
// (?turn=SEQ, the turns the chat's system/turn_tree events recorded), and
// the way out: Push (POST …/push) and Open pull request (POST
// …/pull-request). Each listed file has a checkbox: Push sends the checked
// ones as `paths` when any is unchecked (none when all are, so the
// daemon's default applies), or `all: true` with "include untracked build
// output" (only when every file is checked: the daemon refuses both). The
// pull request takes no paths: it pushes the default. File names and patch
// text come from the agent's work: they are only ever text nodes and
// attribute values, never HTML.
import { el, api, notice } from './lib.js';
import { diffPre, pushedCard, pullRequestCard } from './cards.js';

// HISTORY_PAGES bounds how many history pages are read for the turn list.
const HISTORY_PAGES = 25;
const STATUS = { A: 'added', M: 'modified', D: 'deleted', T: 'type changed' };

export class ChangesView {
  constructor(root, chatId) {
    this.id = chatId;
    this.base = `/v1/chats/${encodeURIComponent(chatId)}`;
    this.closed = false;
    this.title = el('span', {}, 'Chat ' + chatId);
    this.turn = el('select', { id: 'changes-turn', 'aria-label': 'Changes of' }, el('option', { value: '' }, 'Whole chat'));
    this.turn.addEventListener('change', () => this.load());
    this.summary = el('p', { id: 'changes-summary', role: 'status' });
    this.files = el('table', { id: 'changes-files', class: 'files changes-files' });
    this.patch = el('div', { id: 'changes-patch' });
    this.msg = el('div', { id: 'changes-msg', 'aria-live': 'polite' });
    this.result = el('div', { id: 'changes-result' });

    this.pushMessage = el('input', { id: 'push-message', 'aria-label': 'Commit message', placeholder: 'commit message (optional)', maxlength: 1024 });
    this.pushBtn = el('button', { type: 'submit', id: 'push' }, 'Push');
    this.picks = [];
    this.pushAll = el('input', { type: 'checkbox', id: 'push-all' });
    this.pushAllLabel = el('label', { class: 'push-all', title: 'untracked __pycache__/, *.pyc, node_modules/, … (not with unchecked files)' },
      this.pushAll, ' include untracked build output');
    this.pushPick = el('span', { id: 'push-pick', class: 'muted' });
    const pushForm = el('form', { id: 'push-form', class: 'row-form' }, this.pushMessage, this.pushBtn, this.pushAllLabel, this.pushPick);
    pushForm.addEventListener('submit', (e) => { e.preventDefault(); this.push(); });
    this.prTitle = el('input', { id: 'pr-title', 'aria-label': 'Pull request title', placeholder: 'pull request title', required: true, maxlength: 1024 });
    this.prBody = el('textarea', { id: 'pr-body', rows: 3, 'aria-label': 'Pull request description', placeholder: 'description (optional)' });
    this.prBtn = el('button', { type: 'submit', id: 'open-pr' }, 'Open pull request');
    this.prNote = el('span', { id: 'pr-note', class: 'muted', hidden: true }, ' pushes every changed file, not only the checked ones');
    const prForm = el('form', { id: 'pr-form', class: 'pr-form' }, this.prTitle, this.prBody, el('div', {}, this.prBtn, this.prNote));
    prForm.addEventListener('submit', (e) => { e.preventDefault(); this.pullRequest(); });

    root.replaceChildren(el('div', { class: 'changes' },
      el('div', { class: 'chat-head' }, el('a', { href: `#/chat/${encodeURIComponent(chatId)}`, id: 'changes-back' }, '← Chat'),
        el('h2', {}, 'Changes · ', this.title)),
      el('div', { class: 'row-form' }, el('label', {}, 'Changes of ', this.turn)),
      this.summary, this.files, this.patch,
      el('section', { class: 'way-out' }, el('h3', {}, 'Push and pull request'), pushForm, prForm, this.msg, this.result)));
    this.loadMeta();
    this.loadTurns();
    this.load();
  }

  destroy() {
    this.closed = true;
  }

  async loadMeta() {
    try {
      const c = await api('GET', this.base);
      this.title.textContent = c.title || 'Chat ' + c.id;
      document.title = `Changes · ${c.title || 'Chat'} · Remote`;
    } catch { /* the diff's own error says what is wrong */ }
  }

  // loadTurns lists the turns whose working tree was recorded, newest
  // first, labelled by their prompt's first line.
  async loadTurns() {
    const prompts = new Map();
    const turns = [];
    let before = 0;
    for (let i = 0; i < HISTORY_PAGES; i++) {
      let page;
      try {
        page = await api('GET', `${this.base}/history?limit=200${before ? '&before=' + before : ''}`);
      } catch {
        return;
      }
      const evs = page.events || [];
      for (const ev of evs) {
        if (ev.type === 'user') prompts.set(ev.seq, ev.text || '');
        if (ev.type === 'system' && ev.subtype === 'turn_tree' && ev.data && typeof ev.data.turn === 'number') turns.push(ev.data);
      }
      if (!page.hasMore || !evs.length) break;
      before = evs[0].seq;
    }
    if (this.closed) return;
    turns.sort((a, b) => b.turn - a.turn);
    const seen = new Set();
    for (const t of turns) {
      if (seen.has(t.turn)) continue;
      seen.add(t.turn);
      const prompt = String(prompts.get(t.turn) ?? '').split('\n')[0].slice(0, 80);
      const label = `Turn ${t.turn}${prompt ? ': ' + prompt : ''}${t.tree ? '' : ' (not recorded)'}`;
      this.turn.append(el('option', { value: String(t.turn), disabled: !t.tree }, label));
    }
  }

  // load shows the picked diff; a load started after it (the turn
  // changed, or changed back) wins, so the checkboxes are never reset
  // under the user by an older answer.
  async load() {
    const seq = this.loadSeq = (this.loadSeq || 0) + 1;
    const turn = this.turn.value;
    this.summary.textContent = 'Loading…';
    this.files.replaceChildren();
    this.patch.replaceChildren();
    this.picks = [];
    this.updatePick();
    let d;
    try {
      d = await api('GET', `${this.base}/diff${turn ? '?turn=' + encodeURIComponent(turn) : ''}`);
    } catch (e) {
      if (this.loadSeq !== seq) return;
      this.summary.replaceChildren(notice('error', `cannot load the changes: ${e.message}`));
      return;
    }
    if (this.closed || this.loadSeq !== seq) return;
    const files = d.files || [];
    const add = files.reduce((n, f) => n + (f.additions || 0), 0);
    const del = files.reduce((n, f) => n + (f.deletions || 0), 0);
    this.summary.textContent = files.length
      ? `${files.length} file${files.length === 1 ? '' : 's'} changed, +${add} −${del}`
      : 'No changes.';
    // The path is kept in this.picks, never read back from the DOM; the
    // checkbox's label is set as an attribute value (not markup).
    this.picks = files.map((f) => {
      const box = el('input', { type: 'checkbox', class: 'file-pick', checked: true, 'aria-label': 'Push ' + f.path });
      box.addEventListener('change', () => this.updatePick());
      return { path: f.path, box };
    });
    this.updatePick();
    this.files.replaceChildren(...files.map((f, i) => el('tr', { class: 'changed-file', 'data-status': f.status },
      el('td', { class: 'file-pick-cell' }, this.picks[i].box),
      el('td', { class: 'file-status', title: STATUS[f.status] || '' }, f.status),
      el('td', {}, el('code', { class: 'file-path' }, f.path)),
      f.binary ? el('td', { class: 'muted file-binary' }, 'binary')
        : el('td', { class: 'file-counts' }, el('span', { class: 'adds' }, `+${f.additions}`), ' ', el('span', { class: 'dels' }, `−${f.deletions}`)))));
    const parts = [];
    if (d.truncated) {
      parts.push(el('div', { id: 'changes-truncated', class: 'notice notice-error', role: 'alert' },
        'The diff is too long: it is cut short below (the file list above is complete).'));
    }
    if (d.patch) parts.push(diffPre(d.patch, { id: 'changes-diff' }));
    this.patch.replaceChildren(...parts);
  }

  // picked is the checked files' paths, or null when every file is
  // checked (the push then sends no paths: the daemon's default).
  picked() {
    const on = this.picks.filter((p) => p.box.checked);
    return on.length === this.picks.length ? null : on.map((p) => p.path);
  }

  // updatePick says what Push takes and turns the build output toggle off
  // while files are unchecked (`all` with `paths` is refused).
  updatePick() {
    const picked = this.picked();
    if (picked) this.pushAll.checked = false;
    this.pushAll.disabled = !!picked;
    this.pushAllLabel.classList.toggle('muted', !!picked);
    this.prNote.hidden = !picked;
    this.pushPick.textContent = picked ? `pushes ${picked.length} of ${this.picks.length} files` : '';
  }

  // busy shows what runs (push and pull request take seconds) and keeps
  // the buttons from being pressed again meanwhile.
  busy(text) {
    this.pushBtn.disabled = !!text;
    this.prBtn.disabled = !!text;
    this.msg.dataset.busy = String(!!text);
    this.msg.replaceChildren(text ? notice('status', text) : '');
  }

  async push() {
    const body = {};
    if (this.pushMessage.value.trim()) body.message = this.pushMessage.value.trim();
    const picked = this.picked();
    if (picked) {
      if (!picked.length) {
        this.msg.replaceChildren(notice('error', 'no file is checked: check the files to push'));
        return;
      }
      body.paths = picked;
    } else if (this.pushAll.checked) {
      body.all = true;
    }
    this.busy('Pushing…');
    try {
      const r = await api('POST', `${this.base}/push`, body);
      this.busy('');
      this.result.replaceChildren(pushedCard(r));
    } catch (e) {
      this.busy('');
      this.msg.replaceChildren(notice('error', `push failed: ${e.message}`));
    }
  }

  async pullRequest() {
    const title = this.prTitle.value.trim();
    if (!title) {
      this.msg.replaceChildren(notice('error', 'a pull request needs a title'));
      return;
    }
    const body = { title };
    if (this.prBody.value.trim()) body.body = this.prBody.value;
    this.busy('Pushing and opening the pull request…');
    try {
      const r = await api('POST', `${this.base}/pull-request`, body);
      this.busy('');
      this.result.replaceChildren(pushedCard({ branch: r.head, sha: r.sha }), pullRequestCard(r));
    } catch (e) {
      this.busy('');
      this.msg.replaceChildren(notice('error', `cannot open the pull request: ${e.message}`));
    }
  }
}
