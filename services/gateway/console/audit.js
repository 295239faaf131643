// Audit: the newest records of the server's audit trail (admins only; others
// are told so, with the server's refusal as it came).
import {ApiError, rpc} from './api.js';
import {el, errorBox, table} from './dom.js';

export async function renderAudit(view, ctx) {
  const principal = el('input', {id: 'audit-principal', type: 'text', placeholder: 'any principal'});
  const trace = el('input', {id: 'audit-trace', type: 'text', size: '34', placeholder: 'any trace id'});
  const box = el('div', {id: 'audit-records'});
  const form = el('form', {class: 'toolbar'}, el('label', null, 'Principal ', principal),
    el('label', null, 'Trace id ', trace), el('button', {type: 'submit'}, 'Show'));
  view.append(el('h2', null, 'Audit trail'), form, box);

  const load = async () => {
    try {
      const response = await rpc('tessera.v1.OperatorService/ListAuditRecords',
        {limit: 100, principal: principal.value.trim(), traceId: trace.value.trim()}, ctx.signal);
      const records = response.records || [];
      box.replaceChildren(records.length === 0 ? el('p', {class: 'empty'}, 'No records.') : el('div', {class: 'table-wrap'}, table(
        ['Seq', 'Time', 'Principal', 'Peer', 'Method', 'Outcome', 'Trace id', 'Gallery', 'Request id', 'Details'],
        records.map((r) => [String(r.seq || ''), r.time || '', r.principal || '', r.peer || '', r.method || '',
          el('span', {class: r.outcome === 'OK' ? 'outcome-ok' : 'outcome-bad'}, r.outcome || ''),
          el('code', null, r.traceId || ''), r.gallery || '', r.requestId || '',
          // Details can be long (every id a call touched): a bounded cell, the whole in its tooltip.
          el('code', {class: 'details', title: r.detailsJson || ''}, r.detailsJson || '')]),
        {class: 'audit'})));
    } catch (error) {
      if (error.name === 'AbortError') return;
      const refused = error instanceof ApiError && error.httpStatus === 403;
      box.replaceChildren(errorBox(error, refused
        ? 'The audit trail is for admins: this token does not have the admin role.' : null));
      if (refused) box.firstChild.id = 'audit-refused';
    }
  };
  form.addEventListener('submit', (event) => { event.preventDefault(); load(); });
  await load();
}
