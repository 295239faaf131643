// Jobs: the list (state filter, auto-refresh, cancel) and one job's detail
// (its fields, its events live over SSE, its result files and preview).
import {ApiError, getBlob, readEvents, rpc} from './api.js';
import {el, errorBox, progressBar, seconds, stateBadge, stateName, table, time} from './dom.js';

const STATES = ['QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'];
const ACTIVE = new Set(['QUEUED', 'RUNNING']);
// Kinds whose succeeded jobs have an image result (SchedulerService.GetPreview).
const PREVIEW_KINDS = new Set(['registration', 'reconstruction', 'apply_transforms', 'som.train']);
const REFRESH_MS = 2000;

// The bar's fraction: a succeeded job is done whatever its last progress
// event said (engines report progress up to their last step, not the end).
function fractionOf(job) {
  return stateName(job.state) === 'SUCCEEDED' ? 1 : Number((job.lastProgress || {}).fraction || 0);
}

function cancelButton(job, onDone) {
  if (!ACTIVE.has(stateName(job.state)) || job.cancelRequested) return null;
  return el('button', {
    type: 'button', class: 'cancel', 'data-job': job.jobId,
    onclick: async (event) => {
      const button = event.currentTarget;
      button.disabled = true;
      try {
        await rpc('tessera.v1.SchedulerService/Cancel', {jobId: job.jobId});
        onDone(null);
      } catch (error) {
        onDone(error);
      }
    },
  }, 'Cancel');
}

function jobLink(job) {
  return el('a', {href: `#job/${encodeURIComponent(job.jobId)}`, class: 'job-link'}, job.jobId);
}

