// Submit: a registration of two volumes (server paths, or files uploaded
// through PUT /v1/uploads/registration first and named by their upload id)
// with a few options, or any job
// as a SubmitJobRequest in protobuf JSON (the spec's Any names its type with
// "@type", as `tessera job submit` builds it).
import {putFile, rpc} from './api.js';
import {el, errorBox} from './dom.js';

const REGISTER_TYPE = 'type.googleapis.com/tessera.v1.RegisterRequest';

function intList(text, field) {
  const parts = text.split(',').map((s) => s.trim()).filter(Boolean);
  for (const p of parts) {
    if (!/^\d+$/.test(p)) throw new Error(`${field}: "${text}" is not a comma-separated list of whole numbers`);
  }
  return parts.map(Number);
}

// One volume: a server path, or a local file uploaded first (its upload id
// then names it as VolumeSource.file_id).
function volumeInput(id, label) {
  const path = el('input', {id: `${id}-path`, type: 'text', size: '60', placeholder: '/server/path/volume.nii.gz'});
  const file = el('input', {id: `${id}-file`, type: 'file'});
  return {
    row: el('fieldset', null, el('legend', null, label),
      el('label', null, 'Server path ', path), el('span', {class: 'or'}, ' or upload '), file),
    async source(signal, note) {
      if (file.files.length > 0) {
        const f = file.files[0];
        note.textContent = `Uploading ${f.name} (${f.size.toLocaleString()} B)…`;
        const uploaded = await putFile(`/v1/uploads/registration?filename=${encodeURIComponent(f.name)}`, f, signal);
        return {fileId: uploaded.uploadId};
      }
      if (!path.value.trim()) throw new Error(`${label}: give a server path or choose a file`);
      return {path: path.value.trim()};
    },
  };
}

function registrationForm(ctx, onSubmitted) {
  const fixed = volumeInput('fixed', 'Fixed volume');
  const moving = volumeInput('moving', 'Moving volume');
  const stages = el('input', {id: 'reg-stages', type: 'text', value: 'rigid,affine'});
  const metric = el('select', {id: 'reg-metric'}, ['lncc', 'mse', 'mi'].map((m) => el('option', {value: m}, m)));
  const scales = el('input', {id: 'reg-scales', type: 'text', value: '2,1'});
  const iterations = el('input', {id: 'reg-iterations', type: 'text', value: '20,10', title: 'per scale, every stage'});
  const device = el('select', {id: 'reg-device'}, ['', 'cpu', 'cuda', 'auto'].map((d) => el('option', {value: d}, d || "server's default")));
  const priority = el('input', {id: 'reg-priority', type: 'number', min: '-10', max: '10', value: '0'});
  const note = el('div', {class: 'status-line'});
  const form = el('form', {id: 'register-form'},
    fixed.row, moving.row,
    el('div', {class: 'grid'},
      el('label', null, 'Stages ', stages), el('label', null, 'Metric ', metric),
      el('label', null, 'Scales ', scales), el('label', null, 'Iterations per scale ', iterations),
      el('label', null, 'Device ', device), el('label', null, 'Priority ', priority)),
    el('button', {type: 'submit', id: 'register-submit'}, 'Submit registration'), note);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    note.replaceChildren();
    try {
      const its = intList(iterations.value, 'Iterations');
      const request = {
        '@type': REGISTER_TYPE,
        fixed: await fixed.source(ctx.signal, note),
        moving: await moving.source(ctx.signal, note),
        options: {
          metric: metric.value,
          stages: stages.value.split(',').map((s) => s.trim()).filter(Boolean),
          scales: intList(scales.value, 'Scales'),
          rigidIterations: its, affineIterations: its, deformableIterations: its,
        },
      };
      if (device.value) request.options.device = device.value;
      note.textContent = 'Submitting…';
      // An uploaded file is resolved by RegistrationService (its upload
      // store), so such a request goes through Register (no priority there);
      // server paths go through the scheduler's Submit. Either way the job is
      // the scheduler's, under the id returned.
      const uploaded = request.fixed.fileId || request.moving.fileId;
      if (uploaded && Number(priority.value || 0) !== 0) {
        throw new Error('Priority: jobs on uploaded files run at priority 0 (RegistrationService.Register has none)');
      }
      const job = uploaded
        ? await rpc('tessera.v1.RegistrationService/Register', (({'@type': _, ...r}) => r)(request), ctx.signal)
        : await rpc('tessera.v1.SchedulerService/Submit',
          {spec: {kind: 'registration', spec: request}, priority: Number(priority.value || 0)}, ctx.signal);
      onSubmitted(job);
    } catch (error) {
      if (error.name !== 'AbortError') note.replaceChildren(errorBox(error, 'Not submitted:'));
    }
  });
  return form;
}

function rawForm(ctx, onSubmitted) {
  const text = el('textarea', {id: 'raw-request', rows: '12', cols: '90', spellcheck: 'false'});
  text.value = JSON.stringify({
    spec: {kind: 'fingerprint.search', spec: {
      '@type': 'type.googleapis.com/tessera.v1.SearchBatchRequest', gallery: 'default', topK: 5,
      probes: [{data: '<base64 template>', format: 'TEMPLATE_FORMAT_AUTO'}]}},
    priority: 0,
  }, null, 2);
  const note = el('div', {class: 'status-line'});
  const form = el('form', {id: 'raw-form'},
    el('p', null, 'Any job: a SchedulerService.Submit request in protobuf JSON.'), text,
    el('div', null, el('button', {type: 'submit'}, 'Submit JSON')), note);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    note.replaceChildren();
    let request;
    try {
      request = JSON.parse(text.value);
    } catch (error) {
      note.replaceChildren(errorBox(error, 'The request is not JSON:'));
      return;
    }
    try {
      onSubmitted(await rpc('tessera.v1.SchedulerService/Submit', request, ctx.signal));
    } catch (error) {
      if (error.name !== 'AbortError') note.replaceChildren(errorBox(error, 'Not submitted:'));
    }
  });
  return form;
}

export async function renderSubmit(view, ctx) {
  const opened = (job) => ctx.go(`#job/${encodeURIComponent(job.jobId)}`);
  view.append(el('h2', null, 'Submit a job'),
    el('h3', null, 'Registration'), registrationForm(ctx, opened),
    el('h3', null, 'Any job (JSON)'), rawForm(ctx, opened));
}
