/**
 * Blobs over real HTTP, once per storage backend: upload (streamed, content-addressed,
 * de-duplicated per tenant), download/HEAD/metadata, the size limit (declared and mid-stream),
 * permissions and tenant isolation. Storage is checked directly (SQL and the blob directory).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { BlobsService } from '../src/blobs/blobs.service';
import { StagingJanitor } from '../src/blobs/staging-janitor';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { expectLocation } from './support/created';
import { badFields, expectError } from './support/envelope';
import { waitFor } from './support/wait';

const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const MiB = 1024 * 1024;

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/**
 * A plain node:http request, for what supertest hides: exact response bytes, uploads without
 * Content-Type, and chunked uploads (a Readable body is sent without Content-Length).
 */
function raw(
  t: TestApp,
  method: string,
  path: string,
  opts: { key?: string; headers?: Record<string, string>; body?: Buffer | Readable } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...(opts.key ? bearer(opts.key) : {}), ...opts.headers };
    if (Buffer.isBuffer(opts.body) && headers['Content-Length'] === undefined) headers['Content-Length'] = String(opts.body.length);
    const req = http.request(new URL(path, t.url), { method, headers, agent: false });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (opts.body instanceof Readable) opts.body.pipe(req);
    else req.end(opts.body);
  });
}

/** `total` bytes in 64 KiB pieces, produced on demand (so sent chunked, never held whole). */
function generated(total: number, seed = 7): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= total) return void this.push(null);
      const n = Math.min(64 * 1024, total - sent);
      const piece = Buffer.alloc(n);
      for (let i = 0; i < n; i++) piece[i] = (sent + i + seed) % 251;
      sent += n;
      this.push(piece);
    },
  });
}

function generatedHash(total: number, seed = 7): string {
  const h = createHash('sha256');
  const piece = Buffer.alloc(64 * 1024);
  for (let sent = 0; sent < total; sent += piece.length) {
    const n = Math.min(piece.length, total - sent);
    for (let i = 0; i < n; i++) piece[i] = (sent + i + seed) % 251;
    h.update(piece.subarray(0, n));
  }
  return h.digest('hex');
}

function rawError(res: RawResponse, status: number, code: string): Record<string, any> {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = JSON.parse(res.body.toString('utf8'));
  expect(body.error.code).toBe(code);
  return body.error;
}

/** Every file below `dir`, as paths relative to it. */
async function filesUnder(dir: string, prefix = ''): Promise<string[]> {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...(await filesUnder(join(dir, entry.name), rel)));
    else out.push(rel);
  }
  return out;
}

