/**
 * An event stream asked of an instance shutting down (src/events/event-stream.ts, sendAway): a
 * 200 event stream that says when to come back and ends, since an EventSource takes any other
 * status as final and never reconnects; and the streams open before are ended with the same retry.
 */
import http from 'node:http';
import { EventStream } from '../src/events/event-stream';
import { bootstrapAdmin, startApp, TestApp } from './support/app';
import { waitFor } from './support/wait';

/** GET /events with `key`: the status, headers and whole body once the server ends it. */
function getStream(url: string, key: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(`${url}/events`, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      })
      .on('error', reject);
  });
}

describe('GET /events while the instance shuts down', () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it('answers 200 with retry: and ends, so an EventSource reconnects (to another instance) instead of giving up', async () => {
    t = await startApp();
    const { key } = await bootstrapAdmin(t);
    const open = getStream(t.url, key);
    // The stream is among the subscribers once its first bytes arrive; shutting down ends it.
    await waitFor(() => (t.app.get(EventStream) as unknown as { subscribers: Set<unknown> }).subscribers.size > 0, 'the stream subscribed', 15_000, 20);
    t.app.get(EventStream).beforeApplicationShutdown();
    expect((await open).body).toContain('retry: 3000');

    const asked = await getStream(t.url, key);
    expect(asked.status).toBe(200);
    expect(asked.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(asked.body).toMatch(/^retry: 3000$/m);
    expect(asked.body).not.toMatch(/^(data|event):/m);
  });
});
