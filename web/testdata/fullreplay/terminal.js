// The project terminal: xterm.js over /v1/projects/{name}/terminal. Binary
// frames carry bytes both ways; a text frame {"type":"resize",...} tells
// the server the terminal's size.
import { Terminal } from './vendor/xterm.mjs';
import { FitAddon } from './vendor/addon-fit.mjs';
import { el, wsURL, notice } from './lib.js';

export class TerminalView {
  constructor(root, project) {
    this.project = project;
    this.state = el('span', { id: 'term-status', class: 'conn' }, 'connecting…');
    this.box = el('div', { id: 'terminal', class: 'terminal' });
    root.replaceChildren(el('div', { class: 'chat-head' }, el('a', { href: '#/projects' }, '← Projects'),
      el('h2', {}, `Terminal · ${project}`), this.state), this.box);
    this.term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, convertEol: false });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(this.box);
    this.fit.fit();
    this.enc = new TextEncoder();
    const ws = new WebSocket(wsURL(`/v1/projects/${encodeURIComponent(project)}/terminal`));
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onopen = () => {
      this.state.textContent = 'connected';
      this.box.dataset.connected = 'true';
      this.sendSize();
      this.term.focus();
    };
    ws.onmessage = (m) => {
      if (typeof m.data === 'string') return; // control frames are not shown
      const bytes = new Uint8Array(m.data);
      this.term.write(bytes);
      this.box.dataset.bytes = String(Number(this.box.dataset.bytes || 0) + bytes.length);
    };
    ws.onclose = (e) => {
      this.state.textContent = `closed${e.reason ? ': ' + e.reason : ''}`;
      this.box.dataset.connected = 'false';
    };
    ws.onerror = () => root.append(notice('error', 'terminal connection failed'));
    this.term.onData((d) => { if (ws.readyState === WebSocket.OPEN) ws.send(this.enc.encode(d)); });
    this.term.onResize(() => this.sendSize());
    this.onWinResize = () => this.fit.fit();
    window.addEventListener('resize', this.onWinResize);
  }

  sendSize() {
    if (this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify({ type: 'resize', cols: this.term.cols, rows: this.term.rows }));
    }
  }

  destroy() {
    window.removeEventListener('resize', this.onWinResize);
    this.ws.close(1000, 'view closed');
    this.term.dispose();
  }
}
