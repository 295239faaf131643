// The console's only way to the server: the gateway's public HTTP API with the
// caller's bearer token (issue 35's HTTP contract). Every failure becomes an
// ApiError carrying the gateway's JSON error body, so views show it as it is.

const TOKEN_KEY = 'tessera.token';

// The token lives in sessionStorage: gone when the tab closes, never a cookie
// (so no request is authorized by ambient credentials and CSRF has no target).
export function getToken() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(token) { sessionStorage.setItem(TOKEN_KEY, token); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); }

export class ApiError extends Error {
  // httpStatus: the HTTP status (0 for a network failure); body: the parsed
  // JSON error ({code, status, message, retryAfterMs?}) or null; text: the raw
  // body when it was not JSON.
  constructor(httpStatus, body, text) {
    const name = body && body.status ? body.status : `HTTP ${httpStatus}`;
    const message = body && body.message !== undefined ? body.message : (text || '');
    super(`${name}: ${message}`);
    this.httpStatus = httpStatus;
    this.body = body;
    this.text = text;
  }
  get grpcStatus() { return this.body && this.body.status ? this.body.status : ''; }
}

function headers(extra) {
  const h = new Headers(extra || {});
  const token = getToken();
  if (token) h.set('Authorization', `Bearer ${token}`);
  return h;
}

async function errorFrom(response) {
  const text = await response.text().catch(() => '');
  let body = null;
  try { body = JSON.parse(text); } catch (_) { body = null; }
  return new ApiError(response.status, body && typeof body === 'object' ? body : null, text);
}

async function send(path, init) {
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, null, `cannot reach the server: ${e.message}`);
  }
  if (!response.ok) throw await errorFrom(response);
  return response;
}

// A unary RPC: POST /rpc/<package.Service>/<Method> with the request as
// protobuf JSON; resolves to the response message (protobuf JSON).
export async function rpc(method, request, signal) {
  const response = await send(`/rpc/${method}`, {
    method: 'POST',
    headers: headers({'Content-Type': 'application/json'}),
    body: JSON.stringify(request || {}),
    signal,
  });
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

// GET of a binary resource (preview PNG, result file) as a Blob.
export async function getBlob(path, signal) {
  const response = await send(path, {headers: headers(), signal});
  return response.blob();
}

// PUT of a File to an upload route; resolves to the UploadedFile JSON.
export async function putFile(path, file, signal) {
  const response = await send(path, {
    method: 'PUT',
    headers: headers({'Content-Type': 'application/octet-stream'}),
    body: file,
    signal,
  });
  return response.json();
}

// Reads a Server-Sent Events stream with fetch (EventSource cannot send an
// Authorization header). Calls onEvent({id, event, data}) per event, data
// parsed as JSON; resolves when the server ends the stream. An `event: error`
// rejects with an ApiError built from its data.
export async function readEvents(path, onEvent, signal) {
  const response = await send(path, {headers: headers({'Accept': 'text/event-stream'}), signal});
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true}).replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = parseEvent(block);
      if (!event) continue;
      if (event.event === 'error') {
        throw new ApiError(httpStatusOf(event.data), event.data, JSON.stringify(event.data));
      }
      onEvent(event);
    }
  }
}

function parseEvent(block) {
  let id = '', event = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;  // comments keep the connection alive
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') id = value;
    else if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return null;
  const text = data.join('\n');
  let parsed;
  try { parsed = JSON.parse(text); } catch (_) { parsed = {message: text}; }
  return {id, event, data: parsed};
}

// The HTTP status the gateway gives a gRPC code (for errors met mid-stream).
const HTTP_OF_CODE = {3: 400, 16: 401, 7: 403, 5: 404, 6: 409, 10: 409, 9: 400, 8: 429, 12: 501, 14: 503, 4: 504};
function httpStatusOf(body) {
  return body && HTTP_OF_CODE[body.code] ? HTTP_OF_CODE[body.code] : 500;
}