export async function renderJobs(view, ctx) {
  const filter = el('select', {id: 'job-state-filter'},
    el('option', {value: ''}, 'any state'), STATES.map((s) => el('option', {value: s}, s)));
  filter.value = sessionStorage.getItem('tessera.jobs.filter') || '';
  const auto = el('input', {type: 'checkbox', id: 'job-auto-refresh', checked: true});
  const status = el('div', {class: 'status-line'});
  const body = el('div', {id: 'jobs-table'});
  view.append(
    el('h2', null, 'Jobs'),
    el('div', {class: 'toolbar'},
      el('label', null, 'State ', filter),
      el('label', null, auto, ' auto-refresh'),
      el('button', {type: 'button', onclick: () => refresh()}, 'Refresh')),
    status, body);

  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const request = {pageSize: 100};
      if (filter.value) request.states = [`JOB_STATE_${filter.value}`];
      const response = await rpc('tessera.v1.SchedulerService/List', request, ctx.signal);
      const jobs = response.jobs || [];
      body.replaceChildren(jobs.length === 0 ? el('p', {class: 'empty'}, 'No jobs.') : table(
        ['Job', 'Kind', 'State', 'Progress', 'Owner', 'Queued', 'Compute', 'Worker', 'Trace id', 'Created', ''],
        jobs.map((job) => [
          jobLink(job), job.kind || '', stateBadge(job.state),
          progressBar(fractionOf(job), job.lastProgress && job.lastProgress.stage),
          job.owner || '–', seconds(job.queueSeconds), seconds(job.computeSeconds), job.worker || '–',
          el('code', {class: 'trace'}, job.traceId || '–'), time(job.createdUnixMs),
          cancelButton(job, (error) => error ? status.replaceChildren(errorBox(error)) : refresh()),
        ]),
        {class: 'jobs'}));
      if (!status.querySelector('.error')) status.textContent = `${jobs.length} job(s), updated ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      if (error.name !== 'AbortError') status.replaceChildren(errorBox(error));
    } finally {
      busy = false;
    }
  }
  filter.addEventListener('change', () => {
    sessionStorage.setItem('tessera.jobs.filter', filter.value);
    status.replaceChildren();
    refresh();
  });
  ctx.every(REFRESH_MS, () => { if (auto.checked) refresh(); });
  await refresh();
}

function fields(job) {
  const p = job.lastProgress || {};
  const rows = [
    ['Job id', job.jobId], ['Kind', job.kind || ''], ['State', stateBadge(job.state)],
    ['Progress', el('span', null, progressBar(fractionOf(job)), ' ', [p.stage, p.message].filter(Boolean).join(' · '))],
    ['Owner', job.owner || '–'], ['Worker', job.worker || '–'], ['Trace id', el('code', null, job.traceId || '–')],
    ['Created', time(job.createdUnixMs)], ['Started', time(job.startedUnixMs)], ['Finished', time(job.finishedUnixMs)],
    ['Queued for', seconds(job.queueSeconds)], ['Computed for', seconds(job.computeSeconds)],
    ['Attempts', `${job.attempts || 0} of ${job.maxAttempts || '–'}`], ['Priority', String(job.priority || 0)],
  ];
  if (job.gallery) rows.push(['Gallery', job.gallery]);
  if (job.errorMessage) rows.push(['Error', el('span', {class: 'error-text'}, job.errorMessage)]);
  if (job.resultsDeletedReason) rows.push(['Results deleted', `${time(job.resultsDeletedUnixMs)} (${job.resultsDeletedReason})`]);
  return el('dl', {class: 'fields', id: 'job-fields'}, rows.map(([k, v]) => [el('dt', null, k), el('dd', null, v)]));
}

// Saves a result file: fetched with the token (a plain link could not send
// it), then handed to the browser as a download.
async function download(jobId, name, signal) {
  const blob = await getBlob(`/v1/jobs/${encodeURIComponent(jobId)}/files/${name.split('/').map(encodeURIComponent).join('/')}`, signal);
  const url = URL.createObjectURL(blob);
  const a = el('a', {href: url, download: name.replace(/\//g, '_')});
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

async function showResults(job, box, ctx) {
  box.replaceChildren(el('h3', null, 'Result'));
  if (job.resultsDeletedUnixMs && Number(job.resultsDeletedUnixMs) > 0) {
    box.appendChild(el('p', null, 'The results were deleted.'));
    return;
  }
  const result = await rpc('tessera.v1.SchedulerService/GetResult', {jobId: job.jobId}, ctx.signal);
  const files = result.files || [];
  const note = el('div');
  box.appendChild(files.length === 0 ? el('p', {class: 'empty'}, 'No result files.') : table(['File', 'Size', ''],
    files.map((f) => [f.name, `${Number(f.bytes || 0).toLocaleString()} B`,
      el('button', {type: 'button', onclick: () => download(job.jobId, f.name, ctx.signal)
        .catch((error) => note.replaceChildren(errorBox(error)))}, 'Download')]), {class: 'files'}));
  box.appendChild(note);
  if (result.result) {
    const summary = el('details', null, el('summary', null, 'Result message (JSON)'),
      el('pre', {class: 'json'}, JSON.stringify(result.result, null, 2)));
    box.appendChild(summary);
  }
  if (!PREVIEW_KINDS.has(job.kind)) return;
  const figure = el('figure', {id: 'job-preview'}, el('figcaption', null, 'Preview (loading…)'));
  box.appendChild(figure);
  try {
    const blob = await getBlob(`/v1/jobs/${encodeURIComponent(job.jobId)}/preview.png?max_edge=512`, ctx.signal);
    const img = el('img', {alt: `preview of job ${job.jobId}`, id: 'job-preview-image'});
    const url = URL.createObjectURL(blob);
    img.addEventListener('load', () => URL.revokeObjectURL(url), {once: true});
    img.src = url;
    figure.replaceChildren(img, el('figcaption', null, 'Orthogonal mid-slices of the result (or the U-matrix)'));
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    figure.replaceChildren(errorBox(error, 'No preview:'));
  }
}

export async function renderJobDetail(view, ctx, jobId) {
  view.append(el('p', null, el('a', {href: '#jobs'}, '← all jobs')), el('h2', null, 'Job ', el('code', null, jobId)));
  const head = el('div', {id: 'job-head'});
  const actions = el('div', {class: 'toolbar'});
  const eventsList = el('ol', {id: 'job-events', class: 'events'});
  const streamStatus = el('div', {class: 'status-line', id: 'job-stream-status'});
  const results = el('div', {id: 'job-results'});
  // Fields and events on the left, result files and preview on the right.
  view.append(actions, el('div', {class: 'job-grid'},
    el('div', null, head, el('h3', null, 'Events'), streamStatus, eventsList), results));

  let job = await rpc('tessera.v1.SchedulerService/Get', {jobId}, ctx.signal);
  const redraw = () => {
    head.replaceChildren(fields(job));
    actions.replaceChildren(cancelButton(job, async (error) => {
      if (error) { actions.appendChild(errorBox(error)); return; }
      job = await rpc('tessera.v1.SchedulerService/Get', {jobId}, ctx.signal);
      redraw();
    }) || '');
  };
  redraw();

  // Events live, resumed after the last one seen if the stream drops.
  let lastSequence = 0;
  const addEvent = (event) => {
    const e = event.data;
    lastSequence = Math.max(lastSequence, Number(event.id || e.sequence || 0));
    const p = e.progress || {};
    const steps = Number(p.totalSteps || 0) > 0 ? ` ${p.step || 0}/${p.totalSteps}` : '';
    const detail = [e.message, p.message || (p.stage && `${p.stage}${steps}`),
      p.fraction !== undefined && `${Math.round(Number(p.fraction) * 100)}%`].filter(Boolean).join(' · ');
    eventsList.appendChild(el('li', {'data-sequence': String(e.sequence || '')},
      el('span', {class: 'seq'}, `#${e.sequence || '?'}`), ' ', el('span', {class: 'when'}, time(e.unixMs)), ' ',
      stateBadge(e.state), ' ', detail));
    job = {...job, state: e.state, lastProgress: e.progress || job.lastProgress};
    head.replaceChildren(fields(job));
  };
  for (let attempt = 0; !ctx.signal.aborted; ++attempt) {
    streamStatus.textContent = attempt === 0 ? 'Watching…' : `Reconnecting after event #${lastSequence}…`;
    try {
      await readEvents(`/v1/jobs/${encodeURIComponent(jobId)}/events?after_sequence=${lastSequence}`, addEvent, ctx.signal);
      job = await rpc('tessera.v1.SchedulerService/Get', {jobId}, ctx.signal);
      if (!ACTIVE.has(stateName(job.state))) break;
    } catch (error) {
      if (error.name === 'AbortError') return;
      if (error instanceof ApiError && error.httpStatus >= 400 && error.httpStatus < 500) {
        streamStatus.replaceChildren(errorBox(error));
        return;
      }
      streamStatus.replaceChildren(errorBox(error, 'The event stream broke; retrying in 2 s.'));
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
  redraw();
  streamStatus.textContent = `Ended ${stateName(job.state)} (${eventsList.children.length} events).`;
  streamStatus.dataset.final = stateName(job.state);
  if (stateName(job.state) === 'SUCCEEDED') await showResults(job, results, ctx);
}
