/** SPEC 5.1: every request but health, docs and bootstrap needs `Authorization: Bearer <token>`. */
import { randomBytes } from 'node:crypto';
import { bearer, bootstrapAdmin, createKey, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';
import { rawRequest } from './support/raw-http';

describe('bearer authentication', () => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t.close());

  it('accepts a valid API key, with the scheme in any case and one or more spaces after it (RFC 6750 2.1)', async () => {
    await t.http.get('/keys').set(bearer(admin)).expect(200);
    await t.http.get('/keys').set('Authorization', `bearer ${admin}`).expect(200);
    await t.http.get('/keys').set('Authorization', `Bearer   ${admin}`).expect(200);
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['scheme only', 'Bearer'],
    ['scheme and blank', 'Bearer '],
    ['three parts', 'Bearer svc_k1_a b'],
    ['unknown API key', `Bearer svc_k1_${randomBytes(32).toString('base64url')}`],
    ['unknown prefix', `Bearer sk_live_${randomBytes(16).toString('hex')}`],
    ['refresh-token kind', `Bearer svc_rt_${randomBytes(16).toString('hex')}`],
    ['unknown OAuth access token', `Bearer svc_at_${randomBytes(16).toString('hex')}`],
  ])('%s → 401 unauthorized', async (_, authorization) => {
    const req = t.http.get('/keys');
    if (authorization !== undefined) req.set('Authorization', authorization);
    const res = await req;
    expectError(res, 401, 'unauthorized');
    // RFC 6750 3: the challenge, with invalid_token only when a bearer token was presented.
    const presented = /^Bearer\s+\S/i.test(authorization ?? '');
    expect(res.headers['www-authenticate']).toMatch(presented ? /^Bearer realm="svc", error="invalid_token"/ : /^Bearer realm="svc"$/);
  });

  it('an Authorization header sent twice is unauthorized, whichever copy holds a good key', async () => {
    for (const [first, second] of [[admin, 'svc_k1_bogus'], ['svc_k1_bogus', admin], [admin, admin]]) {
      const res = await rawRequest(t.url, `GET /keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${first}\r\nauthorization: Bearer ${second}\r\nConnection: close\r\n\r\n`);
      expect([res.status, JSON.parse(res.body).error.code]).toEqual([401, 'unauthorized']);
    }
  });

  it('so are userinfo and the provider\'s endpoints: two Authorization headers are no credential', async () => {
    const twice = (request: string, body = '') =>
      rawRequest(t.url, `${request} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ${Buffer.from('a:b').toString('base64')}\r\nAuthorization: Bearer ${admin}\r\n` +
        `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    const userinfo = await twice('GET /auth/oauth2/userinfo');
    expect(userinfo.status).toBe(401);
    for (const path of ['/auth/oauth2/token', '/auth/oauth2/introspect', '/auth/oauth2/revoke']) {
      const res = await twice(`POST ${path}`, 'grant_type=client_credentials&token=x');
      expect([res.status, JSON.parse(res.body).error]).toEqual([400, 'invalid_request']);
    }
  });

  it('the plaintext key with one character changed is unauthorized', async () => {
    const last = admin.slice(-1) === 'A' ? 'B' : 'A';
    expectError(await t.http.get('/keys').set(bearer(admin.slice(0, -1) + last)), 401, 'unauthorized');
  });

  it('a revoked key is unauthorized on its very next request', async () => {
    const key = await createKey(t, admin, { label: 'short-lived', role: 'admin' });
    await t.http.get('/keys').set(bearer(key.key)).expect(200); // now cached in process
    await t.http.delete(`/keys/${key.id}`).set(bearer(admin)).expect(200);
    expectError(await t.http.get('/keys').set(bearer(key.key)), 401, 'unauthorized');
    expectError(await t.http.post('/keys').set(bearer(key.key)).send({}), 401, 'unauthorized');
  });

  it('only the Authorization header carries a token: never the query string or the body', async () => {
    const keyId = (await t.http.get('/keys').set(bearer(admin))).body.keys[0].id;
    // Without a header, a token in the query is not a credential.
    expectError(await t.http.get(`/keys/${keyId}`).query({ access_token: admin }), 401, 'unauthorized');
    // Nor next to a header of another scheme.
    expectError(await t.http.get(`/keys/${keyId}`).set('Authorization', 'Basic eDp5').query({ access_token: admin }), 401, 'unauthorized');
    expectError(
      await t.http.patch(`/keys/${keyId}`).set('Authorization', 'Basic eDp5').send({ label: 'x', access_token: admin }),
      401,
      'unauthorized',
    );
    // And a body field that happens to be called access_token does not void a valid header:
    // the request reaches validation (which refuses the unknown field) instead of a 401.
    const res = await t.http.patch(`/keys/${keyId}`).set(bearer(admin)).send({ label: 'x', access_token: 'something' });
    expectError(res, 400, 'validation_error');
  });

  it('public routes need no token, and ignore a bad one', async () => {
    await t.http.get('/health').expect(200);
    await t.http.get('/health').set(bearer('svc_k1_not-a-key')).expect(200);
    await t.http.get('/openapi.json').expect(200);
  });
});
