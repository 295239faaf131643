// The console's shell: sign-in, navigation (the URL hash names the view) and
// the lifetime of the shown view (its timers and streams end when another is
// shown). Views live in their own modules.
import {ApiError, clearToken, getToken, rpc, setToken} from './api.js';
import {errorBox} from './dom.js';
import {renderJobDetail, renderJobs} from './jobs.js';
import {renderSubmit} from './submit.js';
import {renderAtlases, renderGalleries, renderQueues, renderWorkers} from './cluster.js';
import {renderAudit} from './audit.js';

const VIEWS = {
  jobs: renderJobs,
  job: renderJobDetail,
  submit: renderSubmit,
  workers: renderWorkers,
  queues: renderQueues,
  galleries: renderGalleries,
  atlases: renderAtlases,
  audit: renderAudit,
};

let current = null;  // {abort: AbortController, timers: []} of the shown view

// What a view gets: an AbortSignal that fires when it is left, and every(ms,
// fn) for auto-refresh timers cleared at the same moment.
function newViewContext() {
  const abort = new AbortController();
  const timers = [];
  return {
    abort, timers,
    signal: abort.signal,
    every(ms, fn) { timers.push(setInterval(fn, ms)); },
    go(hash) { location.hash = hash; },
  };
}

function leaveView() {
  if (!current) return;
  current.abort.abort();
  current.timers.forEach(clearInterval);
  current = null;
}

function showLogin(message) {
  leaveView();
  document.getElementById('nav').hidden = true;
  document.getElementById('session').hidden = true;
  document.getElementById('view').hidden = true;
  document.getElementById('login-view').hidden = false;
  const box = document.getElementById('login-error');
  box.replaceChildren();
  box.hidden = !message;
  if (message) box.appendChild(message);
  document.getElementById('login-token').focus();
}

async function route() {
  if (!getToken()) { showLogin(); return; }
  leaveView();
  const [name, ...rest] = (location.hash.replace(/^#/, '') || 'jobs').split('/');
  const render = VIEWS[name] || renderJobs;
  document.getElementById('login-view').hidden = true;
  document.getElementById('nav').hidden = false;
  document.getElementById('session').hidden = false;
  for (const link of document.querySelectorAll('#nav a')) {
    link.classList.toggle('active', link.dataset.view === (name === 'job' ? 'jobs' : name));
  }
  const view = document.getElementById('view');
  view.hidden = false;
  view.replaceChildren();
  view.dataset.view = VIEWS[name] ? name : 'jobs';
  current = newViewContext();
  try {
    await render(view, current, rest.map(decodeURIComponent).join('/'));
  } catch (error) {
    if (error.name === 'AbortError') return;
    if (error instanceof ApiError && error.httpStatus === 401) {
      clearToken();
      showLogin(errorBox(error, 'The server refused the token; sign in again.'));
      return;
    }
    view.appendChild(errorBox(error));
  }
}

// Sign-in checks the token with one cheap call a reader may make, so a typo
// is reported here rather than on every view.
async function signIn(event) {
  event.preventDefault();
  const token = document.getElementById('login-token').value.trim();
  if (!token) return;
  setToken(token);
  try {
    await rpc('tessera.v1.SchedulerService/List', {pageSize: 1});
  } catch (error) {
    if (error instanceof ApiError && (error.httpStatus === 401 || error.httpStatus === 0)) {
      clearToken();
      showLogin(errorBox(error, 'Sign-in failed.'));
      return;
    }
    // Any other answer (e.g. no scheduler hosted) still proves the token.
  }
  document.getElementById('login-token').value = '';
  document.getElementById('session-label').textContent = `token …${token.slice(-4)}`;
  if (!location.hash || location.hash === '#') location.hash = '#jobs';
  else route();
}

function signOut() {
  clearToken();
  showLogin();
}

document.getElementById('login-form').addEventListener('submit', signIn);
document.getElementById('logout').addEventListener('click', signOut);
window.addEventListener('hashchange', route);
if (getToken()) document.getElementById('session-label').textContent = `token …${getToken().slice(-4)}`;
route();

