/** The error envelope (SPEC 2.9, part 7) for failures outside any one resource's rules. */
import { bearer, bootstrapAdmin, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';
import { rawRequest } from './support/raw-http';

describe('error envelope', () => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    t = await startApp({ JSON_BODY_LIMIT: '1kb' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t.close());

  it('unknown routes are 404 not_found, with or without credentials, for any method', async () => {
    expectError(await t.http.get('/no-such-route'), 404, 'not_found');
    expectError(await t.http.get('/no-such-route/deeper').set(bearer(admin)), 404, 'not_found');
    expectError(await t.http.post('/no-such-route').send({ a: 1 }), 404, 'not_found');
    expectError(await t.http.put('/keys').set(bearer(admin)).send({}), 404, 'not_found');
  });

  it('a route 404 names the method and path it found no route for, without the query', async () => {
    const res = await t.http.delete('/itemz/abc?api_key=hunter2').set(bearer(admin));
    expectError(res, 404, 'not_found');
    expect(res.body.error.details).toEqual({ method: 'DELETE', path: '/itemz/abc' });
  });

  it('malformed JSON is 400 invalid_request and still carries a request id', async () => {
    const res = await t.http.post('/keys').set(bearer(admin)).set('Content-Type', 'application/json').send('{"label": ');
    expectError(res, 400, 'invalid_request');
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
  });

  it('a refused body from a caller without credentials is 401: credentials are checked first', async () => {
    expectError(await t.http.post('/tenants').set('Content-Type', 'application/json').send('{"name": '), 401, 'unauthorized');
    expectError(await t.http.post('/tenants').send({ name: 'x'.repeat(4096) }), 401, 'unauthorized');
  });

  it('a body that is not JSON is 415 invalid_request', async () => {
    const res = await t.http.post('/keys').set(bearer(admin)).set('Content-Type', 'text/plain').send('label=x');
    expectError(res, 415, 'invalid_request');
    const form = await t.http.patch(`/keys/${(await t.http.get('/keys').set(bearer(admin))).body.keys[0].id}`)
      .set(bearer(admin)).type('form').send({ label: 'x' });
    expectError(form, 415, 'invalid_request');
    const malformed = await t.http.post('/keys').set(bearer(admin)).set('Content-Type', 'not a media type').send('{}');
    expectError(malformed, 415, 'invalid_request');
  });

  it('a PATCH sent as a JSON Patch (RFC 6902) is 415 with Accept-Patch (RFC 5789 2.2); a merge patch is taken as JSON', async () => {
    const id = (await t.http.get('/keys').set(bearer(admin))).body.keys[0].id;
    const patch = await t.http.patch(`/keys/${id}`).set(bearer(admin)).set('Content-Type', 'application/json-patch+json').send(JSON.stringify([{ op: 'replace', path: '/label', value: 'x' }]));
    expectError(patch, 415, 'invalid_request');
    expect(patch.headers['accept-patch']).toBe('application/json, application/merge-patch+json');
    const merge = await t.http.patch(`/keys/${id}`).set(bearer(admin)).set('Content-Type', 'application/merge-patch+json').send(JSON.stringify({ label: 'merged' }));
    expect([merge.status, merge.body.label]).toEqual([200, 'merged']);
  });

  it('an oversized body is 413 invalid_request', async () => {
    const res = await t.http.post('/keys').set(bearer(admin)).send({ label: 'x'.repeat(4096) });
    expectError(res, 413, 'invalid_request');
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
    expect(await t.sql('SELECT 1 FROM api_keys')).toHaveLength(1); // nothing was created
  });

  it('a validation failure is 400 validation_error listing every bad field', async () => {
    const res = await t.http.post('/keys').set(bearer(admin)).send({
      role: 'boss',
      type_permissions: { 'Bad Pattern!': 'x' },
      extension_permissions: { 'acme.*': 'admin' },
      edge_permissions: ['links_to'],
      default_tier: 'gold',
      label: 42,
      source: 'has spaces',
      nickname: 'unknown field',
    });
    expect(badFields(res).sort()).toEqual(
      ['default_tier', 'edge_permissions', 'extension_permissions', 'label', 'nickname', 'role', 'source', 'type_permissions'].sort(),
    );
  });

  it('bad query parameters are 400 validation_error naming them', async () => {
    expect(badFields(await t.http.get('/keys?limit=0').set(bearer(admin)))).toEqual(['limit']);
    expect(badFields(await t.http.get('/keys?limit=abc').set(bearer(admin)))).toEqual(['limit']);
    expect(badFields(await t.http.get('/keys?limit=101').set(bearer(admin)))).toEqual(['limit']);
    expect(badFields(await t.http.get('/keys?colour=red').set(bearer(admin)))).toEqual(['colour']);
  });

  it('a path that is not validly percent-encoded is 400 invalid_request with a request id', async () => {
    const res = await t.http.get('/keys/%E0%A4%A').set(bearer(admin));
    expectError(res, 400, 'invalid_request');
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
  });

  it('a query string that is not validly percent-encoded is 400 invalid_request, as such a path is', async () => {
    // Sent as is: an HTTP client would re-encode (or drop) the bad escapes.
    const get = async (target: string) => {
      const res = await rawRequest(t.url, `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nConnection: close\r\n\r\n`);
      return { status: res.status, error: res.status === 200 ? undefined : JSON.parse(Buffer.from(res.body, 'latin1').toString('utf8')).error };
    };
    for (const query of ['limit=%E0', 'limit=%ZZ', 'lim%it=5', 'limit=5&tag=%C3']) {
      expect(await get(`/keys?${query}`)).toEqual({ status: 400, error: expect.objectContaining({ code: 'invalid_request' }) });
    }
    // A valid escape, UTF-8 included, reads as its character.
    expect(await get('/keys?caf%C3%A9=1')).toEqual({ status: 400, error: expect.objectContaining({ details: { fields: [{ field: 'café', message: expect.any(String) }] } }) });
    expect(await get('/keys?limit=%35')).toEqual({ status: 200 });
  });

  it('a route with no query parameters refuses unknown ones like the others: 400 validation_error naming them', async () => {
    const [key] = (await t.http.get('/keys').set(bearer(admin)).expect(200)).body.keys;
    expect(badFields(await t.http.get(`/keys/${key.id}?colour=red&size=2`).set(bearer(admin))).sort()).toEqual(['colour', 'size']);
    expect(badFields(await t.http.get('/health?verbose=1'))).toEqual(['verbose']);
    await t.http.get(`/keys/${key.id}`).set(bearer(admin)).expect(200);
  });

  it('routes match in any case and with a trailing slash', async () => {
    expect((await t.http.get('/KEYS/').set(bearer(admin))).status).toBe(200);
  });

  it('an invalid id in the path is 400 invalid_id', async () => {
    expectError(await t.http.get('/keys/not-an-id').set(bearer(admin)), 400, 'invalid_id');
    expectError(await t.http.get('/keys/1').set(bearer(admin)), 400, 'invalid_id');
    expectError(await t.http.patch('/keys/123e4567-e89b-12d3-a456-42661417400Z').set(bearer(admin)).send({ label: 'x' }), 400, 'invalid_id');
    expectError(await t.http.delete('/keys/%27%3B%20DROP%20TABLE').set(bearer(admin)), 400, 'invalid_id');
  });

  it('names the path parameter of a malformed id in details.field, as a malformed id in a body names its field', async () => {
    const bad = expectError(await t.http.get('/keys/not-an-id').set(bearer(admin)), 400, 'invalid_id');
    expect([bad.message, bad.details]).toEqual(['id "not-an-id" is not a valid id', { field: 'id' }]);
    const hook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: 'https://93.184.216.34/hooks', events: ['*'] }).expect(201)).body;
    const delivery = expectError(await t.http.post(`/webhooks/${hook.id}/deliveries/12345/retry`).set(bearer(admin)), 400, 'invalid_id');
    expect(delivery.details).toEqual({ field: 'delivery_id' });
  });

  it('a well-formed id that does not exist is 404 not_found', async () => {
    expectError(await t.http.get('/keys/00000000-0000-4000-8000-000000000000').set(bearer(admin)), 404, 'not_found');
  });

  it('every response carries X-Request-Id; a sane client-sent one is kept, a hostile one replaced', async () => {
    const kept = await t.http.get('/keys').set(bearer(admin)).set('X-Request-Id', 'client-req-42');
    expect(kept.headers['x-request-id']).toBe('client-req-42');
    const replaced = await t.http.get('/nope').set('X-Request-Id', 'bad id with spaces <script>');
    expect(replaced.headers['x-request-id']).toMatch(/^[A-Za-z0-9._-]+$/);
    const a = await t.http.get('/health');
    const b = await t.http.get('/health');
    expect(a.headers['x-request-id']).not.toBe(b.headers['x-request-id']);
  });
});
