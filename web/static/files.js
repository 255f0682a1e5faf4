// The project file browser: one directory under /workspace at a time
// (GET /v1/projects/{name}/files), download links (…/files/raw, an
// attachment) and an upload into the directory shown (PUT …/files/raw).
import { el, api, notice } from './lib.js';

export class FilesView {
  constructor(root, project) {
    this.project = project;
    this.dir = '/workspace';
    this.where = el('code', { id: 'files-path' });
    this.list = el('table', { id: 'file-list', class: 'files' });
    this.msg = el('div', {});
    const input = el('input', { type: 'file', id: 'file-upload', 'aria-label': 'File to upload' });
    const form = el('form', { class: 'row-form', id: 'file-upload-form' }, input, el('button', { type: 'submit' }, 'Upload'));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const f = input.files[0];
      if (!f) return;
      this.msg.replaceChildren(notice('status', `uploading ${f.name}…`));
      try {
        await api('PUT', this.url('/files/raw', `${this.dir}/${f.name}`), f);
        this.msg.replaceChildren(notice('status', `uploaded ${f.name}`));
        input.value = '';
        this.load();
      } catch (e2) {
        this.msg.replaceChildren(notice('error', `cannot upload ${f.name}: ${e2.message}`));
      }
    });
    root.replaceChildren(el('div', { class: 'chat-head' }, el('a', { href: '#/projects' }, '← Projects'),
      el('h2', {}, `Files · ${project}`)), el('p', {}, this.where), this.list, form, this.msg);
    this.load();
  }

  url(route, path) {
    return `/v1/projects/${encodeURIComponent(this.project)}${route}?path=${encodeURIComponent(path)}`;
  }

  open(dir) {
    this.dir = dir;
    this.load();
  }

  async load() {
    this.where.textContent = this.dir;
    try {
      const l = await api('GET', this.url('/files', this.dir));
      const rows = [];
      if (l.path !== '/workspace') {
        const up = l.path.slice(0, l.path.lastIndexOf('/')) || '/workspace';
        rows.push(el('tr', {}, el('td', {}, el('a', { href: '#', class: 'dir', onclick: (e) => { e.preventDefault(); this.open(up); } }, '..')), el('td', {}), el('td', {})));
      }
      for (const f of l.entries) {
        const p = `${l.path}/${f.name}`;
        let name;
        if (f.type === 'directory') {
          name = el('a', { href: '#', class: 'dir', onclick: (e) => { e.preventDefault(); this.open(p); } }, f.name + '/');
        } else if (f.type === 'file') {
          name = el('a', { href: this.url('/files/raw', p), download: f.name, class: 'download' }, f.name);
        } else {
          // A symlink, FIFO, socket or device: named, never a link.
          name = el('span', { class: 'muted' }, f.type === 'symlink' ? f.name + ' →' : `${f.name} (${f.type})`);
        }
        rows.push(el('tr', { 'data-name': f.name }, el('td', {}, name), el('td', { class: 'muted' }, f.mode),
          el('td', { class: 'muted' }, f.mtime ? new Date(f.mtime).toLocaleString() : '')));
      }
      if (l.truncated) rows.push(el('tr', {}, el('td', { class: 'muted' }, 'more entries not shown')));
      if (!l.entries.length) rows.push(el('tr', {}, el('td', { class: 'muted' }, 'Empty.')));
      this.list.replaceChildren(...rows);
    } catch (e) {
      this.list.replaceChildren(el('tr', {}, el('td', {}, notice('error', `cannot list ${this.dir}: ${e.message}`))));
    }
  }
}
