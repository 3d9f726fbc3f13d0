/**
 * The connector OAuth bootstrap (SPEC 5.9; issue 18): the service connects an integration to its
 * upstream, here a second instance of the service acting as the OAuth provider, over real HTTP.
 * The round trip, every refusal (redirect_uri off the allowlist, tampered, expired and replayed
 * state, a starting admin key revoked or demoted before the callback), tokens sealed at rest,
 * refresh through the stored refresh token (also from several requests at once, against an
 * upstream that refuses a reused one), delete. Malformed token responses, token URLs that
 * break the manifest rule, and a token endpoint that hangs, trickles, resets or fails, against a
 * token endpoint of the test's own.
 */
import { randomUUID } from 'node:crypto';
import { createServer, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { SecretBox } from '../src/crypto/secret-box';
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';
import { browse, field } from './support/browse';
import { expectReplayed } from './support/created';
import { badFields, expectError } from './support/envelope';
import { Receiver } from './support/receiver';
import { waitFor } from './support/wait';

const BACK = 'https://app.example.com/connected';

describe('connector OAuth bootstrap', () => {
  let upstream: TestApp;
  let svc: TestApp;
  let admin: string;
  let integrationId: string;

  beforeAll(async () => {
    upstream = await startApp();
    svc = await startApp({ SVC_OAUTH_REDIRECT_ALLOWLIST: `${BACK}, http://127.0.0.1:9/other` });
    const upAdmin = (await bootstrapAdmin(upstream)).key;
    await upstream.http.post('/users').set(bearer(upAdmin)).send({ email: 'owner@upstream.example', password: 'upstream password', name: 'Owner' }).expect(201);
    const client = await upstream.http
      .post('/auth/clients')
      .set(bearer(upAdmin))
      .send({ client_name: 'The data service', redirect_uris: [`${svc.url}/oauth/callback/acme.notes`], scope: 'openid core.note:read', token_endpoint_auth_method: 'none' })
      .expect(201);
    admin = (await bootstrapAdmin(svc)).key;
    const integration = await svc.http
      .post('/integrations')
      .set(bearer(admin))
      .send({
        manifest: {
          name: 'acme.notes',
          version: '1.0.0',
          publisher: 'Acme',
          direction: 'read',
          runtime_compatibility: ['svc>=4.2'],
          oauth: { authorize_url: `${upstream.url}/auth/authorize`, token_url: `${upstream.url}/auth/oauth2/token`, scopes: ['openid', 'core.note:read'], client_id: client.body.client_id },
          target_types: ['core.note'],
          permissions: ['core.note:write'],
        },
      })
      .expect(201);
    integrationId = integration.body.id;
  });
  afterAll(async () => {
    await svc?.close();
    await upstream?.close();
  });

  const start = (redirectUri: string, id = integrationId) =>
    svc.http.get('/oauth/start').query({ integration_id: id, redirect_uri: redirectUri }).set(bearer(admin));

  /** Signs in and consents at the upstream; answers the callback URL it sends the browser to. */
  async function consentUpstream(authorizeUrl: string): Promise<URL> {
    const agent = request.agent(upstream.url);
    const url = new URL(authorizeUrl);
    const signIn = await browse(agent, upstream.url, url.pathname + url.search);
    const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(signIn.page!, 'uid'), csrf: field(signIn.page!, 'csrf'), email: 'owner@upstream.example', password: 'upstream password' });
    const consent = await browse(agent, upstream.url, new URL(signedIn.headers.location, upstream.url).pathname);
    const decision = await agent.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' });
    const back = await browse(agent, upstream.url, new URL(decision.headers.location, upstream.url).pathname);
    return new URL(back.leftTo!);
  }

  it('connects: PKCE to the upstream, the code exchanged, the tokens stored sealed, the user sent back', async () => {
    const started = await start('HTTPS://APP.EXAMPLE.COM:443/connected');
    expect(started.status).toBe(302);
    const authorize = new URL(started.headers.location);
    expect(authorize.origin + authorize.pathname).toBe(`${upstream.url}/auth/authorize`);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${svc.url}/oauth/callback/acme.notes`);
    expect(authorize.searchParams.get('state')).not.toContain('verifier');

    const callback = await consentUpstream(started.headers.location);
    expect(callback.origin + callback.pathname).toBe(`${svc.url}/oauth/callback/acme.notes`);
    // With parameters an upstream may add of its own (RFC 6749 4.1.2: ignored, not refused).
    const done = await svc.http.get(`${callback.pathname}${callback.search}&authuser=0&prompt=consent&session_state=s1`);
    expect(done.status).toBe(302);
    const back = new URL(done.headers.location);
    expect(back.origin + back.pathname).toBe(BACK);
    const connectionId = back.searchParams.get('connection_id');

    const { connections } = (await svc.http.get('/connections').set(bearer(admin)).expect(200)).body;
    expect(connections).toEqual([expect.objectContaining({ id: connectionId, integration_id: integrationId, provider: 'acme.notes', has_refresh_token: true, scope: expect.stringContaining('core.note:read') })]);
    expect(JSON.stringify(connections)).not.toMatch(/svc_at_|svc_rt_/);
    const [row] = await svc.sql<{ a: string; r: string }>(`SELECT access_token_sealed AS a, refresh_token_sealed AS r FROM connections`);
    expect(row.a).toMatch(/^v1\./);
    expect(row.r).toMatch(/^v1\./);
    expect(`${row.a}${row.r}`).not.toMatch(/svc_at_|svc_rt_/);

    // The same callback again: the state is single-use.
    expectError(await svc.http.get(callback.pathname + callback.search), 400, 'invalid_request');

    const refreshed = await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin)).expect(200);
    expect(refreshed.body.refreshed_at).toEqual(expect.any(String));
    const [after] = await svc.sql<{ a: string }>(`SELECT access_token_sealed AS a FROM connections`);
    expect(after.a).not.toBe(row.a);

    await svc.http.delete(`/connections/${connectionId}`).set(bearer(admin)).expect(200);
    expect((await svc.http.get('/connections').set(bearer(admin)).expect(200)).body.connections).toEqual([]);
    expectError(await svc.http.delete(`/connections/${connectionId}`).set(bearer(admin)), 404, 'not_found');
  });

  it('sends the user back with the upstream\'s error when it refuses the code, and stores nothing', async () => {
    const started = await start(BACK);
    const state = new URL(started.headers.location).searchParams.get('state');
    const res = await svc.http.get('/oauth/callback/acme.notes').query({ code: 'not-a-code-the-upstream-issued', state });
    expect(res.status).toBe(302);
    const back = new URL(res.headers.location);
    expect(back.origin + back.pathname).toBe(BACK);
    expect(back.searchParams.get('error')).toBe('invalid_grant');
    expect(back.searchParams.get('connection_id')).toBeNull();
    expect(await svc.sql(`SELECT 1 FROM connections`)).toHaveLength(0);
  });

  it('sends a user who declined back with the upstream\'s error and its description', async () => {
    const state = new URL((await start(BACK)).headers.location).searchParams.get('state');
    const res = await svc.http
      .get('/oauth/callback/acme.notes')
      .query({ error: 'access_denied', error_description: 'The user said no', error_uri: 'https://upstream.example/why', state });
    expect(res.status).toBe(302);
    const back = new URL(res.headers.location);
    expect(back.origin + back.pathname).toBe(BACK);
    expect([back.searchParams.get('error'), back.searchParams.get('error_description')]).toEqual(['access_denied', 'The user said no']);
    expect(back.searchParams.get('connection_id')).toBeNull();
    // Parameters it knows are still checked: a repeated one is refused, naming it.
    expect(badFields(await svc.http.get(`/oauth/callback/acme.notes?error=a&error=b&state=${encodeURIComponent(state!)}`))).toEqual(['error']);
  });

  it('refreshes a connection from several requests at once without presenting one refresh token twice', async () => {
    // The upstream rotates refresh tokens and treats a second use of one as theft, revoking the grant.
    const callback = await consentUpstream((await start(BACK).expect(302)).headers.location);
    const done = await svc.http.get(callback.pathname + callback.search).expect(302);
    const connectionId = new URL(done.headers.location).searchParams.get('connection_id');
    const refresh = () => svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin));
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all([refresh(), refresh(), refresh()]);
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200]);
    }
    await refresh().expect(200);
    await svc.http.delete(`/connections/${connectionId}`).set(bearer(admin)).expect(200);
  });

  it('GET /connections/{id}: one connection without its tokens, for the tenant\'s admins; another tenant\'s is 404 not_found', async () => {
    const callback = await consentUpstream((await start(BACK).expect(302)).headers.location);
    const done = await svc.http.get(callback.pathname + callback.search).expect(302);
    const connectionId = new URL(done.headers.location).searchParams.get('connection_id')!;
    const listed = (await svc.http.get('/connections').set(bearer(admin)).expect(200)).body.connections.find((c: { id: string }) => c.id === connectionId);
    const got = await svc.http.get(`/connections/${connectionId}`).set(bearer(admin)).expect(200);
    expect(got.body).toEqual(listed);
    expect(JSON.stringify(got.body)).not.toMatch(/svc_at_|svc_rt_|sealed|v1\./);
    const other = await createTenant(svc, admin, `connections ${connectionId}`);
    expectError(await svc.http.get(`/connections/${connectionId}`).set(bearer(other.key)), 404, 'not_found');
    expectError(await svc.http.get(`/connections/${randomUUID()}`).set(bearer(admin)), 404, 'not_found');
    expectError(await svc.http.get('/connections/nope').set(bearer(admin)), 400, 'invalid_id');
    const member = (await svc.http.post('/keys').set(bearer(admin)).send({ label: 'm', role: 'member' }).expect(201)).body.key;
    expectError(await svc.http.get(`/connections/${connectionId}`).set(bearer(member)), 403, 'forbidden');
    expectError(await svc.http.delete(`/connections/${connectionId}`).set(bearer(member)), 403, 'forbidden');
    expectError(await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(member)).send({}), 403, 'forbidden');
    expect((await svc.http.get(`/connections/${connectionId}`).set(bearer(admin)).expect(200)).body).toEqual(listed);
    await svc.http.delete(`/connections/${connectionId}`).set(bearer(admin)).expect(200);
    expectError(await svc.http.get(`/connections/${connectionId}`).set(bearer(admin)), 404, 'not_found');
  });

  it('takes an Idempotency-Key on a refresh: a retry gets the first answer again and the upstream is not called again', async () => {
    const callback = await consentUpstream((await start(BACK).expect(302)).headers.location);
    const done = await svc.http.get(callback.pathname + callback.search).expect(302);
    const connectionId = new URL(done.headers.location).searchParams.get('connection_id')!;
    const stored = async () => (await svc.sql<{ a: string; r: string }>(`SELECT access_token_sealed AS a, refresh_token_sealed AS r FROM connections WHERE id = $1`, [connectionId]))[0];
    const before = await stored();
    const refresh = (id: string) => () => svc.http.post(`/connections/${id}/refresh`).set(bearer(admin));
    const first = await expectReplayed(refresh(connectionId), refresh(randomUUID()), 200);
    const after = await stored();
    expect(after.a).not.toBe(before.a);
    // One refresh only: a second would have stored yet other tokens (the upstream rotates them).
    expect((await svc.http.get(`/connections/${connectionId}`).set(bearer(admin)).expect(200)).body.refreshed_at).toBe(first.body.refreshed_at);
    expect(await stored()).toEqual(after);
    await svc.http.delete(`/connections/${connectionId}`).set(bearer(admin)).expect(200);
  });

  it('refuses a redirect_uri off the allowlist, and an integration without OAuth', async () => {
    for (const uri of ['https://evil.example/connected', `${BACK}/`, `${BACK}#x`, 'https://app.example.com:8443/connected', 'not a url']) {
      expectError(await start(uri), 400, 'invalid_request');
    }
    expectError(await start(BACK, '00000000-0000-4000-8000-000000000000'), 404, 'integration_not_found');
    const plain = await svc.http
      .post('/integrations')
      .set(bearer(admin))
      .send({ manifest: { name: 'acme.plain', version: '1.0.0', publisher: 'Acme', direction: 'read', runtime_compatibility: ['svc>=4.2'] } })
      .expect(201);
    expectError(await start(BACK, plain.body.id), 400, 'invalid_request');
    expect(badFields(await svc.http.get('/oauth/start').query({ integration_id: integrationId, redirect_uri: BACK, extra: '1' }).set(bearer(admin)))).toEqual(['extra']);
  });

  it('names a missing or empty integration_id or redirect_uri (400 validation_error), as any missing field', async () => {
    for (const [query, fields] of [
      [{ redirect_uri: BACK }, ['integration_id']],
      [{ integration_id: '', redirect_uri: BACK }, ['integration_id']],
      [{ integration_id: integrationId }, ['redirect_uri']],
      [{ integration_id: integrationId, redirect_uri: '' }, ['redirect_uri']],
      [{}, ['integration_id', 'redirect_uri']],
    ] as const) {
      const res = await svc.http.get('/oauth/start').query(query).set(bearer(admin));
      expect([query, res.status, res.body.error?.code]).toEqual([query, 400, 'validation_error']);
      expect(badFields(res).sort()).toEqual(fields);
    }
  });

  it('stores nothing for a tampered, foreign or expired state', async () => {
    const count = async () => (await svc.sql<{ n: number }>(`SELECT count(*)::int AS n FROM connections`))[0].n;
    const before = await count();
    const started = await start(BACK);
    const state = new URL(started.headers.location).searchParams.get('state')!;
    const tampered = state.slice(0, -2) + (state.endsWith('A') ? 'BB' : 'AA');
    expectError(await svc.http.get('/oauth/callback/acme.notes').query({ code: 'x', state: tampered }), 400, 'invalid_request');
    expectError(await svc.http.get('/oauth/callback/acme.other').query({ code: 'x', state }), 400, 'invalid_request');
    const expired = await svc.app.get(SecretBox).seal(
      JSON.stringify({ nonce: 'n1', tenantId: 'x', credentialId: 'x', integrationId, provider: 'acme.notes', redirectUri: BACK, verifier: 'v', exp: Math.floor(Date.now() / 1000) - 1 }),
      'connector-oauth-state',
    );
    expectError(await svc.http.get('/oauth/callback/acme.notes').query({ code: 'x', state: expired }), 400, 'invalid_request');
    expect(await count()).toBe(before);
  });

  it.each([
    ['revoked', (id: string) => svc.http.delete(`/keys/${id}`).set(bearer(admin)).expect(200)],
    ['demoted', (id: string) => svc.http.patch(`/keys/${id}`).set(bearer(admin)).send({ role: 'member' }).expect(200)],
  ])('connects nothing when the admin key that started the flow was %s before the callback', async (_, change) => {
    const temporary = (await svc.http.post('/keys').set(bearer(admin)).send({ label: 'temporary admin', role: 'admin' }).expect(201)).body;
    const started = await svc.http.get('/oauth/start').query({ integration_id: integrationId, redirect_uri: BACK }).set(bearer(temporary.key)).expect(302);
    const callback = await consentUpstream(started.headers.location);
    await change(temporary.id);
    const res = await svc.http.get(callback.pathname + callback.search);
    expect(res.status).toBe(302);
    const back = new URL(res.headers.location);
    expect(back.origin + back.pathname).toBe(BACK);
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('connection_id')).toBeNull();
    expect(await svc.sql(`SELECT 1 FROM connections WHERE created_by = $1`, [temporary.id])).toHaveLength(0);
  });

  it('is for admins; the callback needs no bearer but a state', async () => {
    const member = (await svc.http.post('/keys').set(bearer(admin)).send({ label: 'm', role: 'member' }).expect(201)).body.key;
    expectError(await svc.http.get('/oauth/start').query({ integration_id: integrationId, redirect_uri: BACK }).set(bearer(member)), 403, 'forbidden');
    expectError(await svc.http.get('/connections').set(bearer(member)), 403, 'forbidden');
    expectError(await svc.http.get('/oauth/callback/acme.notes'), 400, 'invalid_request');
    // A parameter the upstream sent twice (RFC 6749 3.1: never more than once) is refused as such.
    for (const name of ['code', 'state']) {
      const twice = expectError(await svc.http.get(`/oauth/callback/acme.notes?code=a&state=b&${name}=c`), 400, 'validation_error');
      expect(twice.details!.fields).toEqual([{ field: name, message: `give ${name} once` }]);
    }
  });
});