describe.each(['disk', 'postgres'] as const)('blobs (%s storage)', (storage) => {
  let t: TestApp;
  let blobDir: string;
  let admin: { key: string; tenantId: string };

  const upload = (key: string, body: Buffer, contentType = 'application/octet-stream') =>
    t.http.post('/blobs').set(bearer(key)).set('Content-Type', contentType).send(body);
  /** For JSON and form types: supertest would serialise a Buffer body itself. */
  const rawUpload = async (key: string, body: Buffer, contentType: string) => {
    const res = await raw(t, 'POST', '/blobs', { key, body, headers: { 'Content-Type': contentType } });
    return { status: res.status, body: JSON.parse(res.body.toString('utf8')) };
  };

  const storedFiles = async () => (await filesUnder(blobDir)).filter((f) => !f.startsWith('.staging/'));
  const stagingFiles = () => filesUnder(join(blobDir, '.staging'));
  const chunkRows = async (tenantId: string, hash: string) =>
    Number((await t.sql<{ n: string }>('SELECT count(*) AS n FROM blob_chunks WHERE tenant_id = $1 AND hash = $2', [tenantId, hash]))[0].n);
  const metadataRows = async (hash: string) =>
    t.sql<{ tenant_id: string }>('SELECT tenant_id FROM blobs WHERE hash = $1 ORDER BY tenant_id', [hash]);

  /** The content is stored exactly once for the tenant, in the configured backend only. */
  async function expectStoredOnce(tenantId: string, hash: string, bytes?: Buffer): Promise<void> {
    expect((await metadataRows(hash)).filter((r) => r.tenant_id === tenantId)).toHaveLength(1);
    const files = (await storedFiles()).filter((f) => f.startsWith(`${tenantId}/`) && f.endsWith(hash));
    if (storage === 'disk') {
      expect(files).toEqual([`${tenantId}/${hash.slice(0, 2)}/${hash}`]);
      if (bytes) expect((await readFile(join(blobDir, files[0]))).equals(bytes)).toBe(true);
    } else {
      expect(files).toEqual([]);
      expect(await chunkRows(tenantId, hash)).toBeGreaterThan(0);
    }
  }

  beforeAll(async () => {
    blobDir = await mkdtemp(join(tmpdir(), `svc-blobs-${storage}-`));
    t = await startApp({ BLOB_STORAGE: storage, BLOB_DIR: blobDir });
    admin = await bootstrapAdmin(t);
  });
  afterAll(async () => {
    await t.close();
    await rm(blobDir, { recursive: true, force: true });
  });

  describe('listing (GET /blobs)', () => {
    it('lists the tenant\'s blobs newest first, page by page, by content type if asked; admins only; another tenant sees its own', async () => {
      const tenant = await createTenant(t, admin.key, `blob-list-${storage}`);
      const made: string[] = [];
      for (let n = 0; n < 5; n++) {
        const res = await upload(tenant.key, randomBytes(100 + n), n % 2 ? 'image/png' : 'text/plain').expect(201);
        made.unshift(res.body.hash);
      }
      const seen: string[] = [];
      let page = await t.http.get('/blobs?limit=2').set(bearer(tenant.key)).expect(200);
      seen.push(...page.body.blobs.map((b: { hash: string }) => b.hash));
      while (page.body.next_cursor) {
        page = await t.http.get(`/blobs?limit=2&cursor=${page.body.next_cursor}`).set(bearer(tenant.key)).expect(200);
        seen.push(...page.body.blobs.map((b: { hash: string }) => b.hash));
      }
      expect(seen).toEqual(made);
      const first = (await t.http.get('/blobs?limit=1').set(bearer(tenant.key)).expect(200)).body.blobs[0];
      expect(first).toEqual((await t.http.get(`/blobs/${first.hash}/metadata`).set(bearer(tenant.key)).expect(200)).body);

      // Stored in whole milliseconds, as cursors carry them; blobs made in one millisecond page apart all the same.
      const [{ n }] = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM blobs WHERE tenant_id = $1 AND created_at <> date_trunc('milliseconds', created_at)`, [tenant.tenantId]);
      expect(n).toBe(0);
      await t.sql(`UPDATE blobs SET created_at = (SELECT max(created_at) FROM blobs WHERE tenant_id = $1) WHERE tenant_id = $1 AND hash = ANY($2::text[])`, [tenant.tenantId, made.slice(0, 3)]);
      const sameMs: string[] = [];
      let cursor: string | null = null;
      do {
        const res: any = await t.http.get(`/blobs?limit=1${cursor ? `&cursor=${cursor}` : ''}`).set(bearer(tenant.key)).expect(200);
        sameMs.push(...res.body.blobs.map((b: { hash: string }) => b.hash));
        cursor = res.body.next_cursor;
      } while (cursor);
      expect([...sameMs].sort()).toEqual([...made].sort());

      const pngs = await t.http.get('/blobs?content_type=image/png').set(bearer(tenant.key)).expect(200);
      expect([...pngs.body.blobs.map((b: { hash: string }) => b.hash)].sort()).toEqual([made[1], made[3]].sort());

      const member = await createKey(t, tenant.key, { role: 'member', type_permissions: { '*': 'write' } });
      expectError(await t.http.get('/blobs').set(bearer(member.key)), 403, 'forbidden');
      expect(badFields(await t.http.get('/blobs?cursor=nope').set(bearer(tenant.key)))).toEqual(['cursor']);
      expect(badFields(await t.http.get('/blobs?limit=0').set(bearer(tenant.key)))).toEqual(['limit']);
      const others = (await t.http.get('/blobs?limit=100').set(bearer(admin.key)).expect(200)).body.blobs.map((b: { hash: string }) => b.hash);
      expect(others.filter((h: string) => made.includes(h))).toEqual([]);
    });
  });

  describe('upload and download', () => {
    const png = randomBytes(3000);
    const hash = sha256(png);

    it('stores new bytes: 201 with the SHA-256 of the body', async () => {
      const res = await upload(admin.key, png, 'image/png').expect(201);
      expect(res.body).toEqual({ hash, ref: `sha256:${hash}`, size: png.length, content_type: 'image/png', created_at: expect.stringMatching(RFC3339) });
      await expectStoredOnce(admin.tenantId, hash, png);
      expect(await stagingFiles()).toEqual([]);
    });

    it('de-duplicates: the same bytes again give 200 with the first record, stored once', async () => {
      const first = await t.http.get(`/blobs/${hash}/metadata`).set(bearer(admin.key)).expect(200);
      const before = await storedFiles();
      const chunksBefore = await chunkRows(admin.tenantId, hash);
      const res = await upload(admin.key, png, 'application/x-other').expect(200);
      expect(res.body).toEqual(first.body);
      expect(res.body.content_type).toBe('image/png');
      await expectStoredOnce(admin.tenantId, hash, png);
      expect(await storedFiles()).toEqual(before);
      expect(await chunkRows(admin.tenantId, hash)).toBe(chunksBefore);
      expect(await stagingFiles()).toEqual([]);
    });

    it('a new blob answers Location: /blobs/{hash}, which GET reads; the same bytes again (an Idempotency-Key is not needed, and ignored) are 200 with the record', async () => {
      const bytes = randomBytes(100);
      const res = await upload(admin.key, bytes).set('Idempotency-Key', `blob-${sha256(bytes)}`);
      await expectLocation(t, res, `/blobs/${sha256(bytes)}`, admin.key);
      const again = await upload(admin.key, bytes).set('Idempotency-Key', `blob-${sha256(bytes)}`).expect(200);
      expect([again.body, again.headers['idempotent-replayed']]).toEqual([res.body, undefined]);
    });

    it('downloads the identical bytes with the stored type, length and caching headers', async () => {
      const res = await raw(t, 'GET', `/blobs/${hash}`, { key: admin.key });
      expect(res.status).toBe(200);
      expect(res.body.equals(png)).toBe(true);
      expect(res.headers['content-type']).toBe('image/png');
      expect(res.headers['content-length']).toBe(String(png.length));
      expect(res.headers.etag).toBe(`"${hash}"`);
      expect(res.headers['cache-control']).toBe('private, max-age=31536000, immutable');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    });

    it('accepts the sha256: prefix in paths', async () => {
      const res = await raw(t, 'GET', `/blobs/sha256:${hash}`, { key: admin.key });
      expect(res.status).toBe(200);
      expect(res.body.equals(png)).toBe(true);
      await t.http.get(`/blobs/sha256:${hash}/metadata`).set(bearer(admin.key)).expect(200);
    });

    it('answers HEAD with the same headers and no body', async () => {
      const res = await raw(t, 'HEAD', `/blobs/${hash}`, { key: admin.key });
      expect(res.status).toBe(200);
      expect(res.body.length).toBe(0);
      expect(res.headers['content-type']).toBe('image/png');
      expect(res.headers['content-length']).toBe(String(png.length));
      expect(res.headers.etag).toBe(`"${hash}"`);
      expect(res.headers['cache-control']).toBe('private, max-age=31536000, immutable');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      // Exactly GET's headers (RFC 9110 9.3.2), whatever the request accepts.
      const headers = { 'Accept-Encoding': 'gzip, br' };
      const [get, head] = await Promise.all(['GET', 'HEAD'].map((method) => raw(t, method, `/blobs/${hash}`, { key: admin.key, headers })));
      const varying = /^(date|x-request-id|x-ratelimit-.*|connection|keep-alive)$/;
      const stable = (h: http.IncomingHttpHeaders) => Object.fromEntries(Object.entries(h).filter(([name]) => !varying.test(name)));
      expect(stable(head.headers)).toEqual(stable(get.headers));
    });

    it('returns the metadata record', async () => {
      const res = await t.http.get(`/blobs/${hash}/metadata`).set(bearer(admin.key)).expect(200);
      expect(res.body).toEqual({ hash, ref: `sha256:${hash}`, size: png.length, content_type: 'image/png', created_at: expect.stringMatching(RFC3339) });
    });

    it('answers a matching If-None-Match with 304 and no body', async () => {
      const res = await raw(t, 'GET', `/blobs/${hash}`, { key: admin.key, headers: { 'If-None-Match': `"${hash}"` } });
      expect(res.status).toBe(304);
      expect(res.body.length).toBe(0);
      expect(res.headers.etag).toBe(`"${hash}"`);
    });

    it('evaluates If-None-Match whatever Cache-Control the request carries (fetch adds no-cache): weak tags, lists and * too', async () => {
      for (const value of [`"${hash}"`, `W/"${hash}"`, `"other", "${hash}"`, '*']) {
        const res = await raw(t, 'GET', `/blobs/${hash}`, { key: admin.key, headers: { 'If-None-Match': value, 'Cache-Control': 'no-cache' } });
        expect([value, res.status, res.body.length]).toEqual([value, 304, 0]);
      }
      const stale = await raw(t, 'GET', `/blobs/${hash}`, { key: admin.key, headers: { 'If-None-Match': '"other"' } });
      expect([stale.status, stale.body.equals(png)]).toEqual([200, true]);
    });

    it('refuses query parameters, which no blob route reads, as every route does', async () => {
      for (const path of [`/blobs/${hash}?download=1`, `/blobs/${hash}/metadata?x=1`]) {
        expect(expectError(await t.http.get(path).set(bearer(admin.key)), 400, 'validation_error').details?.fields).toEqual([{ field: path.split('?')[1].split('=')[0], message: 'is not a known field' }]);
      }
      expect((await raw(t, 'HEAD', `/blobs/${hash}?download=1`, { key: admin.key })).status).toBe(400);
      const upload = await raw(t, 'POST', '/blobs?filename=a.txt', { key: admin.key, body: Buffer.from('named upload'), headers: { 'Content-Type': 'text/plain' } });
      expect(rawError(upload, 400, 'validation_error').details?.fields).toEqual([{ field: 'filename', message: 'is not a known field' }]);
      expect((await raw(t, 'GET', `/blobs/${sha256('named upload')}/metadata`, { key: admin.key })).status).toBe(404);
    });

    it('stores a body sent with Content-Encoding gzip, deflate or br as its decoded bytes', async () => {
      const content = Buffer.from(`compressible ${'text '.repeat(2000)}${randomBytes(8).toString('hex')}`);
      for (const [coding, encode] of [['gzip', gzipSync], ['deflate', deflateSync], ['BR', brotliCompressSync]] as const) {
        const res = await raw(t, 'POST', '/blobs', { key: admin.key, body: encode(content), headers: { 'Content-Type': 'text/plain', 'Content-Encoding': coding } });
        expect([coding, res.status]).toEqual([coding, coding === 'gzip' ? 201 : 200]);
        expect(JSON.parse(res.body.toString())).toMatchObject({ hash: sha256(content), size: content.length });
      }
      const got = await raw(t, 'GET', `/blobs/${sha256(content)}`, { key: admin.key });
      expect([got.headers['content-encoding'], got.body.equals(content)]).toEqual([undefined, true]);
      await expectStoredOnce(admin.tenantId, sha256(content), content);
    });

    it('refuses another Content-Encoding (415) and bytes that do not decode as declared (400), storing nothing', async () => {
      const before = await storedFiles();
      for (const coding of ['zstd', 'gzip, br', 'compress']) {
        const res = await raw(t, 'POST', '/blobs', { key: admin.key, body: gzipSync('x'), headers: { 'Content-Encoding': coding } });
        rawError(res, 415, 'invalid_request');
      }
      // Fixed bytes, not random ones: some 4 % of random 100-byte strings are valid brotli.
      const corrupt = gzipSync(Buffer.from('fixed content '.repeat(300)));
      corrupt.writeUInt32LE((corrupt.readUInt32LE(corrupt.length - 8) ^ 1) >>> 0, corrupt.length - 8); // its CRC no longer matches
      rawError(await raw(t, 'POST', '/blobs', { key: admin.key, body: corrupt, headers: { 'Content-Encoding': 'gzip' } }), 400, 'invalid_request');
      rawError(await raw(t, 'POST', '/blobs', { key: admin.key, body: Buffer.from('this is not brotli at all'), headers: { 'Content-Encoding': 'br' } }), 400, 'invalid_request');
      expect(await storedFiles()).toEqual(before);
      await waitFor(async () => (await stagingFiles()).length === 0, 'the staging files to be removed');
    });

    it('stores a JSON-typed upload verbatim instead of parsing it', async () => {
      const json = Buffer.from('{ "b": 1,\n   "a": [1, 2, {"x": null}] }  ');
      const res = await rawUpload(admin.key, json, 'application/json');
      expect(res.status).toBe(201);
      expect(res.body.hash).toBe(sha256(json));
      expect(res.body.size).toBe(json.length);
      expect(res.body.content_type).toBe('application/json');
      const got = await raw(t, 'GET', `/blobs/${res.body.hash}`, { key: admin.key });
      expect(got.body.equals(json)).toBe(true);
      expect(got.headers['content-type']).toBe('application/json');
      // Express routes paths case-insensitively; the body parser exclusion does too.
      const upper = Buffer.from('{"upper": true}');
      const viaUpper = await raw(t, 'POST', '/BLOBS', { key: admin.key, body: upper, headers: { 'Content-Type': 'application/json' } });
      expect(viaUpper.status).toBe(201);
      expect(JSON.parse(viaUpper.body.toString()).hash).toBe(sha256(upper));
    });

    it('also takes malformed JSON and form bodies as plain bytes', async () => {
      const notJson = Buffer.from('{"unterminated": ');
      const res = await rawUpload(admin.key, notJson, 'application/json');
      expect(res.status).toBe(201);
      expect(res.body.hash).toBe(sha256(notJson));
      const form = Buffer.from('a=1&b=2');
      const formRes = await rawUpload(admin.key, form, 'application/x-www-form-urlencoded');
      expect(formRes.status).toBe(201);
      expect(formRes.body.hash).toBe(sha256(form));
      expect((await raw(t, 'GET', `/blobs/${formRes.body.hash}`, { key: admin.key })).body.equals(form)).toBe(true);
    });

    it('defaults the content type to application/octet-stream', async () => {
      const bytes = randomBytes(100);
      const res = await raw(t, 'POST', '/blobs', { key: admin.key, body: bytes });
      expect(res.status).toBe(201);
      expect(JSON.parse(res.body.toString()).content_type).toBe('application/octet-stream');
      const got = await raw(t, 'GET', `/blobs/${sha256(bytes)}`, { key: admin.key });
      expect(got.headers['content-type']).toBe('application/octet-stream');
    });

    it('stores and serves an empty blob', async () => {
      const empty = Buffer.alloc(0);
      const res = await raw(t, 'POST', '/blobs', { key: admin.key, body: empty, headers: { 'Content-Type': 'text/plain' } });
      expect(res.status).toBe(201);
      expect(JSON.parse(res.body.toString())).toMatchObject({ hash: sha256(empty), size: 0 });
      await expectStoredOnce(admin.tenantId, sha256(empty), empty);
      const got = await raw(t, 'GET', `/blobs/${sha256(empty)}`, { key: admin.key });
      expect(got.status).toBe(200);
      expect(got.headers['content-length']).toBe('0');
      expect(got.body.length).toBe(0);
      // No byte of it can be asked for; a suffix of it is the whole of it.
      const ranged = await raw(t, 'GET', `/blobs/${sha256(empty)}`, { key: admin.key, headers: { Range: 'bytes=0-' } });
      expect([ranged.status, ranged.headers['content-range']]).toEqual([416, 'bytes */0']);
      const suffix = await raw(t, 'GET', `/blobs/${sha256(empty)}`, { key: admin.key, headers: { Range: 'bytes=-1' } });
      expect([suffix.status, suffix.headers['content-range'], suffix.body.length]).toEqual([200, undefined, 0]);
    });

    it('rejects a malformed Content-Type with 415 invalid_request (the HTTP layer answers it, as for any route)', async () => {
      const before = await t.sql('SELECT hash FROM blobs');
      const res = await raw(t, 'POST', '/blobs', { key: admin.key, body: Buffer.from('x'), headers: { 'Content-Type': 'not a media type' } });
      rawError(res, 415, 'invalid_request');
      expect(await t.sql('SELECT hash FROM blobs')).toEqual(before);
      // Repeated as the client wrote it: UTF-8 bytes in the header are not shown as latin1 mojibake.
      const named = await raw(t, 'POST', '/blobs', { key: admin.key, body: Buffer.from('x'), headers: { 'Content-Type': Buffer.from('text/plain; name="日本.txt"').toString('latin1') } });
      expect([named.status, JSON.parse(named.body.toString()).error.details.content_type]).toEqual([400, 'text/plain; name="日本.txt"']);
    });

    it('streams a multi-MiB chunked upload and download', async () => {
      const size = 5 * MiB + 123;
      const expected = generatedHash(size);
      const res = await raw(t, 'POST', '/blobs', { key: admin.key, body: generated(size), headers: { 'Content-Type': 'video/mp4' } });
      expect(res.status).toBe(201);
      expect(JSON.parse(res.body.toString())).toMatchObject({ hash: expected, size, content_type: 'video/mp4' });
      await expectStoredOnce(admin.tenantId, expected);
      if (storage === 'postgres') expect(await chunkRows(admin.tenantId, expected)).toBe(6); // 1 MiB chunks
      const got = await raw(t, 'GET', `/blobs/${expected}`, { key: admin.key });
      expect(got.status).toBe(200);
      expect(got.headers['content-length']).toBe(String(size));
      expect(got.body.length).toBe(size);
      expect(sha256(got.body)).toBe(expected);
      expect(await stagingFiles()).toEqual([]);
    });
    it('serves one byte range (206, Content-Range), across chunk boundaries and cut at the end', async () => {
      const bytes = randomBytes(2 * MiB + 777);
      const size = bytes.length;
      const blob = sha256(bytes);
      expect((await upload(admin.key, bytes)).status).toBe(201);
      const ranges: Array<[string, number, number]> = [
        ['bytes=0-99', 0, 99],
        [`bytes=${MiB - 10}-${MiB + 10}`, MiB - 10, MiB + 10],
        [`bytes=${2 * MiB}-`, 2 * MiB, size - 1],
        [`bytes=${size - 5}-`, size - 5, size - 1],
        ['bytes=-300', size - 300, size - 1],
        ['bytes=1000-99999999', 1000, size - 1],
        [`bytes=${size - 1}-${size - 1}`, size - 1, size - 1],
      ];
      for (const [range, start, end] of ranges) {
        const res = await raw(t, 'GET', `/blobs/${blob}`, { key: admin.key, headers: { Range: range } });
        expect({ range, status: res.status, length: res.headers['content-length'], contentRange: res.headers['content-range'], etag: res.headers.etag, accept: res.headers['accept-ranges'] }).toEqual({
          range,
          status: 206,
          length: String(end - start + 1),
          contentRange: `bytes ${start}-${end}/${size}`,
          etag: `"${blob}"`,
          accept: 'bytes',
        });
        expect({ range, same: res.body.equals(bytes.subarray(start, end + 1)) }).toEqual({ range, same: true });
      }
    });

    it('416 invalid_request with Content-Range for a range past the end; the whole content for several ranges, a bad Range or a stale If-Range', async () => {
      for (const range of [`bytes=${png.length}-`, `bytes=${png.length + 5}-${png.length + 9}`, 'bytes=-0']) {
        const res = await raw(t, 'GET', `/blobs/${hash}`, { key: admin.key, headers: { Range: range } });
        expect({ range, status: res.status, contentRange: res.headers['content-range'], code: JSON.parse(res.body.toString()).error.code }).toEqual({
          range,
          status: 416,
          contentRange: `bytes */${png.length}`,
          code: 'invalid_request',
        });
      }
      const whole: Array<Record<string, string>> = [
        { Range: 'bytes=0-9,20-29' },
        { Range: 'bytes=9-0' },
        { Range: 'lines=1-2' },
        { Range: 'bytes=0-9', 'If-Range': `W/"${hash}"` },
        { Range: 'bytes=0-9', 'If-Range': '"other"' },
        { Range: 'bytes=0-9', 'If-Range': 'Sat, 28 Nov 2026 06:00:00 GMT' },
      ];
      for (const headers of whole) {
        const res = await raw(t, 'GET', `/blobs/${hash}`, { key: admin.key, headers });
        expect({ headers, status: res.status, contentRange: res.headers['content-range'], same: res.body.equals(png) }).toEqual({ headers, status: 200, contentRange: undefined, same: true });
      }
      const resumed = await raw(t, 'GET', `/blobs/${hash}`, { key: admin.key, headers: { Range: 'bytes=10-19', 'If-Range': `"${hash}"` } });
      expect([resumed.status, resumed.body.equals(png.subarray(10, 20))]).toEqual([206, true]);
      // If-None-Match is decided first: a current copy is 304 whatever the range.
      const current = await raw(t, 'GET', `/blobs/${hash}`, { key: admin.key, headers: { Range: `bytes=${png.length}-`, 'If-None-Match': `"${hash}"` } });
      expect([current.status, current.body.length]).toEqual([304, 0]);
      const head = await raw(t, 'HEAD', `/blobs/${hash}`, { key: admin.key, headers: { Range: 'bytes=0-9' } });
      expect([head.status, head.headers['content-length'], head.headers['accept-ranges']]).toEqual([200, String(png.length), 'bytes']);
    });

    it('stores one copy when the same new bytes are uploaded concurrently', async () => {
      const bytes = randomBytes(300 * 1024);
      const results = await Promise.all(Array.from({ length: 6 }, () => raw(t, 'POST', '/blobs', { key: admin.key, body: bytes })));
      expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 201]);
      const records = results.map((r) => JSON.parse(r.body.toString()));
      for (const r of records) expect(r).toEqual(records[0]);
      await expectStoredOnce(admin.tenantId, sha256(bytes), bytes);
      if (storage === 'postgres') expect(await chunkRows(admin.tenantId, sha256(bytes))).toBe(1);
      expect(await stagingFiles()).toEqual([]);
    });

    it('removes, now and then, the staging files of uploads that died with a process, and only those', async () => {
      const staging = join(blobDir, '.staging');
      await mkdir(staging, { recursive: true });
      const [dead, live] = [join(staging, 'died-with-its-process'), join(staging, 'still-being-written')];
      await writeFile(dead, randomBytes(1024));
      await writeFile(live, randomBytes(1024));
      const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
      await utimes(dead, twoHoursAgo, twoHoursAgo);
      expect(await t.app.get(StagingJanitor).sweep()).toBe(1);
      expect(await stagingFiles()).toEqual(['still-being-written']);
      await rm(live);
    });

    it('cleans up after a client that disconnects mid-upload', async () => {
      const rowsBefore = await t.sql('SELECT hash FROM blobs');
      const filesBefore = await storedFiles();
      const req = http.request(new URL('/blobs', t.url), { method: 'POST', headers: bearer(admin.key), agent: false });
      req.on('error', () => undefined);
      req.write(randomBytes(200 * 1024));
      await waitFor(async () => (await stagingFiles()).length > 0, 'the upload to be staged');
      req.destroy();
      await waitFor(async () => (await stagingFiles()).length === 0, 'the staging file to be removed');
      expect(await t.sql('SELECT hash FROM blobs')).toEqual(rowsBefore);
      expect(await storedFiles()).toEqual(filesBefore);
      await upload(admin.key, randomBytes(10)).expect(201); // and the service carries on
    });
  });

  describe('errors', () => {
    const unknown = sha256('never uploaded');

    it('503 service_unavailable with Retry-After when the store cannot take an upload (here its staging place is a file), and uploads again once it can', async () => {
      const staging = join(blobDir, '.staging');
      await rm(staging, { recursive: true, force: true });
      await writeFile(staging, 'not a directory');
      try {
        const refused = await upload(admin.key, Buffer.from('while the store is broken'));
        expectError(refused, 503, 'service_unavailable');
        expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
        expect(await metadataRows(sha256('while the store is broken'))).toEqual([]);
      } finally {
        await rm(staging, { force: true });
      }
      expect((await upload(admin.key, Buffer.from('while the store is broken'))).status).toBe(201);
    });

    it('404 blob_not_found for an unknown hash', async () => {
      expectError(await t.http.get(`/blobs/${unknown}`).set(bearer(admin.key)), 404, 'blob_not_found');
      expectError(await t.http.get(`/blobs/${unknown}/metadata`).set(bearer(admin.key)), 404, 'blob_not_found');
      expect((await raw(t, 'HEAD', `/blobs/${unknown}`, { key: admin.key })).status).toBe(404);
    });

    it.each([
      ['not hex', 'zz'],
      ['too short', 'ab'.repeat(31)],
      ['upper case', 'AB'.repeat(32)],
      ['another algorithm', `md5:${'ab'.repeat(32)}`],
      ['too long', 'ab'.repeat(33)],
    ])('400 invalid_id for a malformed hash (%s)', async (_, bad) => {
      // details.field names the path parameter, as for every malformed id.
      expect(expectError(await t.http.get(`/blobs/${bad}`).set(bearer(admin.key)), 400, 'invalid_id').details).toEqual({ field: 'hash' });
      expect(expectError(await t.http.get(`/blobs/${bad}/metadata`).set(bearer(admin.key)), 400, 'invalid_id').details).toEqual({ field: 'hash' });
      expect((await raw(t, 'HEAD', `/blobs/${bad}`, { key: admin.key })).status).toBe(400);
    });

    it('503 service_unavailable, named, when the store lost the content behind a record; uploading the same bytes again restores it', async () => {
      const bytes = randomBytes(2000);
      const hash = sha256(bytes);
      await upload(admin.key, bytes).expect(201);
      // Lost from the store (a deleted file, a store restored from an older backup), its record kept.
      if (storage === 'disk') await rm(join(blobDir, admin.tenantId, hash.slice(0, 2), hash));
      else await t.sql('DELETE FROM blob_chunks WHERE tenant_id = $1 AND hash = $2', [admin.tenantId, hash]);

      const missing = await t.http.get(`/blobs/${hash}`).set(bearer(admin.key));
      const error = expectError(missing, 503, 'service_unavailable');
      expect(error.message).toBe('The content of this blob is missing from the store; uploading the same bytes again restores it');
      expect(error.details).toEqual({ hash });
      expect(missing.headers['retry-after']).toBeDefined();
      // HEAD answers as GET would; the record itself is still there.
      const head = await raw(t, 'HEAD', `/blobs/${hash}`, { key: admin.key });
      expect([head.status, head.body.length]).toEqual([503, 0]);
      await t.http.get(`/blobs/${hash}/metadata`).set(bearer(admin.key)).expect(200);

      await upload(admin.key, bytes).expect(200);
      await expectStoredOnce(admin.tenantId, hash, bytes);
      expect((await raw(t, 'GET', `/blobs/${hash}`, { key: admin.key })).body.equals(bytes)).toBe(true);
      expect((await raw(t, 'HEAD', `/blobs/${hash}`, { key: admin.key })).status).toBe(200);
    });

    it('401 without a valid credential', async () => {
      expectError(await t.http.post('/blobs').set('Content-Type', 'text/plain').send('hello'), 401, 'unauthorized');
      expectError(await t.http.get(`/blobs/${unknown}`), 401, 'unauthorized');
      expectError(await t.http.get(`/blobs/${unknown}/metadata`).set(bearer('svc_k1_nope')), 401, 'unauthorized');
    });
  });

  describe('permissions and tenants', () => {
    const shared = randomBytes(2048);
    const hash = sha256(shared);

    beforeAll(async () => {
      await upload(admin.key, shared, 'image/jpeg').expect(201);
    });

    it('403 forbidden for a member without write on any type; reading still works', async () => {
      const reader = await createKey(t, admin.key, { role: 'member', type_permissions: { '*': 'read' } });
      const nobody = await createKey(t, admin.key, { role: 'member' });
      for (const k of [reader.key, nobody.key]) {
        expectError(await upload(k, randomBytes(10)), 403, 'forbidden');
        // A large refused upload is not read through, yet the answer still arrives.
        rawError(await raw(t, 'POST', '/blobs', { key: k, body: generated(3 * MiB) }), 403, 'forbidden');
        await t.http.get(`/blobs/${hash}/metadata`).set(bearer(k)).expect(200);
        const got = await raw(t, 'GET', `/blobs/${hash}`, { key: k });
        expect(got.body.equals(shared)).toBe(true);
      }
    });

    it('a member with write on some type can upload', async () => {
      const writer = await createKey(t, admin.key, { role: 'member', type_permissions: { 'core.note': 'write' } });
      const bytes = randomBytes(64);
      const res = await upload(writer.key, bytes).expect(201);
      expect(res.body.hash).toBe(sha256(bytes));
      await upload(writer.key, shared).expect(200); // the tenant's copy, de-duplicated across keys
    });

    it('hides a blob from another tenant, which stores its own copy of the same bytes', async () => {
      const other = await createTenant(t, admin.key, 'blob-tenant-b');
      expectError(await t.http.get(`/blobs/${hash}`).set(bearer(other.key)), 404, 'blob_not_found');
      expectError(await t.http.get(`/blobs/${hash}/metadata`).set(bearer(other.key)), 404, 'blob_not_found');
      expect((await raw(t, 'HEAD', `/blobs/${hash}`, { key: other.key })).status).toBe(404);

      const res = await upload(other.key, shared, 'application/octet-stream').expect(201);
      expect(res.body).toMatchObject({ hash, size: shared.length, content_type: 'application/octet-stream' });
      expect((await metadataRows(hash)).map((r) => r.tenant_id).sort()).toEqual([admin.tenantId, other.tenantId].sort());
      await expectStoredOnce(admin.tenantId, hash, shared);
      await expectStoredOnce(other.tenantId, hash, shared);
      const got = await raw(t, 'GET', `/blobs/${hash}`, { key: other.key });
      expect(got.body.equals(shared)).toBe(true);
      expect(got.headers['content-type']).toBe('application/octet-stream');
      // The first tenant's record is untouched.
      const mine = await t.http.get(`/blobs/${hash}/metadata`).set(bearer(admin.key)).expect(200);
      expect(mine.body.content_type).toBe('image/jpeg');
    });
  });

  describe('findMissing (used by items for sha256: references)', () => {
    it('returns the references the tenant has no blob for, as given', async () => {
      const bytes = randomBytes(32);
      await upload(admin.key, bytes).expect(201);
      const have = sha256(bytes);
      const lack = sha256('absent');
      const blobs = t.app.get(BlobsService);
      expect(await blobs.findMissing(admin.tenantId, [])).toEqual([]);
      expect(await blobs.findMissing(admin.tenantId, [`sha256:${have}`, have])).toEqual([]);
      expect(await blobs.findMissing(admin.tenantId, [`sha256:${have}`, `sha256:${lack}`, `sha256:${lack}`, 'sha256:bogus'])).toEqual([
        `sha256:${lack}`,
        'sha256:bogus',
      ]);
      const other = await createTenant(t, admin.key, 'find-missing-b');
      expect(await blobs.findMissing(other.tenantId, [`sha256:${have}`])).toEqual([`sha256:${have}`]);
    });
  });

  describe(`with BLOB_MAX_BYTES=1024`, () => {
    let small: TestApp;
    let smallDir: string;
    let key: string;

    beforeAll(async () => {
      smallDir = await mkdtemp(join(tmpdir(), `svc-blobs-small-${storage}-`));
      small = await startApp({ BLOB_STORAGE: storage, BLOB_DIR: smallDir, BLOB_MAX_BYTES: '1024' });
      key = (await bootstrapAdmin(small)).key;
    });
    afterAll(async () => {
      await small.close();
      await rm(smallDir, { recursive: true, force: true });
    });

    async function expectNothingStored(): Promise<void> {
      expect(await filesUnder(smallDir)).toEqual([]);
      expect(await small.sql('SELECT 1 FROM blobs')).toEqual([]);
      expect(await small.sql('SELECT 1 FROM blob_chunks')).toEqual([]);
    }

    it('accepts exactly the limit', async () => {
      const bytes = randomBytes(1024);
      const res = await raw(small, 'POST', '/blobs', { key, body: bytes });
      expect(res.status).toBe(201);
      await small.sql('DELETE FROM blobs');
      await small.sql('DELETE FROM blob_chunks');
      await rm(smallDir, { recursive: true, force: true });
    });

    it('413 blob_too_large when Content-Length is over the limit', async () => {
      const res = await raw(small, 'POST', '/blobs', { key, body: randomBytes(1025) });
      const error = rawError(res, 413, 'blob_too_large');
      expect(error.details).toEqual({ max_bytes: 1024 });
      expect(res.headers.connection).toBe('close');
      await expectNothingStored();
    });

    it('413 blob_too_large when a chunked upload passes the limit mid-stream, leaving nothing behind', async () => {
      const res = await raw(small, 'POST', '/blobs', { key, body: generated(5 * MiB) });
      rawError(res, 413, 'blob_too_large');
      expect(res.headers.connection).toBe('close');
      await expectNothingStored();
    });

    it('413 blob_too_large when an encoded body decodes past the limit, however small it was sent', async () => {
      const bomb = gzipSync(Buffer.alloc(512 * 1024));
      expect(bomb.length).toBeLessThan(1024);
      const res = await raw(small, 'POST', '/blobs', { key, body: bomb, headers: { 'Content-Encoding': 'gzip' } });
      rawError(res, 413, 'blob_too_large');
      await expectNothingStored();
      // And exactly the limit, decoded, is taken though it is sent shorter.
      expect((await raw(small, 'POST', '/blobs', { key, body: gzipSync(Buffer.alloc(1024, 1)), headers: { 'Content-Encoding': 'gzip' } })).status).toBe(201);
      await small.sql('DELETE FROM blobs');
      await small.sql('DELETE FROM blob_chunks');
      await rm(smallDir, { recursive: true, force: true });
    });

    it('413 blob_too_large when an encoded body is sent past the limit, however little it decodes to', async () => {
      // Empty gzip members (20 bytes each) decode to nothing: the body grows, the content does not.
      const emptyMembers = (count: number): Buffer => Buffer.concat([...Array<Buffer>(count).fill(gzipSync(Buffer.alloc(0))), gzipSync('hello')]);
      const declared = emptyMembers(100);
      expect(declared.length).toBeGreaterThan(1024);
      const res = await raw(small, 'POST', '/blobs', { key, body: declared, headers: { 'Content-Encoding': 'gzip' } });
      expect(rawError(res, 413, 'blob_too_large').details).toEqual({ max_bytes: 1024 });
      expect(res.headers.connection).toBe('close');
      const big = emptyMembers(262_144); // 5 MiB sent, chunked, for 5 bytes of content
      const pieces = Array.from({ length: Math.ceil(big.length / (64 * 1024)) }, (_, i) => big.subarray(i * 64 * 1024, (i + 1) * 64 * 1024));
      const chunked = await raw(small, 'POST', '/blobs', { key, body: Readable.from(pieces), headers: { 'Content-Encoding': 'gzip' } });
      rawError(chunked, 413, 'blob_too_large');
      expect(chunked.headers.connection).toBe('close');
      await expectNothingStored();
      // Under the limit as sent, the same kind of body is taken, with or without Content-Length.
      const fine = emptyMembers(40);
      expect((await raw(small, 'POST', '/blobs', { key, body: fine, headers: { 'Content-Encoding': 'gzip' } })).status).toBe(201);
      const again = await raw(small, 'POST', '/blobs', { key, body: Readable.from([fine]), headers: { 'Content-Encoding': 'gzip' } });
      expect([again.status, JSON.parse(again.body.toString('utf8')).size]).toEqual([200, 5]);
      await small.sql('DELETE FROM blobs');
      await small.sql('DELETE FROM blob_chunks');
      await rm(smallDir, { recursive: true, force: true });
    });

    it('413 reaches the client reliably while it is still uploading', async () => {
      for (let i = 0; i < 10; i++) {
        rawError(await raw(small, 'POST', '/blobs', { key, body: generated(2 * MiB, i) }), 413, 'blob_too_large');
      }
      await expectNothingStored();
    });
  });

  it('documents every blob route in /openapi.json', async () => {
    const doc = (await t.http.get('/openapi.json').expect(200)).body;
    expect(Object.keys(doc.paths['/blobs'])).toContain('post');
    expect(Object.keys(doc.paths['/blobs/{hash}']).sort()).toEqual(expect.arrayContaining(['get', 'head']));
    expect(Object.keys(doc.paths['/blobs/{hash}/metadata'])).toContain('get');
    expect(Object.keys(doc.paths['/blobs'].post.responses)).toEqual(expect.arrayContaining(['200', '201', '403', '413']));
  });
});
