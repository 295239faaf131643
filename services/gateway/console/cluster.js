// The cluster views: workers and their devices, queue depth and batch sizes
// from the server's metrics, fingerprint galleries, SOM atlases.
import {rpc} from './api.js';
import {bytes, el, errorBox, table} from './dom.js';

const REFRESH_MS = 3000;

// Draws `draw(response)` into a box, again every REFRESH_MS when `live`; an
// error replaces the content with the gateway's error, plainly.
async function refreshing(view, ctx, title, method, request, draw, live) {
  const box = el('div', {class: 'content'});
  const status = el('div', {class: 'status-line'});
  view.append(el('h2', null, title), status, box);
  const load = async () => {
    try {
      const response = await rpc(method, request, ctx.signal);
      box.replaceChildren(draw(response));
      status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      if (error.name !== 'AbortError') box.replaceChildren(errorBox(error));
    }
  };
  if (live) ctx.every(REFRESH_MS, load);
  await load();
}

function devices(list) {
  if (!list || list.length === 0) return '–';
  return el('ul', {class: 'devices'}, list.map((d) => el('li', null, d.name || '?',
    Number(d.totalBytes || 0) > 0 ? ` (${bytes(d.freeBytes)} free of ${bytes(d.totalBytes)})` : '')));
}

export function renderWorkers(view, ctx) {
  return refreshing(view, ctx, 'Workers', 'tessera.v1.SchedulerService/ListWorkers', {}, (r) => {
    const workers = r.workers || [];
    if (workers.length === 0) return el('p', {class: 'empty'}, 'No workers.');
    return table(['Worker', 'Address', 'Health', 'Devices', 'Slots', 'Running', 'Jobs done', 'Kinds', 'Last error'],
      workers.map((w) => [w.name || '', w.address || '',
        el('span', {class: w.healthy ? 'healthy' : 'unhealthy'}, w.healthy ? 'healthy' : 'unhealthy'),
        devices(w.devices), String(w.slots || 0), String(w.running || 0), String(w.jobsDone || 0),
        (w.kinds || []).join(', '), w.lastError || '']), {class: 'workers'});
  }, true);
}

function labelsText(labels) {
  return Object.entries(labels || {}).sort().map(([k, v]) => `${k}="${v}"`).join(', ');
}

function sum(samples, name, pred) {
  return samples.filter((s) => s.name === name && (!pred || pred(s.labels || {})))
    .reduce((total, s) => total + Number(s.value || 0), 0);
}

// The headline numbers an operator looks at first, then every sample.
function stats(r) {
  const samples = r.samples || [];
  const byState = samples.filter((s) => s.name === 'tessera_scheduler_jobs');
  const stateCount = (state) => sum(byState, 'tessera_scheduler_jobs', (l) => String(l.state || '').toLowerCase() === state);
  const batches = sum(samples, 'tessera_fingerprint_search_batch_size_count');
  const batchMean = batches > 0 ? sum(samples, 'tessera_fingerprint_search_batch_size_sum') / batches : 0;
  const cards = [
    ['Jobs queued', byState.length ? String(stateCount('queued')) : '–'],
    ['Jobs running', byState.length ? String(stateCount('running')) : '–'],
    ['Fingerprint searches waiting', String(sum(samples, 'tessera_fingerprint_search_queue_depth'))],
    ['Fingerprint batches run', String(batches)],
    ['Mean batch size', batches > 0 ? batchMean.toFixed(2) : '–'],
    ['RPCs in flight', String(sum(samples, 'tessera_grpc_server_in_flight'))],
  ];
  return el('div', null,
    el('div', {class: 'cards', id: 'stat-cards'}, cards.map(([k, v]) => el('div', {class: 'card'},
      el('div', {class: 'card-value'}, v), el('div', {class: 'card-label'}, k)))),
    el('details', {open: true}, el('summary', null, `All samples (${samples.length})`),
      table(['Metric', 'Labels', 'Value'], samples.map((s) => [s.name || '', labelsText(s.labels),
        String(Number(s.value || 0))]), {class: 'samples'})));
}

export function renderQueues(view, ctx) {
  return refreshing(view, ctx, 'Queues and metrics', 'tessera.v1.OperatorService/GetServerStats', {}, stats, true);
}

export function renderGalleries(view, ctx) {
  return refreshing(view, ctx, 'Fingerprint galleries', 'tessera.v1.FingerprintService/ListGalleries', {}, (r) => {
    const galleries = r.galleries || [];
    if (galleries.length === 0) return el('p', {class: 'empty'}, 'No galleries.');
    return table(['Gallery', 'Templates'], galleries.map((g) => [g.gallery || '',
      Number(g.size || 0).toLocaleString()]), {class: 'galleries'});
  }, false);
}

export function renderAtlases(view, ctx) {
  return refreshing(view, ctx, 'SOM atlases', 'tessera.v1.SomAtlasService/ListAtlases', {}, (r) => {
    const atlases = r.atlases || [];
    if (atlases.length === 0) return el('p', {class: 'empty'}, 'No atlases.');
    return table(['Atlas', 'Map', 'Features', 'Documents', 'Epochs', 'Converged', 'Weights', 'Init'],
      atlases.map((a) => [a.atlasId || '', `${a.width || 0}×${a.height || 0}${a.toroid ? ' toroid' : ''}`,
        Number(a.features || 0).toLocaleString(), Number(a.documents || 0).toLocaleString(), String(a.epochs || 0),
        a.converged ? 'yes' : 'no', a.weightType || '', a.init || '']), {class: 'atlases'});
  }, false);
}
