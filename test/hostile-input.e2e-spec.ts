/**
 * The input policy (src/common/input-policy.ts) and the envelope below Nest, one regression
 * test per class of hostile input that once produced a 500 or a bare platform error: NUL
 * characters, unpaired surrogates, deep nesting, bodies that do not match their
 * Content-Encoding, requests the HTTP parser refuses, and lenient number and time parsing.
 * Each refusal leaves nothing written.
 */
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import type { Response } from 'supertest';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { bearer, bootstrapAdmin, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';
import { expectContinue, rawRequest } from './support/raw-http';
import { MAX_FIELD_ISSUES } from '../src/common/validation';

function nestedJson(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

describe('hostile input (e2e)', () => {
  let t: TestApp;
  let admin: string;
  let itemId: string;

  const post = (path: string, body: unknown) => t.http.post(path).set(bearer(admin)).send(body as object);
  const count = async (table: string) => Number((await t.sql<{ n: string }>(`SELECT count(*) AS n FROM ${table}`))[0].n);

  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
    itemId = (await post('/items', { type: 'core.note', properties: { title: 'kept' } }).expect(201)).body.id;
  });
  afterAll(() => t.close());

  describe.each([
    ['NUL', 'a\u0000b', 'NUL'],
    ['an unpaired surrogate', 'a\ud800b', 'surrogate'],
  ])('%s in a write body is 400 validation_error naming the field, and nothing is written', (_name, bad, word) => {
    it.each([
      ['/items', { type: 'core.note', properties: { title: bad } }, 'properties.title'],
      ['/items', { type: 'core.note', tags: ['ok', bad] }, 'tags.1'],
      ['/keys', { label: bad }, 'label'],
      ['/tenants', { name: bad }, 'name'],
      ['/types', { name: 'acme.thing', schema: { type: 'object', properties: { t: { type: 'string', description: bad } } } }, 'schema.properties.t.description'],
      ['/edge-types', { name: 'acme.link', description: bad }, 'description'],
      ['/edges', { type: bad, source_id: 'x', target_id: 'y' }, 'type'],
    ])('POST %s', async (path, body, field) => {
      const before = await Promise.all(['items', 'api_keys', 'tenants', 'item_types', 'edge_types', 'edges'].map(count));
      const res = await post(path, body);
      expect(badFields(res)).toEqual([field]);
      expect(res.body.error.details.fields[0].message).toContain(word);
      expect(await Promise.all(['items', 'api_keys', 'tenants', 'item_types', 'edge_types', 'edges'].map(count))).toEqual(before);
    });

    it('in an object key, PATCH bodies and metadata', async () => {
      const key = await post('/items', { type: 'core.note', properties: { [`ti${bad}tle`]: 'x' } });
      expect(badFields(key)).toEqual([`properties.${JSON.stringify(`ti${bad}tle`)}`]);
      const patch = await t.http.patch(`/items/${itemId}`).set(bearer(admin)).send({ version: 1, properties: { title: bad } });
      expect(badFields(patch)).toEqual(['properties.title']);
      const meta = await t.http.patch(`/items/${itemId}/metadata`).set(bearer(admin)).send({ add_tags: [bad] });
      expect(badFields(meta)).toEqual(['add_tags.0']);
      const item = (await t.http.get(`/items/${itemId}`).set(bearer(admin)).expect(200)).body;
      expect([item.version, item.properties.title, item.tags]).toEqual([1, 'kept', []]);
    });
  });

  it('in POST /items/bulk a bad element is that element\'s error and the others are written', async () => {
    const before = await count('items');
    const res = await post('/items/bulk', {
      mode: 'upsert',
      items: [
        { type: 'core.note', properties: { title: 'first' } },
        { type: 'core.note', properties: { title: 'nul\u0000' } },
        { type: 'core.note', properties: { ['\udc00']: 'surrogate key' } },
        { type: 'core.note', properties: { title: 'last' } },
      ],
    }).expect(200);
    expect(res.body.results.map((r: { status: string }) => r.status)).toEqual(['created', 'error', 'error', 'created']);
    expect(res.body.results[1].error).toMatchObject({ code: 'validation_error', details: { fields: [{ field: 'properties.title' }] } });
    expect(res.body.results[2].error.code).toBe('validation_error');
    expect(await count('items')).toBe(before + 2);
    // A NUL in a natural key among valid ones (the keys are locked before the elements are written).
    const keyed = await post('/items/bulk', {
      mode: 'create_only',
      items: [
        { type: 'core.note', properties: { title: 'keyed' }, source_id: 'hostile-nk-1' },
        { type: 'core.note', properties: { title: 'keyed' }, source_id: 'hostile-nk\u0000' },
        { type: 'core.note', properties: { title: 'keyed' }, source_id: 'hostile-nk-2' },
      ],
    }).expect(200);
    expect(keyed.body.results.map((r: { status: string }) => r.status)).toEqual(['created', 'error', 'created']);
    expect(keyed.body.results[1].error).toMatchObject({ code: 'validation_error', details: { fields: [{ field: 'source_id' }] } });
    // Outside the elements the body itself is checked.
    expect(badFields(await post('/items/bulk', { mode: 'upsert\u0000', items: [] }))).toEqual(['mode']);
  });

  it('%00 and unpaired surrogates in query parameters and path segments are 400 validation_error', async () => {
    const get = (path: string) => t.http.get(path).set(bearer(admin));
    expect(badFields(await get('/search?q=a%00b'))).toEqual(['q']);
    expect(badFields(await get('/items?source=a%00b'))).toEqual(['source']);
    expect(badFields(await get('/items?tags=x,%00'))).toEqual(['tags']);
    expect(badFields(await get('/types/acme.a%00b'))).toEqual(['name']);
    expect(badFields(await get('/edge-types/a%00'))).toEqual(['name']);
    expect(badFields(await get(`/items/${itemId}%00`))).toEqual(['id']);
    expect(badFields(await get('/items?a%00=1'))).toEqual(['"a\\u0000"']);
    // Invalid UTF-8 in the path is refused by the router (it cannot be decoded at all).
    expectError(await get('/types/%ED%A0%80'), 400, 'invalid_request');
  });

  it('an id quoted in a refusal is cut between characters: the message never holds half of a surrogate pair', async () => {
    // The cut falls inside the emoji: 63 (or 79) letters, then its two UTF-16 units.
    const id = `${'a'.repeat(63)}😀`;
    const wellFormed = (res: Response) => {
      const { message } = expectError(res, 400, 'invalid_id');
      expect([message, message.isWellFormed()]).toEqual([message, true]);
      // A strict JSON decoder (serde_json) refuses a lone `\ud83d` escape, and with it the envelope.
      expect(res.text).not.toMatch(/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/i);
      return message;
    };
    for (const path of ['/items/', '/webhooks/', '/keys/', '/users/', '/items/bulk_action/jobs/', '/auth/clients/']) {
      expect(wellFormed(await t.http.get(path + encodeURIComponent(id)).set(bearer(admin)))).toContain(`"${'a'.repeat(63)}"`);
    }
    expect(wellFormed(await t.http.get(`/blobs/${encodeURIComponent(`${'a'.repeat(79)}😀`)}`).set(bearer(admin)))).toContain(`"${'a'.repeat(79)}"`);
    expect(wellFormed(await post('/edges', { type: 'acme.rel', source_id: id, target_id: id }))).toContain(`source_id "${'a'.repeat(63)}"`);
    expect(wellFormed(await post('/items', { type: 'core.note', properties: {}, edges: { 'acme.rel': [id] } }))).toContain(`edges.acme.rel[0] "${'a'.repeat(63)}"`);
  });

  it('a text field\'s limit counts characters by code point: a variation selector after each letter doubles the count', async () => {
    const doubled = (n: number) => 'a\ufe0f'.repeat(n / 2);
    expect(badFields(await post('/items', { type: 'core.note', device: doubled(400) }))).toEqual(['device']);
    expect(badFields(await post('/items', { type: 'core.note', source_id: doubled(1000) }))).toEqual(['source_id']);
    expect(badFields(await post('/keys', { label: doubled(400) }))).toEqual(['label']);
    expect(badFields(await t.http.get(`/search?q=${encodeURIComponent(doubled(2000))}`).set(bearer(admin)))).toEqual(['q']);
    // At the limit, counted alike, they are taken; an emoji is one character.
    const item = (await post('/items', { type: 'core.note', device: doubled(200), source_id: '😀'.repeat(500) }).expect(201)).body;
    expect([item.device, item.source_id]).toEqual([doubled(200), '😀'.repeat(500)]);
    await post('/keys', { label: '😀'.repeat(200) }).expect(201);
    await t.http.get(`/search?q=${encodeURIComponent('😀'.repeat(1000))}`).set(bearer(admin)).expect(200);
    // Words are counted in a text within the limit, however many UTF-16 units it takes.
    expect(badFields(await t.http.get(`/search?q=${encodeURIComponent('a😀 '.repeat(300).trim())}`).set(bearer(admin)))).toEqual(['q']);
  });

  it(`nesting deeper than 64 levels is 400 validation_error, at any depth up to the body limit`, async () => {
    const send = (json: string) => t.http.post('/items').set(bearer(admin)).set('Content-Type', 'application/json').send(json);
    const ok = await send(`{"type":"core.note","properties":{"x":${nestedJson(62)}}}`);
    expect(ok.status).toBe(201);
    const before = await count('items');
    for (const depth of [63, 5000, 100_000]) {
      const res = await send(`{"type":"core.note","properties":{"x":${nestedJson(depth)}}}`);
      expect(badFields(res)[0]).toMatch(/^properties\.x(\.a)+$/);
      expect(res.body.error.details.fields[0].message).toContain('64');
    }
    const arrays = await send(`{"type":"core.note","properties":{"x":${'['.repeat(10_000)}${']'.repeat(10_000)}}}`);
    expect(badFields(arrays)).toHaveLength(1);
    expect(await count('items')).toBe(before);
    const bulk = await t.http.post('/items/bulk').set(bearer(admin)).set('Content-Type', 'application/json')
      .send(`{"mode":"upsert","items":[{"type":"core.note","properties":{"x":${nestedJson(5000)}}}]}`);
    expect(badFields(bulk)).toHaveLength(1);
  });

  it('a body that does not match its Content-Encoding is 400 invalid_request; an unknown encoding is 415', async () => {
    const json = JSON.stringify({ type: 'core.note', properties: { title: 'encoded' } });
    const before = await count('items');
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const res = await t.http.post('/items').set(bearer(admin)).set('Content-Type', 'application/json').set('Content-Encoding', encoding).send(json);
      expectError(res, 400, 'invalid_request');
      expect(res.headers['x-request-id']).toEqual(expect.any(String));
    }
    // Binary bodies through fetch: supertest would serialise a Buffer as JSON.
    const gzipped = (body: Buffer) =>
      fetch(`${t.url}/items`, { method: 'POST', body, headers: { ...bearer(admin), 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' } });
    const truncated = await gzipped(gzipSync(json).subarray(0, 20));
    expect([truncated.status, ((await truncated.json()) as { error: { code: string } }).error.code]).toEqual([400, 'invalid_request']);
    expectError(
      await t.http.post('/items').set(bearer(admin)).set('Content-Type', 'application/json').set('Content-Encoding', 'zstd').send(json),
      415,
      'invalid_request',
    );
    expect(await count('items')).toBe(before);
    expect((await gzipped(gzipSync(json))).status).toBe(201); // a correct one is read
  });

  it('a body whose bytes are not UTF-8 is 400 invalid_request, not read with U+FFFD in their place; UTF-8 ones are read as sent', async () => {
    const send = (bytes: Buffer, type = 'application/json') =>
      fetch(`${t.url}/items`, { method: 'POST', body: bytes, headers: { ...bearer(admin), 'Content-Type': type } });
    const body = (sourceId: Buffer) => Buffer.concat([Buffer.from('{"type":"core.note","source_id":"'), sourceId, Buffer.from('","properties":{"title":"bytes"}}')]);
    const before = await count('items');
    for (const bad of [Buffer.from([0xff]), Buffer.from([0xfe]), Buffer.from([0xc3]), Buffer.from([0xed, 0xa0, 0x80])]) {
      for (const type of ['application/json', 'application/json; charset=utf-8']) {
        const res = await send(body(bad), type);
        expect([res.status, ((await res.json()) as { error: { code: string } }).error.code]).toEqual([400, 'invalid_request']);
      }
    }
    // A form route (the sign-up page's) reads its body alike: refused before the form is looked at.
    const form = await fetch(`${t.url}/auth/sign-up`, {
      method: 'POST',
      body: Buffer.concat([Buffer.from('csrf=x&email=a%40b.example&password=0123456789&name='), Buffer.from([0xff])]),
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(400);
    expect(await count('items')).toBe(before);
    const ok = await send(body(Buffer.from('é😀', 'utf8')));
    expect(ok.status).toBe(201);
    expect(((await ok.json()) as { source_id: string }).source_id).toBe('é😀');
  });

  it('a body in a charset other than UTF-8 is 415 invalid_request, and nothing is written; UTF-8 named in any letter case is read', async () => {
    const send = (path: string, bytes: Buffer, type: string) => fetch(`${t.url}${path}`, { method: 'POST', body: bytes, headers: { ...bearer(admin), 'Content-Type': type } });
    // UTF-7 spells `<script>` in ASCII, which anything reading the body as UTF-8 would let by.
    const json = '{"type":"core.note","properties":{"title":"+ADw-script+AD4- caf\u00e9"}}';
    const utf32 = Buffer.concat([...json].map((c) => Buffer.from(Uint32Array.of(c.codePointAt(0)!).buffer)));
    const before = await count('items');
    for (const [charset, bytes] of [
      ['utf-16le', Buffer.from(json, 'utf16le')],
      ['utf-16', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(json, 'utf16le')])],
      ['utf-32le', utf32],
      ['utf-7', Buffer.from(json)],
      ['utf8', Buffer.from(json)],
      ['latin1', Buffer.from(json, 'latin1')],
    ] as const) {
      const res = await send('/items', bytes, `application/json; charset=${charset}`);
      expect([charset, res.status, await res.json()]).toEqual([charset, 415, { error: { code: 'invalid_request', message: expect.any(String) } }]);
    }
    // A form alike (the sign-up page's): browsers send the pages' forms as UTF-8.
    const form = await send('/auth/sign-up', Buffer.from('csrf=x&email=a%40b.example&password=0123456789&name=caf\xe9', 'latin1'), 'application/x-www-form-urlencoded; charset=iso-8859-1');
    expect(form.status).toBe(415);
    expect(await count('items')).toBe(before);
    for (const type of ['application/json; charset=UTF-8', 'application/json; charset="utf-8"']) {
      const ok = await send('/items', Buffer.from(json), type);
      expect([type, ok.status, ((await ok.json()) as { properties: { title: string } }).properties.title]).toEqual([type, 201, '+ADw-script+AD4- café']);
    }
  });

  it('a form whose %-escapes are not UTF-8 is 400 invalid_request, as such a query string is', async () => {
    for (const name of ['%FF', 'ok%C3%A9%FF', '%ED%A0%80', '%C3']) {
      const res = await fetch(`${t.url}/auth/sign-up`, {
        method: 'POST',
        body: `csrf=x&email=a%40b.example&password=0123456789&name=${name}`,
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      });
      expect([name, res.status, await res.text()]).toEqual([name, 400, expect.stringContaining('"code":"invalid_request"')]);
    }
  });

  it.each([
    ['a malformed request line', 'GARBAGE\r\n\r\n', 400],
    ['an unknown method', 'FROB /health HTTP/1.1\r\nHost: x\r\n\r\n', 400],
    ['Content-Length with Transfer-Encoding', 'POST /items HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
    ['a NUL in a header value', 'GET /health HTTP/1.1\r\nHost: x\r\nX-Test: a\u0000b\r\n\r\n', 400],
    ['headers past the size limit', `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
    ['an HTTP/1.1 request without Host', 'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n', 400],
    ['an Expect other than 100-continue', 'GET /health HTTP/1.1\r\nHost: x\r\nExpect: fancy\r\nConnection: close\r\n\r\n', 417],
    ['CONNECT', 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n', 400],
  ])('%s is answered in the envelope with a request id', async (_name, bytes, status) => {
    const res = await rawRequest(t.url, bytes);
    expect(res.status).toBe(status);
    expect(res.headers).toMatch(/^content-type: application\/json/im);
    expect(res.headers).toMatch(/^x-request-id: \S+/im);
    expect(JSON.parse(res.body)).toEqual({ error: { code: 'invalid_request', message: expect.any(String) } });
  });

  it('answers a request that asked to close the connection though bytes follow it, and reads nothing after it (RFC 9112 9.6)', async () => {
    const json = JSON.stringify({ type: 'core.note', properties: { title: 'closing' } });
    const before = await count('items');
    for (const after of ['GET /health HTTP/1.1\r\nHost: x\r\n\r\n', 'X']) {
      const res = await rawRequest(
        t.url,
        `POST /items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/json\r\nContent-Length: ${json.length}\r\nConnection: close\r\n\r\n${json}${after}`,
      );
      expect([after, res.status]).toEqual([after, 201]);
    }
    expect(await count('items')).toBe(before + 2);
    const get = await rawRequest(t.url, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(get.status).toBe(200);
  });

  it('refuses Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1), and writes nothing', async () => {
    const json = JSON.stringify({ type: 'core.note', properties: { title: 'one-oh' } });
    const before = await count('items');
    const res = await rawRequest(
      t.url,
      `POST /items HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${json.length.toString(16)}\r\n${json}\r\n0\r\n\r\n`,
    );
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'invalid_request', details: { transfer_encoding: 'chunked' } } });
    expect(await count('items')).toBe(before);
  });

  it.each(['gzip, chunked', 'identity, chunked', 'x-custom,chunked'])('Transfer-Encoding: %s is 400 invalid_request (no coding but chunked is implemented), and nothing is written', async (codings) => {
    const json = JSON.stringify({ type: 'core.note', properties: { title: 'coded' } });
    const before = await count('items');
    const res = await rawRequest(
      t.url,
      `POST /items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/json\r\n` +
        `Transfer-Encoding: ${codings}\r\nConnection: close\r\n\r\n${json.length.toString(16)}\r\n${json}\r\n0\r\n\r\n`,
    );
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toEqual({ error: { code: 'invalid_request', message: expect.any(String), details: { transfer_encoding: codings } } });
    expect(await count('items')).toBe(before);
    // Chunked alone (any case) is read.
    const chunked = await rawRequest(
      t.url,
      `POST /items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/json\r\n` +
        `Transfer-Encoding: Chunked\r\nConnection: close\r\n\r\n${json.length.toString(16)}\r\n${json}\r\n0\r\n\r\n`,
    );
    expect(chunked.status).toBe(201);
  });

  it('a request whose client half-closes right after sending it is answered as sent, and its Idempotency-Key replays', async () => {
    // Found by an audit: body-parser skipped the body once the socket had ended, so the key was
    // created with an empty label and its Idempotency-Key kept for that other request.
    const send = (label: string, idempotencyKey: string) => {
      const json = JSON.stringify({ label, role: 'member' });
      return rawRequest(
        t.url,
        `POST /keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/json\r\n` +
          `Idempotency-Key: ${idempotencyKey}\r\nContent-Length: ${json.length}\r\n\r\n${json}`,
        { halfClose: true },
      );
    };
    for (let i = 0; i < 20; i++) {
      const label = `half-closed ${i}`;
      const res = await send(label, `half-close-${i}`);
      expect([res.status, JSON.parse(res.body).label]).toEqual([201, label]);
      const [row] = await t.sql<{ label: string }>('SELECT label FROM api_keys WHERE id = $1', [JSON.parse(res.body).id]);
      expect(row.label).toBe(label);
      const retry = await send(label, `half-close-${i}`);
      expect([retry.status, JSON.parse(retry.body).id]).toEqual([201, JSON.parse(res.body).id]);
      expect(retry.headers).toMatch(/^idempotent-replayed: true/im);
    }
  });

  describe('Expect: 100-continue', () => {
    // curl asks for it before any body over 1 MB: a refusal known before the body is read is
    // the final answer, and the client never sends the body (RFC 9110 10.1.1).
    const head = (path: string, length: number, headers = '') =>
      `POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Content-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;
    const json = JSON.stringify({ type: 'core.note', properties: { title: 'continued' } });
    const auth = () => `Authorization: Bearer ${admin}\r\nContent-Type: application/json\r\n`;

    it('gets 100 once the body is to be read, then the answer', async () => {
      const res = await expectContinue(t.url, head('/items', json.length, `${auth()}Connection: close\r\n`), json);
      expect([res.continued, res.status, JSON.parse(res.body).properties]).toEqual([true, 201, { title: 'continued' }]);
      // The OAuth provider reads its form another way (iterating the request), and still gets it.
      const form = 'grant_type=client_credentials&client_id=nobody&client_secret=wrong';
      const token = await expectContinue(t.url, head('/auth/token', form.length, 'Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n'), form);
      expect([token.continued, JSON.parse(token.body).error]).toEqual([true, 'invalid_client']);
    });

    it.each([
      ['a blob without credentials', () => head('/blobs', 64 * 1024, ''), 401, 'unauthorized'],
      ['over JSON_BODY_LIMIT', () => head('/items', 2 * 1024 * 1024, auth()), 413, 'invalid_request'],
      ['a blob over BLOB_MAX_BYTES', () => head('/blobs', 64 * 1024 * 1024, `Authorization: Bearer ${admin}\r\n`), 413, 'blob_too_large'],
    ])('is refused %s without a 100, and nothing is written', async (_name, request, status, code) => {
      const before = await Promise.all(['items', 'blobs'].map(count));
      const res = await expectContinue(t.url, request(), json);
      expect([res.continued, res.status, JSON.parse(res.body).error.code]).toEqual([false, status, code]);
      // The body announced was neither sent nor read: the connection cannot carry another request.
      expect(res.headers).toMatch(/^connection: close/im);
      expect(await Promise.all(['items', 'blobs'].map(count))).toEqual(before);
    });
  });

  it('a refused HEAD request gets the envelope\'s headers but no body', async () => {
    const res = await rawRequest(t.url, `HEAD /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(res.status).toBe(431);
    expect(res.headers).toMatch(/^content-length: \d+/im);
    expect(res.body).toBe('');
  });

  it.each([
    ['/items?limit=0x10', 'limit'],
    ['/items?limit=%205', 'limit'],
    ['/items?limit=5.0', 'limit'],
    ['/items?limit=%2B5', 'limit'],
    ['/search?q=a&offset=1e3', 'offset'],
    ['/search?q=a&limit=', 'limit'],
    ['/keys?limit=1e1', 'limit'],
    ['/items?since=2024-01-01T00:00:00', 'since'],
    ['/items?until=2024-01-01', 'until'],
    ['/items?since=2024-02-30T00:00:00Z', 'since'],
    ['/items?until=2020-06-15T12:00:00-23:59', 'until'],
    ['/search?q=a&since=0001-01-01T00:00:00%2B14:00', 'since'],
    ['/types?prototype=1', 'prototype'],
    ['/items?toString=1', 'toString'],
  ])('lenient or unstorable query values are refused: %s', async (path, field) => {
    expect(badFields(await t.http.get(path).set(bearer(admin)))).toEqual([field]);
  });

  it('a body that is not a JSON object (an array, a string, a number, null) is 400 validation_error on (body)', async () => {
    const raw = (path: string, json: string) => t.http.post(path).set(bearer(admin)).set('Content-Type', 'application/json').send(json);
    for (const path of ['/items', '/items/bulk', '/items/bulk_action', '/webhooks', '/types', '/keys', '/edges']) {
      for (const json of ['[1]', '[]', '[{"type":"core.note"}]', '"x"', '3', 'null']) {
        const res = await raw(path, json);
        expectError(res, 400, 'validation_error');
        expect({ path, json, fields: res.body.error.details.fields }).toEqual({ path, json, fields: [{ field: '(body)', message: 'must be a JSON object' }] });
      }
    }
  });

  it('a GET with a large body still gets its whole answer: the body is read and dropped first', async () => {
    // Found by the fuzzer: a client that sends all of a 300 kB body before reading was reset
    // midway through /openapi.json's answer (the unread body kept coming to a closing socket).
    const body = Buffer.from(`{"a":${'['.repeat(1000)}${' '.repeat(300_000)}${']'.repeat(1000)}}`);
    const url = new URL('/openapi.json', t.url);
    const got = await new Promise<{ status: number; length: number; declared: number }>((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, method: 'GET', path: url.pathname, agent: false, headers: { ...bearer(admin), 'Content-Type': 'application/json', 'Content-Length': body.length } });
      req.on('response', (res) => {
        let length = 0;
        res.on('data', (c: Buffer) => (length += c.length));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, length, declared: Number(res.headers['content-length']) }));
        res.on('aborted', () => reject(new Error(`aborted after ${length} bytes`)));
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(got.status).toBe(200);
    expect(got.length).toBe(got.declared);
    // An event stream opened with a body (read to its end first) still streams.
    const stream = await new Promise<{ status: number; type: string }>((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, method: 'GET', path: '/events', agent: false, headers: { ...bearer(admin), 'Content-Type': 'application/json', 'Content-Length': 2 } });
      req.on('response', (res) => {
        res.once('data', () => {
          resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']) });
          req.destroy();
        });
      });
      req.on('error', reject);
      req.end('{}');
    });
    expect(stream).toEqual({ status: 200, type: expect.stringMatching(/^text\/event-stream/) });
  });

  it(`a body with thousands of bad fields gets a 400 naming the first ${MAX_FIELD_ISSUES}, not an echo several times the body's size`, async () => {
    const unknown = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, 0]));
    for (const res of [
      await post('/items/bulk_action', { action: 'update_tier', tier: 'feed', dry_run: true, ...unknown }),
      await post('/items/bulk_action', { action: 'update_tier', tier: 'feed', dry_run: true, filter: unknown }),
      await post('/items', { type: 'core.note', properties: { title: 'x' }, ...unknown }),
    ]) {
      const fields = badFields(res);
      expect(fields).toHaveLength(MAX_FIELD_ISSUES);
      expect(res.body.error.message).toContain(`${MAX_FIELD_ISSUES} of 5000`);
      expect(res.text.length).toBeLessThan(5000);
    }
  });

  it('prototype-shaped keys are refused, not silently dropped', async () => {
    const raw = (path: string, json: string) => t.http.post(path).set(bearer(admin)).set('Content-Type', 'application/json').send(json);
    expect(badFields(await raw('/tenants', '{"name":"x","toString":"y"}'))).toEqual(['toString']);
    expect(badFields(await raw('/items', '{"type":"core.note","extensions":{"__proto__":{"a":1}}}'))).toEqual(['extensions.__proto__']);
    expect(badFields(await raw('/keys', '{"type_permissions":{"prototype":"read"}}'))).toEqual(['type_permissions.prototype']);
    expect(badFields(await raw('/items', '{"type":"core.note","properties":{"constructor":"x"}}'))).toEqual(['properties.constructor']);
    // Found by the fuzzer: a nested `toString` was dropped by the validation layer, so a type was created without it.
    expect(badFields(await raw('/items', '{"type":"core.note","properties":{"title":"t","meta":{"valueOf":1}}}'))).toEqual(['properties.meta.valueOf']);
    expect(badFields(await raw('/types', '{"name":"acme.tostr","schema":{"type":"object"},"merge_policy":{"toString":1}}'))).toEqual(['merge_policy.toString']);
    expect(badFields(await raw('/edge-types', '{"name":"a.b","source_types":["*"],"target_types":["*"],"acyclic":null}'))).toEqual(['acyclic']);
    expectError(await raw('/types', '{"name":"acme.old","schema":{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}}'), 400, 'invalid_schema');
  });

  it('prototype-shaped keys in a POST /items/bulk element are that element\'s error, as POST /items would refuse them', async () => {
    const before = await count('items');
    const res = await t.http.post('/items/bulk').set(bearer(admin)).set('Content-Type', 'application/json').send(
      '{"mode":"upsert","items":[' +
        '{"type":"core.note","properties":{"title":"keep","valueOf":"v","hasOwnProperty":1,"x":{"prototype":1}},"extensions":{"acme":{"constructor":1}}},' +
        '{"type":"core.note","__proto__":{"type":"core.task"}},' +
        '{"type":"core.note","properties":{"title":"fine"}},' +
        '{"constructor":1,"type":"core.note"},[{"constructor":1}]]}',
    ).expect(200);
    expect(res.body.results.map((r: { status: string }) => r.status)).toEqual(['error', 'error', 'created', 'error', 'error']);
    expect(res.body.results.slice(3).map((r: { error: { details: { fields: Array<{ field: string }> } } }) => r.error.details.fields[0].field)).toEqual(['constructor', '(item)']);
    const first = res.body.results[0].error;
    expect(first.code).toBe('validation_error');
    expect(first.details.fields.map((f: { field: string }) => f.field).sort()).toEqual(
      ['extensions.acme.constructor', 'properties.hasOwnProperty', 'properties.valueOf', 'properties.x.prototype'],
    );
    expect(res.body.results[1].error).toMatchObject({ code: 'validation_error', details: { fields: [{ field: '__proto__', message: expect.stringContaining('reserved') }] } });
    expect(await count('items')).toBe(before + 1);
    // POST /items/bulk_action takes one free-form object, `properties`: the whole body is checked as it is parsed.
    const action = await t.http.post('/items/bulk_action').set(bearer(admin)).set('Content-Type', 'application/json')
      .send('{"action":"update_properties","filter":{"type":"core.note"},"properties":{"meta":{"toString":1}}}');
    expect(badFields(action)).toEqual(['properties.meta.toString']);
  });

  // The cancellation itself, and its 503: 'a statement past DATABASE_STATEMENT_TIMEOUT_MS' below.
  it('the request pool runs with DATABASE_STATEMENT_TIMEOUT_MS (default 30 s) as its statement_timeout', async () => {
    const [{ statement_timeout }] = await t.app.get(DataSource).query('SHOW statement_timeout');
    expect(statement_timeout).toBe('30s');
  });

  it('a schema pattern cannot stall the service: patterns run in linear time, and lookaround is refused', async () => {
    // As a JavaScript RegExp, `(a+)+$` on this value would backtrack for longer than any test (or client) waits.
    await post('/types', { name: 'acme.redos', schema: { type: 'object', properties: { a: { type: 'string', pattern: '(a+)+$' } } } }).expect(201);
    const refused = expectError(await post('/items', { type: 'acme.redos', properties: { a: `${'a'.repeat(5000)}!` } }), 400, 'invalid_properties');
    expect(refused.details?.fields.map((f: { field: string }) => f.field)).toEqual(['properties.a']);
    await post('/items', { type: 'acme.redos', properties: { a: 'aaa' } }).expect(201);
    const lookahead = await post('/types', { name: 'acme.lookahead', schema: { type: 'object', properties: { a: { type: 'string', pattern: '^(?=x)' } } } });
    expectError(lookahead, 400, 'invalid_schema');
  });

  it('strict values still work, and a body timestamp needs a zone too', async () => {
    await t.http.get('/items?limit=5&since=2024-01-01T00:00:00%2B02:00').set(bearer(admin)).expect(200);
    await t.http.get('/search?q=kept&limit=5&offset=0').set(bearer(admin)).expect(200);
    expect(badFields(await post('/items', { type: 'core.note', timestamp: '2024-01-01T00:00:00' }))).toEqual(['timestamp']);
    expect(badFields(await post('/items', { type: 'core.note', timestamp: '2020-01-01T00:00:00+16:00' }))).toEqual(['timestamp']);
    expect(badFields(await post('/items', { type: 'core.note', timestamp: '9999-12-31T23:59:59-14:00' }))).toEqual(['timestamp']);
    expect(badFields(await t.http.patch(`/items/${itemId}`).set(bearer(admin)).send({ version: 2 ** 31 }))).toEqual(['version']);
    expect(badFields(await t.http.get(`/items/${itemId}/versions?before=99999999999`).set(bearer(admin)))).toEqual(['before']);
  });

  it('a refused body or URL from a caller without credentials is still 401 first', async () => {
    expectError(await t.http.post('/items').send({ type: 'core.note', properties: { title: '\u0000' } }), 401, 'unauthorized');
    expectError(await t.http.get('/search?q=%00'), 401, 'unauthorized');
  });
});

describe('a statement past DATABASE_STATEMENT_TIMEOUT_MS', () => {
  let t: TestApp;
  let admin: string;
  let holder: Client;
  beforeAll(async () => {
    t = await startApp({ DATABASE_STATEMENT_TIMEOUT_MS: '1000' });
    admin = (await bootstrapAdmin(t)).key;
    holder = new Client({ connectionString: t.databaseUrl });
    await holder.connect();
  });
  afterAll(async () => {
    await holder?.end();
    await t?.close();
  });

  it('is cancelled by PostgreSQL and answered 503 service_unavailable with Retry-After, and the service answers again after', async () => {
    await t.http.get('/items').set(bearer(admin)).expect(200);
    // The listing waits on the lock, and the wait counts against its statement's time.
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE items IN ACCESS EXCLUSIVE MODE');
    try {
      const res = await t.http.get('/items').set(bearer(admin));
      expectError(res, 503, 'service_unavailable');
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
    } finally {
      await holder.query('ROLLBACK');
    }
    await t.http.get('/items').set(bearer(admin)).expect(200);
  });
});
