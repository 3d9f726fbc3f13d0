/**
 * Browser-facing protections in the headers: every response says `X-Content-Type-Options:
 * nosniff` and `Referrer-Policy: no-referrer` (the provider's own answers and the HTML pages
 * included), `/docs` is never framed, and an answer that shows a secret once is `no-store`.
 */
import type { Response } from 'supertest';
import { bearer, startApp, TestApp } from './support/app';

describe('security headers', () => {
  let t: TestApp;
  let admin: string;
  let bootstrap: Response;

  beforeAll(async () => {
    t = await startApp({ BLOB_STORAGE: 'postgres' });
    bootstrap = await t.http.post('/keys').send({ label: 'root admin' }).expect(201);
    admin = bootstrap.body.key;
  });
  afterAll(() => t.close());

  const expectEveryResponseHeaders = (res: Response, what: string) => {
    expect({ what, nosniff: res.headers['x-content-type-options'], referrer: res.headers['referrer-policy'] }).toEqual({
      what,
      nosniff: 'nosniff',
      referrer: 'no-referrer',
    });
  };

  it('sends nosniff and no-referrer on every kind of response: API, errors, reference, pages, the provider\'s own', async () => {
    const answers: Array<[string, Response, number]> = [
      ['GET /health', await t.http.get('/health'), 200],
      ['GET /keys', await t.http.get('/keys').set(bearer(admin)), 200],
      ['GET /keys unauthenticated', await t.http.get('/keys'), 401],
      ['GET an unknown path', await t.http.get('/nowhere'), 404],
      ['GET a URL that is not validly percent-encoded', await t.http.get('/keys/%zz'), 400],
      ['GET /openapi.json', await t.http.get('/openapi.json'), 200],
      ['GET /docs', await t.http.get('/docs'), 200],
      ['GET /docs/swagger-ui.css', await t.http.get('/docs/swagger-ui.css'), 200],
      ['GET /auth/device (a page)', await t.http.get('/auth/device'), 200],
      ['GET /auth/sign-in (a page)', await t.http.get('/auth/sign-in?uid=unknown'), 400],
      ['GET /.well-known/openid-configuration (provider)', await t.http.get('/.well-known/openid-configuration'), 200],
      ['GET /auth/jwks (provider)', await t.http.get('/auth/jwks'), 200],
      ['GET /auth/authorize, unknown client (provider\'s HTML error)', await t.http.get('/auth/authorize?client_id=nope&response_type=code&scope=openid'), 400],
      ['POST /auth/token, bad grant (provider)', await t.http.post('/auth/token').type('form').send({ grant_type: 'nope' }), 400],
    ];
    for (const [what, res, status] of answers) {
      expect({ what, status: res.status }).toEqual({ what, status });
      expectEveryResponseHeaders(res, what);
    }
  });

  it('keeps the blob download\'s own nosniff and sandbox policy, each sent once', async () => {
    const upload = await t.http.post('/blobs').set(bearer(admin)).set('Content-Type', 'text/html').send('<script>alert(1)</script>').expect(201);
    const download = await t.http.get(`/blobs/${upload.body.hash}`).set(bearer(admin)).expect(200);
    // A header sent twice would arrive joined ("nosniff, nosniff").
    expectEveryResponseHeaders(download, 'GET /blobs/{hash}');
    expect(download.headers['content-security-policy']).toBe("default-src 'none'; sandbox");
    // Its own caching too: content-addressed bytes may be kept, privately.
    expect(download.headers['cache-control']).toBe('private, max-age=31536000, immutable');
  });

  it('keeps no answer to a credential in any cache (no-store), and leaves public answers alone', async () => {
    const member = (await t.http.post('/keys').set(bearer(admin)).send({ label: 'member', role: 'member' }).expect(201)).body.key;
    const answers: Array<[string, Response]> = [
      ['GET /keys', await t.http.get('/keys').set(bearer(admin)).expect(200)],
      ['GET /items', await t.http.get('/items').set(bearer(member)).expect(200)],
      ['GET /audit', await t.http.get('/audit').set(bearer(admin)).expect(200)],
      ['GET /keys, forbidden', await t.http.get('/keys').set(bearer(member)).expect(403)],
      ['GET /items, a bad key', await t.http.get('/items').set(bearer('svc_k1_nope')).expect(401)],
      ['HEAD /types', await t.http.head('/types').set(bearer(member)).expect(200)],
    ];
    for (const [what, res] of answers) expect([what, res.headers['cache-control']]).toEqual([what, 'no-store']);
    expect((await t.http.get('/health').expect(200)).headers['cache-control']).toBeUndefined();
  });

  it('keeps /docs from being framed, with a policy that leaves Swagger UI\'s scripts and styles be', async () => {
    const res = await t.http.get('/docs').expect(200);
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['content-security-policy']).toBe("frame-ancestors 'none'");
  });

  it('answers every response that shows a secret once with Cache-Control: no-store', async () => {
    const key = (body: Record<string, unknown>, idempotencyKey: string) =>
      t.http.post('/keys').set(bearer(admin)).set('Idempotency-Key', idempotencyKey).send(body).expect(201);
    const client = await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'importer', grant_types: ['client_credentials'] }).expect(201);
    const webhook = await t.http.post('/webhooks').set(bearer(admin)).send({ url: 'https://93.184.216.34/hooks', events: ['*'] }).expect(201);
    const answers: Array<[string, Response, string]> = [
      ['POST /keys (bootstrap)', bootstrap, 'key'],
      ['POST /keys', await key({ label: 'member' }, 'security-headers-1'), 'key'],
      ['POST /keys (replayed)', await key({ label: 'member' }, 'security-headers-1'), 'key'],
      ['POST /tenants', await t.http.post('/tenants').set(bearer(admin)).send({ name: 'other' }).expect(201), 'admin_key'],
      ['POST /webhooks', webhook, 'secret'],
      ['POST /webhooks/{id}/secret', await t.http.post(`/webhooks/${webhook.body.id}/secret`).set(bearer(admin)).send({}).expect(200), 'secret'],
      ['POST /auth/clients', client, 'client_secret'],
      ['POST /auth/clients/{client_id}/secret', await t.http.post(`/auth/clients/${client.body.client_id}/secret`).set(bearer(admin)).expect(200), 'client_secret'],
    ];
    for (const [what, res, secret] of answers) {
      expect(res.body).toHaveProperty(secret);
      expect({ what, cacheControl: res.headers['cache-control'] }).toEqual({ what, cacheControl: 'no-store' });
    }
  });

  it('documents no-store on those responses in /openapi.json, and only there', async () => {
    const doc = (await t.http.get('/openapi.json').expect(200)).body;
    expect(doc.components.headers['Cache-Control'].schema).toEqual({ type: 'string', enum: ['no-store'] });
    const noStore: string[] = [];
    for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<Record<string, any>>(item)) {
        expect(op).not.toHaveProperty('x-no-store');
        for (const [status, response] of Object.entries<Record<string, any>>(op.responses ?? {})) {
          if (response.headers?.['Cache-Control']?.$ref === '#/components/headers/Cache-Control') noStore.push(`${method.toUpperCase()} ${path} ${status}`);
        }
      }
    }
    // The secrets shown once, and what the provider, userinfo and the connector's redirects send no-store themselves.
    const theirs = [
      'POST /auth/oauth2/token 200', 'POST /auth/token 200', 'POST /auth/device/token 200', 'POST /auth/oauth2/introspect 200', 'POST /auth/oauth2/register 201',
      'GET /auth/oauth2/register/{client_id} 200', 'HEAD /auth/oauth2/register/{client_id} 200', 'GET /oauth/start 302', 'HEAD /oauth/start 302', 'GET /oauth/callback/{provider} 302',
      ...['GET /auth/userinfo', 'HEAD /auth/userinfo', 'GET /auth/oauth2/userinfo', 'HEAD /auth/oauth2/userinfo', 'POST /auth/oauth2/userinfo'].flatMap((op) => ['200', '401', '403'].map((status) => `${op} ${status}`)),
    ];
    expect(noStore.sort()).toEqual(
      ['POST /auth/clients 201', 'POST /auth/clients/{client_id}/secret 200', 'POST /keys 201', 'POST /tenants 201', 'POST /webhooks 201', 'POST /webhooks/{id}/secret 200', ...theirs].sort(),
    );
  });
});
