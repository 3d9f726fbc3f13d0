/**
 * Sends one FuzzRequest with node:http, byte for byte: the request line carries the encoded
 * path as generated (supertest/superagent would re-encode it, and would refuse `%ZZ`), headers
 * go out in the given order with no defaults added but Host and Connection, and the body is
 * written as raw bytes with an explicit Content-Length. The whole response body is kept as
 * bytes, because the oracles must see exactly what a client would.
 *
 * One connection per request (no keep-alive): a request that makes the server close the
 * connection (an oversized body, a protocol error) must not turn the next request into an
 * ECONNRESET that would be blamed on it.
 */
import http from 'node:http';
import net from 'node:net';
import { FuzzRequest } from './requests';
import { Fixtures } from './fixtures';

export interface FuzzResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  ms: number;
  /** Set when no complete response arrived (reset, timeout, parse error). */
  error?: string;
}

/** A request the client itself refused to send: a bug in the fuzzer, never in the service. */
export class ClientRefusedError extends Error {}

export function authorizationFor(r: FuzzRequest, f: Fixtures): string | undefined {
  switch (r.persona) {
    case 'admin': return `Bearer ${f.keys.adminA}`;
    case 'member': return `Bearer ${f.keys.memberA}`;
    case 'garbage': return r.garbageAuth;
    default: return undefined;
  }
}

/** The header list exactly as sent (Authorization first), for sending and for replays. */
export function wireHeaders(r: FuzzRequest, f: Fixtures): Array<[string, string]> {
  const auth = authorizationFor(r, f);
  const headers: Array<[string, string]> = auth !== undefined ? [['Authorization', auth], ...r.headers] : [...r.headers];
  if (r.body !== undefined) headers.push(['Content-Length', String(r.body.length)]);
  return headers;
}

export function send(base: string, r: FuzzRequest, f: Fixtures, timeoutMs: number): Promise<FuzzResponse> {
  if (r.raw) return sendRaw(base, r.raw, timeoutMs);
  const url = new URL(base);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    let settled = false;
    const done = (res: FuzzResponse) => {
      if (!settled) {
        settled = true;
        resolve(res);
      }
    };
    let req: http.ClientRequest;
    try {
      req = http.request({
        host: url.hostname,
        port: url.port,
        method: r.method,
        path: r.path + (r.query ? `?${r.query}` : ''),
        // A flat array keeps duplicates and order, and node adds nothing but Connection (not
        // even Host, which HTTP/1.1 requires: it goes first, as curl sends it).
        headers: [['Host', url.host], ...wireHeaders(r, f)].flat(),
        agent: false,
      });
    } catch (err) {
      reject(new ClientRefusedError(`node:http refused the generated request (fuzzer bug): ${(err as Error).message}`));
      return;
    }
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no response within ${timeoutMs} ms`)));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      const finish = (error?: string) =>
        done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), ms: Date.now() - started, error });
      // An event stream never ends by itself: judge its first half second, then hang up.
      if (/^text\/event-stream/i.test(String(res.headers['content-type'] ?? ''))) {
        setTimeout(() => {
          finish();
          req.destroy();
        }, 500);
      }
      res.on('end', () => finish());
      res.on('aborted', () => finish('response aborted before its end'));
      res.on('error', (e) => finish(`response error: ${e.message}`));
    });
    req.on('error', (err) => {
      const code = (err as NodeJS.ErrnoException).code;
      // Headers or body the client refuses surface here too, before anything is written.
      if (code === 'ERR_INVALID_CHAR' || code === 'ERR_INVALID_HTTP_TOKEN' || code === 'ERR_UNESCAPED_CHARACTERS') {
        if (!settled) {
          settled = true;
          reject(new ClientRefusedError(`node:http refused the generated request (fuzzer bug): ${err.message}`));
        }
        return;
      }
      // The server may answer (413) and close before the whole body is written; the write then
      // fails after the response arrived, which is fine.
      done({ status: 0, headers: {}, body: Buffer.alloc(0), ms: Date.now() - started, error: `${code ?? ''} ${err.message}`.trim() });
    });
    if (r.body !== undefined) req.end(r.body);
    else req.end();
  });
}

/**
 * Writes raw bytes to a fresh TCP connection and parses the first response by hand (the
 * requests are ones node's client would refuse to send; the responses may be malformed too).
 */
export function sendRaw(base: string, bytes: Buffer, timeoutMs: number): Promise<FuzzResponse> {
  const url = new URL(base);
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = (error?: string) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      const res = parseResponse(Buffer.concat(chunks));
      const ms = Date.now() - started;
      if (res) resolve({ ...res, ms });
      else resolve({ status: 0, headers: {}, body: Buffer.alloc(0), ms, error: error ?? (chunks.length ? 'unparsable response' : 'connection closed without a response') });
    };
    // write, not end: node's server drops a request whose client half-closes before the answer.
    const socket = net.connect({ host: url.hostname, port: Number(url.port) }, () => socket.write(bytes));
    socket.setTimeout(Math.min(timeoutMs, 5000), () => finish(`no response within ${Math.min(timeoutMs, 5000)} ms`));
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      // Done as soon as one complete response is in (an Upgrade or CONNECT may keep the socket).
      const res = parseResponse(Buffer.concat(chunks));
      if (res?.complete) finish();
    });
    socket.on('end', () => finish());
    socket.on('error', (e) => finish(`${(e as NodeJS.ErrnoException).code ?? ''} ${e.message}`.trim()));
  });
}

function parseResponse(buf: Buffer): (Omit<FuzzResponse, 'ms'> & { complete: boolean }) | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine, ...lines] = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/\d\.\d (\d{3})/.exec(statusLine);
  if (!m) return undefined;
  const headers: http.IncomingHttpHeaders = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  let body = buf.subarray(end + 4);
  let complete = false;
  const length = headers['content-length'];
  if (/chunked/i.test(String(headers['transfer-encoding'] ?? ''))) {
    const out: Buffer[] = [];
    let rest = body;
    for (;;) {
      const nl = rest.indexOf('\r\n');
      if (nl < 0) break;
      const size = parseInt(rest.subarray(0, nl).toString('latin1'), 16);
      if (!Number.isFinite(size)) break;
      if (size === 0) {
        complete = true;
        break;
      }
      out.push(rest.subarray(nl + 2, nl + 2 + size));
      rest = rest.subarray(nl + 2 + size + 2);
    }
    body = Buffer.concat(out);
  } else if (length !== undefined) {
    const n = Number(length);
    complete = body.length >= n;
    body = body.subarray(0, n);
  } else if (Number(m[1]) === 101 || Number(m[1]) === 204 || Number(m[1]) === 304) complete = true;
  return { status: Number(m[1]), headers, body, complete };
}