describe('connector token endpoints with private targets off', () => {
  let svc: TestApp;
  let admin: string;
  const receiver = new Receiver();

  beforeAll(async () => {
    const base = await receiver.start();
    svc = await startApp({ SVC_OAUTH_REDIRECT_ALLOWLIST: BACK, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    admin = (await bootstrapAdmin(svc)).key;
    for (const [name, host] of [['acme.literal', base], ['acme.named', base.replace('127.0.0.1', 'localhost')]]) {
      await svc.http
        .post('/integrations')
        .set(bearer(admin))
        .send({
          manifest: {
            name,
            version: '1.0.0',
            publisher: 'Acme',
            direction: 'read',
            runtime_compatibility: ['svc>=4.2'],
            oauth: { authorize_url: `${host}/authorize`, token_url: `${host}/token`, scopes: ['read'], client_id: 'svc' },
            target_types: ['core.note'],
            permissions: ['core.note:read'],
          },
        })
        .expect(201);
    }
  });
  afterAll(async () => {
    await svc?.close();
    await receiver.stop();
  });

  it.each(['acme.literal', 'acme.named'])('does not call a token endpoint of %s on a loopback address, and stores nothing', async (name) => {
    const { body } = await svc.http.get('/integrations').query({ name }).set(bearer(admin)).expect(200);
    const started = await svc.http.get('/oauth/start').query({ integration_id: body.integrations[0].id, redirect_uri: BACK }).set(bearer(admin)).expect(302);
    const state = new URL(started.headers.location).searchParams.get('state');
    const res = await svc.http.get(`/oauth/callback/${name}`).query({ code: 'a-code', state });
    expect(res.status).toBe(302);
    const back = new URL(res.headers.location);
    expect(back.origin + back.pathname).toBe(BACK);
    expect(back.searchParams.get('error')).toBe('temporarily_unavailable');
    expect(back.searchParams.get('error_description')).toMatch(/not a public address/);
    expect(back.searchParams.get('connection_id')).toBeNull();
    expect(receiver.requests).toHaveLength(0);
    expect(await svc.sql(`SELECT 1 FROM connections`)).toHaveLength(0);
  });
});

describe('connector token responses and token URLs', () => {
  let svc: TestApp;
  let admin: string;
  let base: string;
  let server: Server;
  /** What the token endpoint answers (200, as JSON text); every request to it is counted. */
  let answer = '';
  let requests = 0;
  const answerWith = (res: ServerResponse, status: number, body: string) => res.writeHead(status, { 'content-type': 'application/json' }).end(body);
  /** How the token endpoint answers a request, given its form (and path); by default `answer`. */
  let respond: (res: ServerResponse, form: URLSearchParams, path: string) => void;
  const byDefault = (res: ServerResponse) => answerWith(res, 200, answer);
  const VALID = '{"access_token":"at-1","refresh_token":"rt-1","token_type":"Bearer","scope":null,"expires_in":3600}';
  // Each one broke the service (500) or was stored as it came.
  const MALFORMED = [
    '{"access_token":"at","expires_in":1e20}',
    '{"access_token":"at","expires_in":-1e400}',
    '{"access_token":"at","expires_in":-1}',
    '{"access_token":"at","expires_in":"3600"}',
    '{"access_token":"at","refresh_token":12345}',
    '{"access_token":"at","refresh_token":{}}',
    '{"access_token":"a\\u0000t"}',
    '{"access_token":"at","scope":"read\\u0000"}',
    // Unpaired surrogates, which would be stored as U+FFFD: a token the upstream never issued.
    '{"access_token":"AT\\ud800X","refresh_token":"RT\\udc00Y","scope":"a\\ud800b","token_type":"\\udfffB"}',
    '{"access_token":"at","refresh_token":"RT\\udc00Y"}',
    '{"access_token":"at","scope":"a\\ud800b"}',
    '{"access_token":"at","token_type":"\\udfffB"}',
    '{"access_token":"at","scope":{"read":true}}',
    '{"access_token":"at","token_type":["Bearer"]}',
    '{"access_token":""}',
    'null',
    // Read whole, an upstream's answer of any size was held in memory.
    `{"access_token":"at","padding":"${'x'.repeat(256 * 1024)}"}`,
  ];

  const register = async (name: string) =>
    (
      await svc.http
        .post('/integrations')
        .set(bearer(admin))
        .send({
          manifest: {
            name,
            version: '1.0.0',
            publisher: 'Acme',
            direction: 'read',
            runtime_compatibility: ['svc>=4.2'],
            oauth: { authorize_url: `${base}/authorize`, token_url: `${base}/token`, client_id: 'svc' },
          },
        })
        .expect(201)
    ).body.id as string;
  const callback = async (name: string, integrationId: string) => {
    const started = await svc.http.get('/oauth/start').query({ integration_id: integrationId, redirect_uri: BACK }).set(bearer(admin)).expect(302);
    const res = await svc.http.get(`/oauth/callback/${name}`).query({ code: 'a-code', state: new URL(started.headers.location).searchParams.get('state') });
    expect(res.status).toBe(302);
    const back = new URL(res.headers.location);
    expect(back.origin + back.pathname).toBe(BACK);
    return back.searchParams;
  };
  /** A connection made through an upstream answering VALID: its integration's id and its own. */
  const connected = async (name: string) => {
    const id = await register(name);
    answer = VALID;
    return { id, connectionId: (await callback(name, id)).get('connection_id') };
  };
  /** A connection's stored tokens, to compare before and after a refresh that must keep them. */
  const storedTokens = (connectionId: string | null) =>
    svc.sql(`SELECT access_token_sealed, refresh_token_sealed, token_type, scope, expires_at, refreshed_at FROM connections WHERE id = $1`, [connectionId]);
  const count = async () => (await svc.sql<{ n: number }>(`SELECT count(*)::int AS n FROM connections`))[0].n;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests++;
      let form = '';
      req.setEncoding('utf8').on('data', (chunk: string) => (form += chunk)).on('end', () => respond(res, new URLSearchParams(form), req.url!));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    svc = await startApp({ SVC_OAUTH_REDIRECT_ALLOWLIST: BACK });
    admin = (await bootstrapAdmin(svc)).key;
  });
  beforeEach(() => {
    respond = byDefault;
  });
  afterAll(async () => {
    await svc?.close();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  it('sends the user back with server_error for a malformed token response, and stores nothing', async () => {
    const id = await register('acme.malformed');
    for (const body of MALFORMED) {
      answer = body;
      const back = await callback('acme.malformed', id);
      expect([body, back.get('error'), back.get('connection_id')]).toEqual([body, 'server_error', null]);
      expect(back.get('error_description')).toEqual(expect.any(String));
    }
    expect(await count()).toBe(0);
  });

  it('answers a refresh that gets a malformed token response 400 invalid_grant and keeps the stored tokens', async () => {
    const { connectionId } = await connected('acme.refreshed');
    const stored = () => storedTokens(connectionId);
    const before = await stored();
    expect(before).toHaveLength(1);
    for (const body of MALFORMED) {
      answer = body;
      const res = await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin));
      expect([body, res.status, res.body.error?.code]).toEqual([body, 400, 'invalid_grant']);
    }
    // Over the 64 KiB a token response may have: said so, not as a field missing from it.
    answer = JSON.stringify({ access_token: 'A'.repeat(100_000) });
    const tooLarge = await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin));
    expect([tooLarge.status, tooLarge.body.error?.message]).toEqual([400, "The upstream's token response was not valid: its body is over 64 KiB"]);
    expect(await stored()).toEqual(before);
    answer = VALID;
    await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin)).expect(200);
  });

  it('answers a refresh whose upstream cannot be reached 502 upstream_unavailable (not invalid_grant, a 400) and keeps the stored tokens', async () => {
    const { id, connectionId } = await connected('acme.gone');
    const stored = () => svc.sql(`SELECT access_token_sealed, refresh_token_sealed, refreshed_at FROM connections WHERE id = $1`, [connectionId]);
    const before = await stored();
    // The upstream moved to a port where nothing listens.
    await svc.sql(`UPDATE integrations SET manifest = jsonb_set(manifest, '{oauth,token_url}', to_jsonb('http://127.0.0.1:9/token'::text)) WHERE id = $1`, [id]);
    expectError(await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin)), 502, 'upstream_unavailable');
    expect(await stored()).toEqual(before);
  });

  it('answers HEAD on the callback (a link scanner\'s probe) without exchanging the code or using up the state', async () => {
    const id = await register('acme.probed');
    answer = VALID;
    const started = await svc.http.get('/oauth/start').query({ integration_id: id, redirect_uri: BACK }).set(bearer(admin)).expect(302);
    const query = { code: 'a-code', state: new URL(started.headers.location).searchParams.get('state') };
    const seen = requests;
    const probe = await svc.http.head('/oauth/callback/acme.probed').query(query);
    expect(probe.status).toBe(200);
    expect(probe.headers.location).toBeUndefined();
    expect(requests).toBe(seen);
    expect(await svc.sql(`SELECT 1 FROM connections WHERE integration_id = $1`, [id])).toHaveLength(0);
    // The user's own GET still connects.
    const res = await svc.http.get('/oauth/callback/acme.probed').query(query);
    expect(res.status).toBe(302);
    expect(new URL(res.headers.location).searchParams.get('connection_id')).toEqual(expect.any(String));
    expect(requests).toBe(seen + 1);
  });

  it('sends no empty client_id for a stored manifest without one: /oauth/start and refresh are 400 invalid_request naming it', async () => {
    // As a manifest registered before oauth.client_id was required may be.
    const { id, connectionId } = await connected('acme.clientless');
    await svc.sql(`UPDATE integrations SET manifest = manifest #- '{oauth,client_id}' WHERE id = $1`, [id]);
    const seen = requests;
    const started = await svc.http.get('/oauth/start').query({ integration_id: id, redirect_uri: BACK }).set(bearer(admin));
    expectError(started, 400, 'invalid_request');
    expect(started.body.error.message).toMatch(/oauth\.client_id/);
    const refreshed = await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin));
    expectError(refreshed, 400, 'invalid_request');
    expect(refreshed.body.error.message).toMatch(/oauth\.client_id/);
    expect(requests).toBe(seen);
  });

  it('refreshes a connection made under a version without oauth.client_id with the client id of the newest version of its name with one and the same token_url', async () => {
    // As a manifest registered before oauth.client_id was required may be.
    const { id, connectionId } = await connected('acme.lent');
    await svc.sql(`UPDATE integrations SET manifest = manifest #- '{oauth,client_id}' WHERE id = $1`, [id]);
    const registerVersion = (version: string, token_url: string, client_id: string) =>
      svc.http
        .post('/integrations')
        .set(bearer(admin))
        .send({ manifest: { name: 'acme.lent', version, publisher: 'Acme', direction: 'read', runtime_compatibility: ['svc>=4.2'], oauth: { authorize_url: `${base}/authorize`, token_url, client_id } } })
        .expect(201);
    const sent: Array<[string, string | null]> = [];
    respond = (res, form, path) => {
      sent.push([path, form.get('client_id')]);
      answerWith(res, 200, '{"access_token":"at-2"}');
    };
    const refresh = () => svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin));
    // A version at another upstream lends it no client id: its refresh token was issued at this one's.
    await registerVersion('1.1.0', `${base}/elsewhere/token`, 'svc-elsewhere');
    const refused = await refresh();
    expect(expectError(refused, 400, 'invalid_request').message).toMatch(/oauth\.token_url/);
    expect(sent).toEqual([]);
    await registerVersion('1.2.0', `${base}/token`, 'svc-2');
    await refresh().expect(200);
    await registerVersion('1.3.0', `${base}/elsewhere/token`, 'svc-3');
    await refresh().expect(200);
    expect(sent).toEqual([['/token', 'svc-2'], ['/token', 'svc-2']]);
  });

  it.each([
    ['acme.userinfo', 'http://user:secret@127.0.0.1'],
    ['acme.mapped', 'http://[::ffff:127.0.0.1]'],
  ])('does not call the token_url of a stored manifest (%s, %s…) that breaks the manifest rule, and stores nothing', async (name, origin) => {
    // As a manifest registered before the rule was checked on the parsed URL may have it.
    const id = await register(name);
    await svc.sql(`UPDATE integrations SET manifest = jsonb_set(manifest, '{oauth,token_url}', to_jsonb($1::text)) WHERE id = $2`, [`${origin}:${new URL(base).port}/token`, id]);
    answer = VALID;
    const seen = requests;
    const back = await callback(name, id);
    expect(back.get('error')).toBe('temporarily_unavailable');
    expect(back.get('connection_id')).toBeNull();
    expect(requests).toBe(seen);
    expect(await svc.sql(`SELECT 1 FROM connections WHERE integration_id = $1`, [id])).toHaveLength(0);
  });

  it('sends the user back to start again, not to the upstream, for a stored manifest whose authorize_url breaks the manifest rule: 400 invalid_request naming it', async () => {
    // As a manifest registered before the rule was checked on the parsed URL may have it: the browser would go to evil.example.
    const id = await register('acme.redirected');
    await svc.sql(`UPDATE integrations SET manifest = jsonb_set(manifest, '{oauth,authorize_url}', to_jsonb('http://127.0.0.1:4165@evil.example/authorize'::text)) WHERE id = $1`, [id]);
    const started = await svc.http.get('/oauth/start').query({ integration_id: id, redirect_uri: BACK }).set(bearer(admin));
    expectError(started, 400, 'invalid_request');
    expect(started.headers.location).toBeUndefined();
    expect(started.body.error.message).toMatch(/oauth\.authorize_url/);
  });

  it('keeps the stored token_type, as it keeps scope, when a refresh\'s token response leaves it out', async () => {
    const { connectionId } = await connected('acme.typed');
    answer = '{"access_token":"at-2","scope":"read"}';
    const refreshed = await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin)).expect(200);
    expect([refreshed.body.token_type, refreshed.body.scope]).toEqual(['Bearer', 'read']);
    answer = '{"access_token":"at-3","token_type":"mac"}';
    const again = await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin)).expect(200);
    expect([again.body.token_type, again.body.scope]).toEqual(['mac', 'read']);
  });

  it('repeats at most 500 characters of the upstream\'s error_description, and its error only when RFC 6749 allows it as a code', async () => {
    const { id, connectionId } = await connected('acme.verbose');
    const long = 'd'.repeat(10_000);
    for (const [error, shown] of [
      ['invalid_grant', 'invalid_grant'],
      ['access_denied but "quoted"', 'server_error'],
      ['back\\slash', 'server_error'],
      ['new\nline', 'server_error'],
      ['nul\u0000', 'server_error'],
      ['é', 'server_error'],
      ['x'.repeat(101), 'server_error'],
    ]) {
      respond = (res) => answerWith(res, 400, JSON.stringify({ error, error_description: long }));
      const back = await callback('acme.verbose', id);
      expect([error, back.get('error'), back.get('connection_id')]).toEqual([error, shown, null]);
      expect(back.get('error_description')!.length).toBeLessThanOrEqual(500);
      const refused = await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin));
      const { message, details } = expectError(refused, 400, 'invalid_grant');
      expect(message.length).toBeLessThan(700);
      expect([error, details?.upstream_error]).toEqual([error, shown === 'server_error' ? undefined : error]);
      if (shown === 'server_error') expect(message).not.toContain(error);
    }
    // The upstream's redirect (the user declined) is held to the same rule.
    const started = await svc.http.get('/oauth/start').query({ integration_id: id, redirect_uri: BACK }).set(bearer(admin)).expect(302);
    const declined = await svc.http
      .get('/oauth/callback/acme.verbose')
      .query({ error: 'no "way"', error_description: 'n'.repeat(2000), state: new URL(started.headers.location).searchParams.get('state') });
    const back = new URL(declined.headers.location);
    expect([back.searchParams.get('error'), back.searchParams.get('error_description')]).toEqual(['server_error', 'n'.repeat(500)]);
    // However long what the upstream sends back: the user is sent on, and the state is spent.
    for (const [sent, expected] of [
      [{ error: 'e'.repeat(201), error_description: 'd'.repeat(2001) }, ['server_error', 'd'.repeat(500)]],
      [{ error: 'access_denied', error_description: 'd'.repeat(5000) }, ['access_denied', 'd'.repeat(500)]],
      [{ code: 'c'.repeat(4001) }, ['invalid_request', 'The upstream sent a code over 4000 characters']],
    ] as const) {
      const flow = await svc.http.get('/oauth/start').query({ integration_id: id, redirect_uri: BACK }).set(bearer(admin)).expect(302);
      const state = new URL(flow.headers.location).searchParams.get('state');
      const answered = await svc.http.get('/oauth/callback/acme.verbose').query({ ...sent, state });
      expect(answered.status).toBe(302);
      const to = new URL(answered.headers.location);
      expect([to.searchParams.get('error'), to.searchParams.get('error_description')]).toEqual(expected);
      expectError(await svc.http.get('/oauth/callback/acme.verbose').query({ code: 'c', state }), 400, 'invalid_request');
    }
  });

  it('answers an upstream that fails while sending its body, answers 5xx or limits the rate (429) as unavailable (temporarily_unavailable, 502), not as a bad grant, and keeps the stored tokens', async () => {
    const { id, connectionId } = await connected('acme.flaky');
    const stored = () => storedTokens(connectionId);
    const before = await stored();
    const failures: Array<[string, (res: ServerResponse) => void]> = [
      ['200, then a body that trickles past the timeout', (res) => {
        res.writeHead(200, { 'content-type': 'application/json' }).write('{"access_token":"at-2"');
        const drip = setInterval(() => (res.destroyed ? clearInterval(drip) : res.write(' ')), 500);
        res.on('close', () => clearInterval(drip));
      }],
      ['200, then a reset halfway through the body', (res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '200' }).write('{"access_token":"at-2"', () => res.destroy());
      }],
      ['503 with an OAuth error', (res) => answerWith(res, 503, '{"error":"temporarily_unavailable","error_description":"down for maintenance"}')],
      ['429, rate limited', (res) => answerWith(res, 429, '{"error":"slow_down"}')],
      ['500 with a page', (res) => res.writeHead(500, { 'content-type': 'text/html' }).end('<h1>Internal Server Error</h1>')],
      // Not followed: the endpoint moved, which says nothing about the grant.
      ['302 elsewhere', (res) => res.writeHead(302, { location: 'http://127.0.0.1:9/token' }).end()],
    ];
    for (const [what, failure] of failures) {
      respond = failure;
      // At once, so that the trickle's two timeouts run together.
      const [back, refreshed] = await Promise.all([callback('acme.flaky', id), svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin)).then((r) => r)]);
      expect([what, back.get('error'), back.get('connection_id')]).toEqual([what, 'temporarily_unavailable', null]);
      expect([what, refreshed.status, refreshed.body.error?.code]).toEqual([what, 502, 'upstream_unavailable']);
    }
    expect(await stored()).toEqual(before);
    expect(await svc.sql(`SELECT 1 FROM connections WHERE integration_id = $1`, [id])).toHaveLength(1);
  }, 25_000);

  describe('refreshes of one connection at once, with the upstream slow to answer', () => {
    const ROUNDS: Array<[string, (res: ServerResponse) => void, number, string | undefined]> = [
      ['rotates the tokens', (res) => answerWith(res, 200, '{"access_token":"at-2","refresh_token":"rt-2","token_type":"Bearer","expires_in":3600}'), 200, undefined],
      ['refuses the refresh token', (res) => answerWith(res, 400, '{"error":"invalid_grant","error_description":"revoked"}'), 400, 'invalid_grant'],
      ['resets the connection', (res) => res.destroy(), 502, 'upstream_unavailable'],
    ];

    // Every refresh first tries to claim the connection with one UPDATE, which fires a statement
    // trigger whether or not it claims: the count says how many refreshes have come that far.
    beforeAll(async () => {
      await svc.sql(`CREATE SEQUENCE IF NOT EXISTS test_connection_updates`);
      await svc.sql(`CREATE OR REPLACE FUNCTION test_count_connection_updates() RETURNS trigger LANGUAGE plpgsql AS
                       $$ BEGIN PERFORM nextval('test_connection_updates'); RETURN NULL; END $$`);
      await svc.sql(`CREATE TRIGGER test_count_connection_updates AFTER UPDATE ON connections
                       FOR EACH STATEMENT EXECUTE FUNCTION test_count_connection_updates()`);
    });
    afterAll(async () => {
      await svc.sql(`DROP TRIGGER test_count_connection_updates ON connections`);
    });
    const connectionUpdates = async () =>
      Number((await svc.sql<{ n: string }>(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS n FROM test_connection_updates`))[0].n);

    it.each(ROUNDS)('sends the refresh token once and holds no database connection while the upstream hangs, then answers all 25 as the one that called it (the upstream %s)', async (_, answerAtLast, status, code) => {
      const { connectionId } = await connected(`acme.busy${status}`);
      const other = (await createTenant(svc, admin, `other ${status}`)).key;
      // The first request hangs until released; any later one is refused at once, as a strict upstream refuses a reused refresh token.
      const sent: string[] = [];
      let release!: () => void;
      respond = (res, form) => {
        sent.push(form.get('refresh_token')!);
        if (sent.length > 1) return answerWith(res, 400, '{"error":"invalid_grant","error_description":"refresh token reused"}');
        release = () => answerAtLast(res);
      };
      const updatesBefore = await connectionUpdates();
      const refreshes = Promise.all(Array.from({ length: 25 }, () => svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin)).then((r) => r)));
      await waitFor(() => sent.length > 0, 'the upstream to be asked');
      await waitFor(async () => (await connectionUpdates()) - updatesBefore >= 25, 'every refresh to try its claim');
      // More refreshes wait than the pool has connections: another tenant is still served. Were
      // they holding the pool, this request would wait for the release that only follows it.
      const served = await svc.http.get('/integrations').set(bearer(other));
      expect(served.status).toBe(200);
      release();
      const answers = await refreshes;
      expect(answers.map((r) => [r.status, r.body.error?.code])).toEqual(Array(25).fill([status, code]));
      if (status === 200) expect(new Set(answers.map((r) => r.body.refreshed_at)).size).toBe(1);
      expect(sent).toEqual(['rt-1']);
      const [row] = await svc.sql<{ refresh_claim: string | null }>(`SELECT refresh_claim FROM connections WHERE id = $1`, [connectionId]);
      expect(row.refresh_claim).toBeNull();
    });

    it('stores nothing from a refresh whose claim lapsed and was taken by another, which stored first: 409 conflict, the newer tokens kept', async () => {
      const { connectionId } = await connected('acme.overtaken');
      const held: ServerResponse[] = [];
      respond = (res, form) => {
        if (held.length === 0) return void held.push(res);
        answerWith(res, 200, JSON.stringify({ access_token: 'at-new', refresh_token: `${form.get('refresh_token')}-new`, token_type: 'Bearer' }));
      };
      const slow = svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin)).then((r) => r);
      await waitFor(() => held.length > 0, 'the upstream to be asked');
      // As if its instance had stalled past the claim's hold.
      await svc.sql(`UPDATE connections SET refresh_claimed_until = now() - interval '1 second' WHERE id = $1`, [connectionId]);
      await svc.http.post(`/connections/${connectionId}/refresh`).set(bearer(admin)).expect(200);
      const [newer] = await svc.sql(`SELECT access_token_sealed, refresh_token_sealed, refreshed_at FROM connections WHERE id = $1`, [connectionId]);
      answerWith(held[0], 200, '{"access_token":"at-stale","refresh_token":"rt-stale","token_type":"Bearer"}');
      expectError(await slow, 409, 'conflict');
      expect(await svc.sql(`SELECT access_token_sealed, refresh_token_sealed, refreshed_at FROM connections WHERE id = $1`, [connectionId])).toEqual([newer]);
    });
  });
});
