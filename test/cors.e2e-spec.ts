/**
 * CORS on the API (src/common/cors.ts): a browser app on another origin, holding a bearer
 * credential, calls the API from real Chromium (a page served by a server of the test's own, on
 * another port, so another origin), and reads the answers and the headers it needs; the routes
 * under /auth/ stay closed to other origins. With CORS_ORIGINS a list, only its origins get in.
 */
import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Browser, chromium } from 'playwright-core';
import { bearer, bootstrapAdmin, startApp, TestApp } from './support/app';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** A server of a blank page: the origin a browser app would be served from. */
async function pageOrigin(): Promise<{ origin: string; close: () => Promise<void> }> {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/html' }).end('<!doctype html><title>app</title>'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('CORS for browser apps', () => {
  let open: TestApp;
  let listed: TestApp;
  let browser: Browser;
  let app: Awaited<ReturnType<typeof pageOrigin>>;
  let stranger: Awaited<ReturnType<typeof pageOrigin>>;
  let key: string;
  let listedKey: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)`);
    [app, stranger] = await Promise.all([pageOrigin(), pageOrigin()]);
    open = await startApp();
    listed = await startApp({ CORS_ORIGINS: `https://other.example, ${app.origin}`, RATE_LIMIT_ENABLED: 'true' });
    key = (await bootstrapAdmin(open)).key;
    listedKey = (await bootstrapAdmin(listed)).key;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
  });
  afterAll(async () => {
    await browser?.close();
    await Promise.all([open?.close(), listed?.close(), app?.close(), stranger?.close()]);
  });

  /** Runs `fetch(url, init)` in a page of `origin`: what the app can read of the answer, or the browser's refusal. */
  async function fetchFrom(origin: string, url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
    const page = await browser.newPage();
    try {
      await page.goto(origin);
      return await page.evaluate(
        async ([target, options]) => {
          try {
            const res = await fetch(target, options);
            const read = (name: string) => res.headers.get(name);
            return { status: res.status, body: await res.json().catch(() => null), location: read('location'), requestId: read('x-request-id'), replayed: read('idempotent-replayed') };
          } catch (err) {
            return { refused: String(err) };
          }
        },
        [url, init] as const,
      );
    } finally {
      await page.close();
    }
  }

  it('lets an app on any origin call the API with its bearer credential and read the answers, errors and headers included', async () => {
    const created = await fetchFrom(app.origin, `${open.url}/items`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Idempotency-Key': 'cors-1' },
      body: JSON.stringify({ type: 'core.note', properties: { title: 'from the browser' } }),
    });
    expect(created).toMatchObject({ status: 201, body: { type: 'core.note', properties: { title: 'from the browser' } }, requestId: expect.any(String) });
    expect(created.location).toBe(`/items/${(created.body as { id: string }).id}`);
    const replay = await fetchFrom(app.origin, `${open.url}/items`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Idempotency-Key': 'cors-1' },
      body: JSON.stringify({ type: 'core.note', properties: { title: 'from the browser' } }),
    });
    expect(replay).toMatchObject({ status: 201, replayed: 'true' });
    const changed = await fetchFrom(app.origin, `${open.url}/items/${(created.body as { id: string }).id}`, {
      method: 'PATCH',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ version: 1, properties: { title: 'changed in the browser' } }),
    });
    expect(changed).toMatchObject({ status: 200, body: { properties: { title: 'changed in the browser' } } });
    // An error is readable too: the app learns why, not only that the request failed.
    expect(await fetchFrom(app.origin, `${open.url}/items`, { headers: { Authorization: 'Bearer svc_k1_not-a-key' } })).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
    expect(await fetchFrom(app.origin, `${open.url}/no-such-route`)).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
  });

  it('streams events to an app on another origin through fetch', async () => {
    const page = await browser.newPage();
    type Held = { reader: ReadableStreamDefaultReader<Uint8Array>; text: string };
    try {
      await page.goto(app.origin);
      // The stream is open once its first line (`retry:`) has arrived.
      const opened = await page.evaluate(
        async ([url, token]) => {
          const res = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
          const held: Held = { reader: res.body!.getReader(), text: '' };
          (globalThis as unknown as { held: Held }).held = held;
          while (!held.text.includes('retry:')) held.text += new TextDecoder().decode((await held.reader.read()).value);
          return { status: res.status, type: res.headers.get('content-type') };
        },
        [`${open.url}/events`, key] as const,
      );
      expect(opened).toMatchObject({ status: 200, type: expect.stringContaining('text/event-stream') });
      const created = (await open.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties: { title: 'streamed' } }).expect(201)).body.id as string;
      const text = await page.evaluate(async (id) => {
        const held = (globalThis as unknown as { held: Held }).held;
        while (!held.text.includes(id)) held.text += new TextDecoder().decode((await held.reader.read()).value);
        await held.reader.cancel();
        return held.text;
      }, created);
      expect(text).toContain('item.created');
    } finally {
      await page.close();
    }
  });

  it('keeps the /auth/ routes closed to other origins: the account pages work by cookie', async () => {
    expect(await fetchFrom(app.origin, `${open.url}/auth/clients`, { headers: { Authorization: `Bearer ${key}` } })).toMatchObject({ refused: expect.stringContaining('TypeError') });
    // However the path is spelled, as the router matches it.
    for (const path of ['/auth/grants', '/AUTH/grants', '/%61uth/grants', '/%61uth/sessions/revoke']) {
      const preflight = await open.http.options(path).set('Origin', app.origin).set('Access-Control-Request-Method', 'POST');
      expect([path, preflight.status, preflight.headers['access-control-allow-origin']]).toEqual([path, 404, undefined]);
    }
    expect((await open.http.get('/%61uth/clients').set(bearer(key)).set('Origin', app.origin).expect(200)).headers['access-control-allow-origin']).toBeUndefined();
    // userinfo keeps its own CORS (any origin).
    const userinfo = await open.http.options('/auth/userinfo').set('Origin', app.origin).set('Access-Control-Request-Method', 'GET');
    expect([userinfo.status, userinfo.headers['access-control-allow-origin']]).toEqual([204, '*']);
  });

  it('answers a preflight with what the API reads, and never lets credentials ride along', async () => {
    const res = await open.http
      .options('/items')
      .set('Origin', app.origin)
      .set('Access-Control-Request-Method', 'PATCH')
      .set('Access-Control-Request-Headers', 'authorization, content-type, idempotency-key');
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['access-control-allow-methods']).toContain('PATCH');
    expect(res.headers['access-control-allow-headers'].toLowerCase().split(/,\s*/)).toEqual(expect.arrayContaining(['authorization', 'content-type', 'idempotency-key', 'last-event-id']));
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    const answer = await open.http.get('/items').set(bearer(key)).set('Origin', app.origin).expect(200);
    expect(answer.headers['access-control-allow-credentials']).toBeUndefined();
    expect(answer.headers['access-control-expose-headers']).toContain('X-Request-Id');
  });

  it('with CORS_ORIGINS a list, lets in only its origins, and says the answer varies with Origin', async () => {
    const read = (origin: string) => fetchFrom(origin, `${listed.url}/items?limit=1`, { headers: { Authorization: `Bearer ${listedKey}` } });
    expect(await read(app.origin)).toMatchObject({ status: 200, body: { items: expect.any(Array) } });
    expect(await read(stranger.origin)).toMatchObject({ refused: expect.stringContaining('TypeError') });
    const allowed = await listed.http.get('/items').set(bearer(listedKey)).set('Origin', app.origin).expect(200);
    const varies = (vary: string) => vary.split(/\s*,\s*/).includes('Origin');
    expect([allowed.headers['access-control-allow-origin'], varies(allowed.headers.vary)]).toEqual([app.origin, true]);
    const other = await listed.http.get('/items').set(bearer(listedKey)).set('Origin', stranger.origin).expect(200);
    expect([other.headers['access-control-allow-origin'], varies(other.headers.vary)]).toEqual([undefined, true]);
    expect((await listed.http.options('/items').set('Origin', stranger.origin).set('Access-Control-Request-Method', 'GET')).status).toBe(404);
    // A preflight is counted like any request, and says so (SPEC 8.1: every response carries the headers).
    const preflight = await listed.http.options('/items').set('Origin', app.origin).set('Access-Control-Request-Method', 'GET').expect(204);
    expect(preflight.headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
    // An empty Access-Control-Request-Method is no preflight.
    expect((await listed.http.options('/items').set('Origin', app.origin).set('Access-Control-Request-Method', '')).status).toBe(404);
  });
});
