/**
 * Response compression (src/common/compression.ts): JSON answers of 1 KiB and more are sent in
 * the encoding the client prefers and inflate to the very bytes an identity answer carries;
 * small answers, blob downloads and event streams are sent as they are; RESPONSE_COMPRESSION
 * turns it off. Read over plain node:http, which inflates nothing by itself.
 */
import { request as httpRequest, IncomingHttpHeaders } from 'node:http';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { bearer, startApp, TestApp } from './support/app';

interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

function get(base: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const INFLATE: Record<string, (b: Buffer) => Buffer> = { gzip: gunzipSync, br: brotliDecompressSync, deflate: inflateSync };

const varies = (headers: IncomingHttpHeaders) => String(headers.vary ?? '').toLowerCase().split(/\s*,\s*/);

describe('response compression', () => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    t = await startApp({ BLOB_STORAGE: 'postgres', CORS_ORIGINS: 'https://app.example.com' });
    admin = (await t.http.post('/keys').send({ label: 'root admin' }).expect(201)).body.key;
    // A page well past 8 KiB, the size from which the work moves to the thread pool.
    for (let i = 0; i < 40; i++) {
      await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: `note ${i}`, body: 'words '.repeat(40) } }).expect(201);
    }
  });
  afterAll(() => t.close());

  it.each([
    ['gzip', 'gzip'],
    ['br', 'br'],
    ['deflate', 'deflate'],
    ['gzip, deflate, br', 'br'],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['gzip;q=0, *', 'br'],
    ['br;q=0, *;q=0.5, X-Gzip;q=0.8', 'gzip'],
  ])('sends /openapi.json and a page of items compressed for Accept-Encoding "%s" (%s), inflating to the identity bytes', async (accept, encoding) => {
    for (const [path, headers] of [['/openapi.json', {}], ['/items?limit=100', bearer(admin)]] as const) {
      const plain = await get(t.url, path, { ...headers, 'Accept-Encoding': 'identity' });
      const packed = await get(t.url, path, { ...headers, 'Accept-Encoding': accept });
      expect({ path, status: packed.status, encoding: packed.headers['content-encoding'] }).toEqual({ path, status: 200, encoding });
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(varies(packed.headers)).toContain('accept-encoding');
      expect(packed.body.length).toBeLessThan(plain.body.length / 4);
      expect(INFLATE[encoding](packed.body).equals(plain.body)).toBe(true);
    }
  });

  it('keeps Vary: Origin beside Vary: Accept-Encoding when CORS lists origins', async () => {
    const res = await get(t.url, '/openapi.json', { 'Accept-Encoding': 'gzip', Origin: 'https://app.example.com' });
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(varies(res.headers)).toEqual(expect.arrayContaining(['origin', 'accept-encoding']));
  });

  it('sends small answers, 304s and answers to clients that accept no encoding as they are, saying they vary with Accept-Encoding', async () => {
    const small = await get(t.url, '/health', { 'Accept-Encoding': 'gzip' });
    expect(small.status).toBe(200);
    expect(small.body.length).toBeLessThan(1024);
    expect(small.headers['content-encoding']).toBeUndefined();
    expect(varies(small.headers)).toContain('accept-encoding');
    const etag = (await get(t.url, '/openapi.json')).headers.etag!;
    const current = await get(t.url, '/openapi.json', { 'Accept-Encoding': 'gzip', 'If-None-Match': etag, Origin: 'https://app.example.com' });
    expect(current.status).toBe(304);
    expect(varies(current.headers)).toEqual(expect.arrayContaining(['origin', 'accept-encoding']));
    expect(JSON.parse(small.body.toString())).toEqual(expect.any(Object));
    const none = await get(t.url, '/openapi.json');
    expect(none.headers['content-encoding']).toBeUndefined();
    expect(varies(none.headers)).toContain('accept-encoding');
    expect(Number(none.headers['content-length'])).toBe(none.body.length);
    expect(JSON.parse(none.body.toString()).openapi).toMatch(/^3\./);
  });

  it('sends nothing under /auth/ compressed: the sign-in and device pages carry CSRF tokens beside what the request reflects (BREACH)', async () => {
    for (const path of ['/auth/sign-in', '/auth/device', '/.well-known/openid-configuration', '/auth/clients']) {
      const res = await get(t.url, path, { ...bearer(admin), 'Accept-Encoding': 'gzip, br' });
      expect({ path, status: res.status, encoding: res.headers['content-encoding'] }).toEqual({ path, status: 200, encoding: undefined });
    }
    // Large enough that it would have been.
    expect((await get(t.url, '/auth/sign-in')).body.length).toBeGreaterThan(1024);
  });

  it('sends a JSON blob as stored: its bytes, Content-Length and strong ETag', async () => {
    const bytes = JSON.stringify({ rows: Array.from({ length: 400 }, (_, i) => ({ i, text: 'compressible '.repeat(4) })) });
    const upload = await t.http.post('/blobs').set(bearer(admin)).set('Content-Type', 'application/json').send(bytes).expect(201);
    for (const method of ['GET', 'HEAD']) {
      const res = await get(t.url, `/blobs/${upload.body.hash}`, { ...bearer(admin), 'Accept-Encoding': 'gzip, br' }, method);
      expect({ method, status: res.status, encoding: res.headers['content-encoding'], length: res.headers['content-length'], etag: res.headers.etag }).toEqual({
        method,
        status: 200,
        encoding: undefined,
        length: String(Buffer.byteLength(bytes)),
        etag: `"${upload.body.hash}"`,
      });
      if (method === 'GET') expect(res.body.toString()).toBe(bytes);
    }
  });

  it('sends an event stream uncompressed, each event as it happens', async () => {
    const events = httpRequest(`${t.url}/events`, { headers: { ...bearer(admin), 'Accept-Encoding': 'gzip, br' } });
    const seen = new Promise<{ headers: IncomingHttpHeaders; text: string }>((resolve, reject) => {
      events.on('response', (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString();
          if (text.includes('item.created')) resolve({ headers: res.headers, text });
        });
        // Once the stream is open, the write it must show.
        void t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'streamed', body: 'x'.repeat(2000) } }).expect(201).catch(reject);
      });
      events.on('error', reject);
    });
    events.end();
    try {
      const { headers, text } = await seen;
      expect(headers['content-type']).toMatch(/^text\/event-stream/);
      expect(headers['content-encoding']).toBeUndefined();
      expect(text).toContain('streamed');
    } finally {
      events.destroy();
    }
  });

  it('sends nothing compressed when RESPONSE_COMPRESSION is false', async () => {
    const off = await startApp({ RESPONSE_COMPRESSION: 'false' });
    try {
      const res = await get(off.url, '/openapi.json', { 'Accept-Encoding': 'gzip, br' });
      expect(res.status).toBe(200);
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(Number(res.headers['content-length'])).toBe(res.body.length);
    } finally {
      await off.close();
    }
  });
});
