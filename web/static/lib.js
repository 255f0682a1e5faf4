// Small helpers shared by the views: DOM building, the JSON API, WebSocket
// URLs and safe Markdown. Nothing here ever assigns agent text to innerHTML
// without DOMPurify.
import { marked } from './vendor/marked.esm.js';
import DOMPurify from './vendor/purify.es.mjs';

marked.setOptions({ gfm: true, breaks: false });
// Task-list items render as text: agent Markdown gets no <input>.
marked.use({ renderer: { checkbox({ checked }) { return checked ? '\u2611 ' : '\u2610 '; } } });

// MARKDOWN_PURIFY is what agent Markdown may contain: plain HTML, but
// nothing that acts on its own or submits to the API with the user's
// cookie (a form, a button), styles the page, or embeds another document.
// Forbidden elements are dropped (their text stays); event handler
// attributes are never kept (DOMPurify's default, enforced again by the
// hook below).
const MARKDOWN_PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['form', 'input', 'button', 'select', 'option', 'optgroup', 'datalist', 'textarea',
    'output', 'style', 'link', 'meta', 'base', 'iframe', 'frame', 'frameset', 'object', 'embed',
    'applet', 'portal', 'dialog', 'area', 'map'],
  FORBID_ATTR: ['style', 'action', 'formaction', 'formmethod', 'formenctype', 'formtarget',
    'formnovalidate', 'form', 'method', 'enctype', 'target', 'ping', 'popover', 'popovertarget',
    'popovertargetaction'],
};
DOMPurify.addHook('uponSanitizeAttribute', (_node, data) => {
  if (/^on/i.test(data.attrName)) data.keepAttr = false;
});

// el builds an element: el('div', {class: 'x', onclick: fn}, child, 'text').
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// renderMarkdown sets node's content to sanitized HTML rendered from text.
export function renderMarkdown(node, text) {
  const html = marked.parse(text || '', { async: false });
  node.innerHTML = DOMPurify.sanitize(html, MARKDOWN_PURIFY);
  // Links open in a new tab that gets no handle on this page and no
  // Referer.
  for (const a of node.querySelectorAll('a[href]')) {
    a.setAttribute('target', '_blank');
    a.setAttribute('rel', 'noopener noreferrer');
  }
}

// APIError carries the daemon's error envelope.
export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// api calls the daemon's JSON API through remote-web. A Blob body (a
// file to upload) is sent as it is, application/octet-stream.
export async function api(method, path, body) {
  const opts = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
  if (body instanceof Blob) {
    opts.headers['Content-Type'] = 'application/octet-stream';
    opts.body = body;
  } else if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  if (res.status === 401) {
    location.href = '/login';
    throw new APIError(401, 'unauthorized', 'not logged in');
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!res.ok) {
    const e = (data && data.error) || {};
    throw new APIError(res.status, e.code || 'http_' + res.status, e.message || `${method} ${path}: HTTP ${res.status}`);
  }
  return data;
}

// wsURL turns a path into a same-origin ws:// or wss:// URL.
export function wsURL(path) {
  return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + path;
}

// notice returns a one-line notice element.
export function notice(kind, text) {
  return el('div', { class: 'notice notice-' + kind, role: kind === 'error' ? 'alert' : null }, text);
}

export function pretty(raw) {
  if (raw === undefined || raw === null) return '';
  if (typeof raw === 'string') return raw;
  try { return JSON.stringify(raw, null, 2); } catch { return String(raw); }
}
