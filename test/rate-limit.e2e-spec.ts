/** SPEC 8.1: per-credential, per-path-segment rolling windows in Redis, with headers on every response. */
import Redis from 'ioredis';
import type { Response } from 'supertest';
import { bearer, bootstrapAdmin, createKey, REDIS_URL, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';
import { rawRequest } from './support/raw-http';

function expectLimitHeaders(res: Response, limit: number): { remaining: number; reset: number } {
  expect(res.headers['x-ratelimit-limit']).toBe(String(limit));
  expect(res.headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
  expect(res.headers['x-ratelimit-reset']).toMatch(/^\d+$/);
  const remaining = Number(res.headers['x-ratelimit-remaining']);
  const reset = Number(res.headers['x-ratelimit-reset']);
  expect(remaining).toBeLessThanOrEqual(limit);
  // A Unix timestamp (seconds) within the next window.
  const now = Date.now() / 1000;
  expect(reset).toBeGreaterThanOrEqual(Math.floor(now) - 5); // allows for a slow, loaded test machine
  expect(reset).toBeLessThanOrEqual(Math.ceil(now) + 61);
  return { remaining, reset };
}

function expectRateLimited(res: Response, limit: number): void {
  expectError(res, 429, 'rate_limited');
  expectLimitHeaders(res, limit);
  expect(res.headers['x-ratelimit-remaining']).toBe('0');
  expect(res.headers['retry-after']).toMatch(/^\d+$/);
  const retryAfter = Number(res.headers['retry-after']);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
}

describe('rate limits', () => {
  describe('with RATE_LIMIT_REQUESTS=5', () => {
    let t: TestApp;
    let admin: string;
    /** Creates the keys the tests need: /keys allows only 4 writes a minute per caller here. */
    let minter: string;
    beforeAll(async () => {
      t = await startApp({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '5' });
      admin = (await bootstrapAdmin(t)).key;
      minter = (await createKey(t, admin, { label: 'minter', role: 'admin' })).key;
    });
    afterAll(() => t.close());

    it('every response carries the headers: success, 401 and 404', async () => {
      // /keys is tighter than the base however low that is (SPEC 8.1): 4 writes, 8 reads here.
      expectLimitHeaders(await t.http.get('/keys').set(bearer(admin)).expect(200), 8);
      expectLimitHeaders(expectStatus(await t.http.get('/keys').set(bearer('svc_k1_nope')), 401), 8);
      expectLimitHeaders(expectStatus(await t.http.get('/keys'), 401), 8);
      expectLimitHeaders(expectStatus(await t.http.get('/no-such-route').set(bearer(admin)), 404), 10);
      expectLimitHeaders(expectStatus(await t.http.post('/keys').set(bearer(admin)).set('Content-Type', 'application/json').send('{'), 400), 4);
      expectLimitHeaders(await t.http.get('/health').expect(200), 10);
      expectLimitHeaders(await t.http.get('/openapi.json').expect(200), 10);
    });

    it('refusals before routing count and carry the headers too: a URL not validly percent-encoded, no Host', async () => {
      const k = await createKey(t, minter, { label: 'mangled' });
      const remaining: number[] = [];
      for (let i = 0; i < 10; i++) {
        const res = await t.http.get(`/keys${i}/%E0%A4%A`).set(bearer(k.key));
        expectError(res, 400, 'invalid_request');
        remaining.push(expectLimitHeaders(res, 10).remaining);
      }
      expect(remaining).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
      expectRateLimited(await t.http.get('/keys/%E0%A4%A').set(bearer(k.key)), 10);
      // They matched no route: the bucket of unknown paths, apart from the routes' own.
      expectRateLimited(await t.http.get('/no-such-path').set(bearer(k.key)), 10);
      expectLimitHeaders(await t.http.get('/keys').set(bearer(k.key)).expect(403), 8);

      const hostless = await rawRequest(t.url, `GET /health HTTP/1.1\r\nAuthorization: Bearer ${k.key}\r\nConnection: close\r\n\r\n`);
      expect(hostless.status).toBe(400);
      expect(hostless.headers).toMatch(/^x-ratelimit-limit: 10$/im);
      expect(hostless.headers).toMatch(/^x-ratelimit-remaining: 9$/im);
    });

    it('so do refusals of the HTTP parser, which come before any route or credential: as writes, in the address\'s bucket of unrouted paths', async () => {
      const host = new URL(t.url).host;
      const refusals = [
        { request: `GET /health HTTP/1.1\r\nHost: ${host}\r\nX-Big: ${'x'.repeat(70_000)}\r\n\r\n`, status: 431, limit: 5 },
        { request: `FOO /health HTTP/1.1\r\nHost: ${host}\r\n\r\n`, status: 400, limit: 5 },
        { request: `POST /items HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}`, status: 400, limit: 5 },
        { request: `GET /health HTTP/1.1\r\nHost: ${host}\r\nExpect: bogus\r\nConnection: close\r\n\r\n`, status: 417, limit: 10 },
      ];
      for (const { request, status, limit } of refusals) {
        const res = await rawRequest(t.url, request);
        expect([request.slice(0, 12), res.status]).toEqual([request.slice(0, 12), status]);
        expect(res.headers).toMatch(new RegExp(`^x-ratelimit-limit: ${limit}$`, 'im'));
        expect(res.headers).toMatch(/^x-ratelimit-remaining: \d+$/im);
        expect(res.headers).toMatch(/^x-ratelimit-reset: \d+$/im);
        expect(res.headers).toMatch(/^x-content-type-options: nosniff$/im);
      }
    });

    it('past the limit: 429 rate_limited with Retry-After; another key of the tenant is unaffected', async () => {
      const k1 = await createKey(t, minter, { label: 'k1' });
      const k2 = await createKey(t, minter, { label: 'k2' });
      // POST /tenants is a write (limit 5) that a member is refused; refused requests count too.
      const remaining: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await t.http.post('/tenants').set(bearer(k1.key)).send({ name: 'x' });
        expectError(res, 403, 'forbidden');
        remaining.push(expectLimitHeaders(res, 5).remaining);
      }
      expect(remaining).toEqual([4, 3, 2, 1, 0]);
      expectRateLimited(await t.http.post('/tenants').set(bearer(k1.key)).send({ name: 'x' }), 5);
      expectRateLimited(await t.http.post('/tenants').set(bearer(k1.key)).send({ name: 'x' }), 5);

      // Same tenant, other key: its own bucket.
      const other = await t.http.post('/tenants').set(bearer(k2.key)).send({ name: 'x' });
      expectError(other, 403, 'forbidden');
      expect(expectLimitHeaders(other, 5).remaining).toBe(4);
      // Same key, other path segment: its own bucket.
      const elsewhere = await t.http.get('/health').set(bearer(k1.key)).expect(200);
      expect(expectLimitHeaders(elsewhere, 10).remaining).toBe(9);
    });

    it('GET gets twice the write limit', async () => {
      const k = await createKey(t, minter, { label: 'reader' });
      for (let i = 0; i < 10; i++) await t.http.get('/no-such-thing').set(bearer(k.key)).expect(404);
      expectRateLimited(await t.http.get('/no-such-thing').set(bearer(k.key)), 10);
      // The write limit of the same segment is half that.
      expectLimitHeaders(await t.http.post('/no-such-thing').set(bearer(k.key)).send({}), 5);
    });

    it('unauthenticated requests share one bucket per client IP, whatever token they carry', async () => {
      const body = { name: 'guess' };
      for (let i = 0; i < 5; i++) expectError(await t.http.post('/tenants').set(bearer(`svc_k1_guess${i}`)).send(body), 401, 'unauthorized');
      expectRateLimited(await t.http.post('/tenants').send(body), 5);
      expectRateLimited(await t.http.post('/tenants').set(bearer('svc_k1_guess99')).send(body), 5);
      // A valid key from the same address has its own bucket.
      const res = await t.http.post('/tenants').set(bearer(admin)).send({ name: 'legit' }).expect(201);
      expect(expectLimitHeaders(res, 5).remaining).toBe(4);
    });

    it('the window rolls: places free as the requests in it turn a minute old, not all at once at a boundary', async () => {
      const k = await createKey(t, admin, { label: 'roller' }); // the minter's 4 key writes a minute are spent
      const write = () => t.http.post('/tenants').set(bearer(k.key)).send({ name: 'x' });
      expectError(await write(), 403, 'forbidden');
      // The bucket as if the caller had also sent two requests 59 s ago and two 10 s ago: five, its limit.
      const redis = new Redis(REDIS_URL);
      try {
        const bucket = `${t.config.REDIS_PREFIX}rlw:k:${k.id}:tenants:w`;
        expect(await redis.exists(bucket)).toBe(1);
        const [seconds, micros] = await redis.time();
        const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
        await redis.zadd(bucket, now - 58_000, 'old-1', now - 58_000, 'old-2', now - 10_000, 'recent-1', now - 10_000, 'recent-2');
      } finally {
        redis.disconnect();
      }
      const refused = await write();
      expectRateLimited(refused, 5);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(2);
      // Within about two seconds the two old ones leave: two places, not five; the next when the recent ones turn a minute old.
      let first = refused;
      for (const deadline = Date.now() + 10_000; first.status === 429 && Date.now() < deadline; ) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        first = await write();
      }
      expect(expectLimitHeaders(expectStatus(first, 403), 5).remaining).toBe(1);
      expect(expectLimitHeaders(expectStatus(await write(), 403), 5).remaining).toBe(0);
      const next = await write();
      expectRateLimited(next, 5);
      expect(Number(next.headers['retry-after'])).toBeGreaterThanOrEqual(40);
      expect(Number(next.headers['retry-after'])).toBeLessThanOrEqual(51);
    });

    it('OAuth endpoints answer 429 in the RFC 6749 form; clients authenticating with HTTP Basic count per address', async () => {
      const client = (await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'] }).expect(201)).body;
      const other = (await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'] }).expect(201)).body;
      const token = (c: { client_id: string; client_secret: string }) =>
        t.http.post('/auth/oauth2/token').auth(c.client_id, c.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' });
      for (let i = 0; i < 4; i++) expect((await token(client)).status).toBe(200);
      const refused = await token(client);
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ error: 'rate_limited', error_description: expect.any(String) });
      expect(refused.headers['retry-after']).toMatch(/^\d+$/);
      expect(refused.headers['x-ratelimit-remaining']).toBe('0');
      // The client id is not verified before the limit: another client from the same address shares the bucket.
      expect((await token(other)).body).toEqual({ error: 'rate_limited', error_description: expect.any(String) });
      const revoke = () => t.http.post('/auth/oauth2/revoke').auth(client.client_id, client.client_secret).type('form').send({ token: 'svc_at_x' });
      for (let i = 0; i < 5; i++) expect((await revoke()).status).toBe(200);
      expect((await revoke()).body).toEqual({ error: 'rate_limited', error_description: expect.any(String) });
    });
  });

  /** Each test from its own address (X-Forwarded-For, trusted here), so that the per-address buckets start empty. */
  describe('the bucket is the one of the routed path, and the address where secrets are guessed', () => {
    let t: TestApp;
    let admin: string;
    beforeAll(async () => {
      t = await startApp({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '5', TRUST_PROXY: 'true' });
      admin = (await bootstrapAdmin(t)).key;
    });
    afterAll(() => t.close());

    const raw = (target: string, address: string) =>
      rawRequest(
        t.url,
        `POST ${target} HTTP/1.1\r\nHost: ${new URL(t.url).host}\r\nX-Forwarded-For: ${address}\r\n` +
          'Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}',
      );
    const header = (res: { headers: string }, name: string) => new RegExp(`^${name}: (.*)$`, 'im').exec(res.headers)?.[1];

    it('a fragment in the request target does not open another bucket', async () => {
      const remaining: (string | undefined)[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await raw(`/items#${i}`, '203.0.113.21');
        expect(res.status).toBe(401);
        expect(header(res, 'x-ratelimit-limit')).toBe('5');
        remaining.push(header(res, 'x-ratelimit-remaining'));
      }
      expect(remaining).toEqual(['4', '3', '2', '1', '0']);
      const refused = await raw('/items#5', '203.0.113.21');
      expect(refused.status).toBe(429);
      expect(JSON.parse(refused.body).error.code).toBe('rate_limited');
      expectRateLimited(await t.http.post('/items').set('X-Forwarded-For', '203.0.113.21').send({}), 5);
    });

    it("a CORS preflight counts with the reads of the segment it asks about, not with stray 404s", async () => {
      const from = (req: import('supertest').Test) => req.set('X-Forwarded-For', '203.0.113.24');
      const preflight = (path: string) => from(t.http.options(path)).set('Origin', 'https://app.example').set('Access-Control-Request-Method', 'POST');
      const remaining = (res: Response) => res.headers['x-ratelimit-remaining'];
      expect(remaining(await preflight('/items').expect(204))).toBe('9');
      expect(remaining(await preflight('/ITEMS/some-id').expect(204))).toBe('8');
      // Paths no route has keep sharing one bucket, preflights of made-up segments included.
      expect(remaining(expectStatus(await from(t.http.get('/no-such-route')), 404))).toBe('9');
      expect(remaining(await preflight('/made-up-1').expect(204))).toBe('8');
      expect(remaining(await preflight('/made-up-2').expect(204))).toBe('7');
      // Another segment has its own.
      expect(remaining(await preflight('/edges/x').expect(204))).toBe('9');
      expect(remaining(await preflight('/items').expect(204))).toBe('7');
      // And the segment's reads from the address count in the same bucket (a 401 included).
      expect(remaining(expectStatus(await from(t.http.get('/items')), 401))).toBe('6');
      expect(remaining(await preflight('/items').expect(204))).toBe('5');
    });

    it('an absolute-form target counts in the bucket of the path it routes to', async () => {
      const target = `${t.url}/auth/sign-in`;
      for (let i = 0; i < 4; i++) {
        const res = await raw(target, '203.0.113.22');
        expect(res.status).not.toBe(429);
        expect(header(res, 'x-ratelimit-limit')).toBe('4'); // the password forms' tight limit, not the base of `/`
        expect(header(res, 'x-ratelimit-remaining')).toBe(String(3 - i));
      }
      expect((await raw(target, '203.0.113.22')).status).toBe(429);
      expectRateLimited(await t.http.post('/auth/sign-in').set('X-Forwarded-For', '203.0.113.22').type('form').send({}), 4);
    });

    it('the password forms and the token endpoints count per address whatever token the request carries', async () => {
      const k1 = (await createKey(t, admin, { label: 'guesser-1', role: 'admin' })).key;
      const k2 = (await createKey(t, admin, { label: 'guesser-2', role: 'admin' })).key;
      const signIn = (key?: string) => {
        const req = t.http.post('/auth/sign-in').set('X-Forwarded-For', '203.0.113.23').type('form');
        return (key ? req.set(bearer(key)) : req).send({ email: 'someone@example.com', password: 'guess' });
      };
      for (let i = 0; i < 4; i++) expect(expectLimitHeaders(await signIn(k1), 4).remaining).toBe(3 - i);
      expectRateLimited(await signIn(k2), 4);
      expectRateLimited(await signIn(), 4);

      const token = (key: string) =>
        t.http.post('/auth/token').set('X-Forwarded-For', '203.0.113.23').set(bearer(key)).type('form').send({ grant_type: 'client_credentials' });
      for (let i = 0; i < 4; i++) expect((await token(k1)).status).not.toBe(429);
      const refused = await token(k2);
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ error: 'rate_limited', error_description: expect.any(String) });
    });

    it('a token request the tight limit refuses does not count at the base limit either: a device\'s poll from the address is not refused', async () => {
      const from = '203.0.113.27';
      const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
      const app = { grant_types: [DEVICE_GRANT], token_endpoint_auth_method: 'none', scope: 'openid' };
      const { client_id } = (await t.http.post('/auth/clients').set(bearer(admin)).send(app).expect(201)).body;
      const { device_code } = (await t.http.post('/auth/device').set('X-Forwarded-For', from).type('form').send({ client_id, scope: 'openid' }).expect(200)).body;
      const refresh = () => t.http.post('/auth/oauth2/token').set('X-Forwarded-For', from).type('form').send({ grant_type: 'refresh_token', refresh_token: 'svc_rt_x', client_id });
      const poll = () => t.http.post('/auth/device/token').set('X-Forwarded-For', from).type('form').send({ grant_type: DEVICE_GRANT, device_code, client_id });
      // The tight limit, 4 here, lets four through (each counted at the base, 5, too) and refuses the fifth.
      for (let i = 0; i < 4; i++) expect((await refresh()).status).toBe(400);
      const refused = await refresh();
      expect([refused.status, refused.body.error, refused.headers['x-ratelimit-limit']]).toEqual([429, 'rate_limited', '4']);
      // Four let through at the base: the poll takes its last place.
      const pending = await poll();
      expect([pending.status, pending.body.error, pending.headers['x-ratelimit-limit'], pending.headers['x-ratelimit-remaining']]).toEqual([400, 'authorization_pending', '5', '0']);
      const full = await poll();
      expect([full.status, full.body.error, full.headers['x-ratelimit-limit']]).toEqual([429, 'rate_limited', '5']);
    });

    it('the account page\'s key form, where keys are minted, is capped as /keys and counts per address whatever token the request carries', async () => {
      const k1 = (await createKey(t, admin, { label: 'browser-1', role: 'admin' })).key;
      const k2 = (await createKey(t, admin, { label: 'browser-2', role: 'admin' })).key;
      // Not signed in to the account pages: 401, counted all the same.
      const mint = (key?: string) => {
        const req = t.http.post('/auth/keys').set('X-Forwarded-For', '203.0.113.26').type('form');
        return (key ? req.set(bearer(key)) : req).send({ csrf: 'x', label: 'minted' });
      };
      for (let i = 0; i < 4; i++) {
        const res = await mint(k1);
        expect(res.status).toBe(401);
        expect(expectLimitHeaders(res, 4).remaining).toBe(3 - i);
      }
      expect([(await mint(k2)).status, (await mint()).status]).toEqual([429, 429]);
      // The rest of /auth keeps the base limit.
      expectLimitHeaders(await t.http.post('/auth/sessions/revoke').set('X-Forwarded-For', '203.0.113.26').send({}), 5);
    });

    it('paths that match no route count in one bucket, whatever their first segment', async () => {
      const remaining: (string | undefined)[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await raw(`/made-up-${i}`, '203.0.113.25');
        expect(res.status).toBe(404);
        remaining.push(header(res, 'x-ratelimit-remaining'));
      }
      expect(remaining).toEqual(['4', '3', '2', '1', '0']);
      expect((await raw('/yet-another', '203.0.113.25')).status).toBe(429);
      // A route's own bucket is apart.
      expect((await raw('/items', '203.0.113.25')).status).toBe(401);
    });

    it('made-up HTTP Basic client ids do not open buckets of their own; open registration has the tight cap', async () => {
      const register = (i: number) =>
        t.http.post('/auth/oauth2/register').set('X-Forwarded-For', '203.0.113.24').auth(`made-up-${i}`, 'x').send({ redirect_uris: 'not a list' });
      const remaining: number[] = [];
      for (let i = 0; i < 4; i++) {
        const res = await register(i);
        expect(res.status).not.toBe(429);
        remaining.push(expectLimitHeaders(res, 4).remaining);
      }
      expect(remaining).toEqual([3, 2, 1, 0]);
      const refused = await register(4);
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ error: 'rate_limited', error_description: expect.any(String) });
    });
  });

  it('/keys is capped at 30 writes (60 reads) per window even when the default is larger', async () => {
    const t = await startApp({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '100' });
    try {
      const admin = (await bootstrapAdmin(t)).key;
      expectLimitHeaders(await t.http.get('/keys').set(bearer(admin)).expect(200), 60);
      expectLimitHeaders(await t.http.get('/health').set(bearer(admin)).expect(200), 200);
      for (let i = 0; i < 30; i++) {
        const res = await t.http.post('/keys').set(bearer(admin)).send({ role: 'not-a-role' });
        expectError(res, 400, 'validation_error');
        expectLimitHeaders(res, 30);
      }
      expectRateLimited(await t.http.post('/keys').set(bearer(admin)).send({ label: 'the 31st' }), 30);
      // Spelled otherwise, it is the same route and the same bucket.
      for (const path of ['/%6Beys', '/KEYS', '/%4B%45YS/']) expectRateLimited(await t.http.post(path).set(bearer(admin)).send({ label: 'encoded' }), 30);
      // Other writes of the same key keep the configured default.
      const tenants = await t.http.post('/tenants').set(bearer(admin)).send({ name: 'still fine' }).expect(201);
      expectLimitHeaders(tenants, 100);
    } finally {
      await t.close();
    }
  });

  describe('client address behind a proxy', () => {
    let trusting: TestApp;
    let direct: TestApp;
    beforeAll(async () => {
      [trusting, direct] = await Promise.all([
        startApp({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '3', TRUST_PROXY: 'true' }),
        startApp({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '3' }),
      ]);
    });
    afterAll(() => Promise.all([trusting?.close(), direct?.close()]));

    it('with TRUST_PROXY=true, X-Forwarded-For addresses get separate buckets', async () => {
      for (let i = 0; i < 6; i++) await trusting.http.get('/health').set('X-Forwarded-For', '203.0.113.1').expect(200);
      expectRateLimited(await trusting.http.get('/health').set('X-Forwarded-For', '203.0.113.1'), 6);
      const other = await trusting.http.get('/health').set('X-Forwarded-For', '203.0.113.2').expect(200);
      expect(expectLimitHeaders(other, 6).remaining).toBe(5);
    });

    it('IPv6 addresses count per /64: rotating addresses within one /64 shares its bucket', async () => {
      for (let i = 0; i < 6; i++) {
        const res = await trusting.http.get('/health').set('X-Forwarded-For', `2001:db8:5:6:${i}::${i + 1}`).expect(200);
        expect(expectLimitHeaders(res, 6).remaining).toBe(5 - i);
      }
      expectRateLimited(await trusting.http.get('/health').set('X-Forwarded-For', '2001:db8:5:6:ffff:ffff:ffff:ffff'), 6);
      // The next /64 is another subscriber's.
      const next = await trusting.http.get('/health').set('X-Forwarded-For', '2001:db8:5:7::1').expect(200);
      expect(expectLimitHeaders(next, 6).remaining).toBe(5);
      // An IPv4-mapped address is that IPv4 client's, counted with it.
      await trusting.http.get('/health').set('X-Forwarded-For', '203.0.113.40').expect(200);
      const mapped = await trusting.http.get('/health').set('X-Forwarded-For', '::ffff:203.0.113.40').expect(200);
      expect(expectLimitHeaders(mapped, 6).remaining).toBe(4);
    });

    it('an address written with its port counts as the address; text that is no address counts in one bucket, whatever it says', async () => {
      for (let i = 0; i < 6; i++) await trusting.http.get('/health').set('X-Forwarded-For', `203.0.113.50:${40_000 + i}`).expect(200);
      expectRateLimited(await trusting.http.get('/health').set('X-Forwarded-For', '203.0.113.50:50000'), 6);
      expectRateLimited(await trusting.http.get('/health').set('X-Forwarded-For', '203.0.113.50'), 6);
      for (let i = 0; i < 6; i++) await trusting.http.get('/health').set('X-Forwarded-For', `[2001:db8:9::${i + 1}]:443`).expect(200);
      expectRateLimited(await trusting.http.get('/health').set('X-Forwarded-For', '2001:db8:9::99'), 6);
      for (let i = 0; i < 6; i++) await trusting.http.get('/health').set('X-Forwarded-For', `client-${i}`).expect(200);
      expectRateLimited(await trusting.http.get('/health').set('X-Forwarded-For', 'x'.repeat(1000)), 6);
    });

    it('without it, X-Forwarded-For is ignored: every value shares the socket address\'s bucket', async () => {
      for (let i = 0; i < 6; i++) await direct.http.get('/health').set('X-Forwarded-For', `203.0.113.${10 + i}`).expect(200);
      expectRateLimited(await direct.http.get('/health').set('X-Forwarded-For', '203.0.113.99'), 6);
      expectRateLimited(await direct.http.get('/health'), 6);
    });
  });

  it('RATE_LIMIT_ENABLED=false sends no limit headers and never answers 429', async () => {
    const t = await startApp({ RATE_LIMIT_ENABLED: 'false', RATE_LIMIT_REQUESTS: '1' });
    try {
      const admin = (await bootstrapAdmin(t)).key;
      for (let i = 0; i < 35; i++) {
        const res = await t.http.post('/keys').set(bearer(admin)).send({ role: 'x' });
        expectError(res, 400, 'validation_error');
        expect(res.headers['x-ratelimit-limit']).toBeUndefined();
        expect(res.headers['x-ratelimit-remaining']).toBeUndefined();
        expect(res.headers['x-ratelimit-reset']).toBeUndefined();
      }
      for (let i = 0; i < 5; i++) await t.http.get('/health').expect(200);
    } finally {
      await t.close();
    }
  });
});

function expectStatus(res: Response, status: number): Response {
  expect(res.status).toBe(status);
  return res;
}
