/**
 * REQUEST_TIMEOUT_MS bounds how long a whole request, headers and body, may take to arrive: one
 * sent a byte at a time, or whose announced body never comes, is answered 408 in the envelope
 * once it is up, whatever reads the body (the JSON parser, a streamed blob upload, the GET body
 * that is dropped). Requests that arrive in time, slow handlers included, are not bound by it.
 */
import { bearer, bootstrapAdmin, startApp, TestApp } from './support/app';
import { trickleRequest } from './support/raw-http';
import { SseClient } from './support/sse';
import { waitFor } from './support/wait';

describe('request timeout (e2e)', () => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    // Short, so that the tests need not wait Node's 300 s.
    t = await startApp({ REQUEST_TIMEOUT_MS: '1000', EVENTS_HEARTBEAT_SECONDS: '1' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t.close());

  const auth = () => `Authorization: Bearer ${admin}\r\n`;
  const item = JSON.stringify({ type: 'core.note', properties: { title: 'slow' } });

  it.each([
    ['POST /items sent a byte at a time', () => `POST /items HTTP/1.1\r\nHost: x\r\n${auth()}Content-Type: application/json\r\nContent-Length: ${item.length}\r\n\r\n`, item],
    ['a chunked POST /items sent a byte at a time', () => `POST /items HTTP/1.1\r\nHost: x\r\n${auth()}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`, `${item.length.toString(16)}\r\n${item}\r\n0\r\n\r\n`],
    ['POST /blobs sent a byte at a time', () => `POST /blobs HTTP/1.1\r\nHost: x\r\n${auth()}Content-Type: text/plain\r\nContent-Length: 1000\r\n\r\n`, 'x'.repeat(1000)],
    ['GET /health with a body sent a byte at a time', () => `GET /health HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`, 'x'.repeat(100)],
    ['a body announced and never sent', () => `POST /items HTTP/1.1\r\nHost: x\r\n${auth()}Content-Type: application/json\r\nContent-Length: 500000\r\n\r\n`, ''],
  ])('%s: 408 invalid_request in the envelope, and nothing written', async (_name, head, body) => {
    const before = await t.sql<{ n: string }>('SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM blobs) AS n');
    const res = await trickleRequest(t.url, head(), body, 100);
    expect(res.status).toBe(408);
    expect(res.headers).toMatch(/^x-request-id: \S+/im);
    expect(JSON.parse(res.body)).toEqual({ error: { code: 'invalid_request', message: 'The request did not arrive in time' } });
    expect(await t.sql('SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM blobs) AS n')).toEqual(before);
  });

  it('a request that arrives in time is not bound by it: an event stream outlives it', async () => {
    const stream = await SseClient.open(`${t.url}/events`, bearer(admin));
    try {
      expect(stream.status).toBe(200);
      // Heartbeats every second (EVENTS_HEARTBEAT_SECONDS): three take longer than the bound.
      await waitFor(() => stream.comments.filter((c) => c === 'heartbeat').length >= 3, 'three heartbeats');
      expect(stream.closed).toBe(false);
    } finally {
      stream.close();
    }
  });
});
