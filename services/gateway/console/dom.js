// DOM building for the console. Server text only ever reaches the page as
// text nodes (textContent / createTextNode), never as HTML, so a job message
// or an audit record cannot inject markup or script.

// el('td', {class: 'num', title: 'x'}, 'text', childNode, ...): attributes
// go through setAttribute (or addEventListener for on* functions); children
// that are strings become text nodes; null/undefined/false are skipped.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// A table with a header row; rows are arrays of cells (strings or nodes).
export function table(columns, rows, attrs) {
  return el('table', attrs,
    el('thead', null, el('tr', null, columns.map((c) => el('th', null, c)))),
    el('tbody', null, rows.map((cells) => el('tr', null, cells.map((c) => el('td', null, c))))));
}

// An API failure shown plainly: the status line and the gateway's JSON body.
export function errorBox(error, lead) {
  const box = el('div', {class: 'error', role: 'alert'});
  if (lead) box.appendChild(el('p', null, lead));
  const status = error.httpStatus !== undefined && error.httpStatus !== 0 ? `HTTP ${error.httpStatus} ` : '';
  box.appendChild(el('p', {class: 'error-line'}, `${status}${error.message}`));
  if (error.body) box.appendChild(el('pre', {class: 'error-body'}, JSON.stringify(error.body, null, 2)));
  else if (error.text) box.appendChild(el('pre', {class: 'error-body'}, error.text));
  return box;
}

export function seconds(value) {
  const s = Number(value || 0);
  if (!s) return '–';
  return s < 10 ? `${s.toFixed(2)} s` : s < 600 ? `${s.toFixed(1)} s` : `${(s / 60).toFixed(1)} min`;
}

export function bytes(value) {
  let n = Number(value || 0);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

export function time(unixMs) {
  const ms = Number(unixMs || 0);
  return ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '–';
}

// "JOB_STATE_SUCCEEDED" -> "SUCCEEDED" (the JSON mapping writes enum names).
export function stateName(state) {
  return String(state || 'JOB_STATE_UNSPECIFIED').replace(/^JOB_STATE_/, '');
}

export function stateBadge(state) {
  const name = stateName(state);
  return el('span', {class: `state state-${name.toLowerCase()}`}, name);
}

// A progress bar for a fraction 0..1 (a <progress> plus its percentage).
export function progressBar(fraction, label) {
  const f = Math.max(0, Math.min(1, Number(fraction || 0)));
  return el('span', {class: 'progress'},
    el('progress', {max: '1', value: String(f), title: label || ''}),
    el('span', {class: 'progress-text'}, `${Math.round(f * 100)}%`));
}
