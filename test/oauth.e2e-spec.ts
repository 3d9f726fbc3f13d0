/**
 * The OAuth 2.1 / OIDC provider, first part (issue 19): discovery and JWKS at the SPEC's paths,
 * admin and open client registration, client credentials with `svc_at_` tokens that act on the
 * API with exactly their scopes, introspection and revocation, all through `openid-client` as a
 * relying party would, plus raw HTTP for the aliases and the error forms.
 */
import Redis from 'ioredis';
import { createHash, randomBytes, webcrypto } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import * as oidc from 'openid-client';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { CredentialsService } from '../src/auth/credentials.service';
import { OauthSecretsAtRest1732300002100 } from '../src/database/migrations/1732300002100-oauth-secrets-at-rest';
import { OpenidNeverRefused1732300003100 } from '../src/database/migrations/1732300003100-openid-never-refused';
import { WebhooksUser1732300003300 } from '../src/database/migrations/1732300003300-webhooks-user';
import { storedTokenId } from '../src/oidc/oidc-adapter';
import { PROVIDER_BODY_LIMIT } from '../src/oidc/provider-body';
import { OidcJanitor } from '../src/oidc/oidc-janitor';
import { MAX_STREAMS_PER_CREDENTIAL, MAX_STREAMS_PER_USER } from '../src/events/stream-slots';
import { browse as browseOn, field } from './support/browse';
import { Receiver } from './support/receiver';
import { SseClient } from './support/sse';
import { waitFor } from './support/wait';
import { bearer, bootstrapAdmin, createKey, createTenant, REDIS_URL, startApp, TestApp } from './support/app';
import { pollIntervalPassed } from './support/device-flow';
import { badFields, expectError } from './support/envelope';

/** The oidc_models rows (model and where) that hold any of `values` as they are, in the id or anywhere in the payload. */
async function rowsHolding(t: TestApp, values: string[]): Promise<string[]> {
  const rows = await t.sql<{ model: string; id: string; payload: string }>(`SELECT model, id, payload::text AS payload FROM oidc_models`);
  return rows.flatMap((r) => values.filter((v) => r.id.includes(v) || r.payload.includes(v)).map((v) => `${r.model} holds ${v.slice(0, 12)}…`));
}

describe('OAuth provider: discovery, clients, client credentials, introspection, revocation', () => {
  let t: TestApp;
  let admin: string;
  let client: { client_id: string; client_secret: string };
  let rp: oidc.Configuration;

  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => t?.close());

  it('publishes discovery at both well-known paths, every endpoint at its SPEC path', async () => {
    const doc = (await t.http.get('/.well-known/openid-configuration').expect(200)).body;
    expect(doc).toMatchObject({
      issuer: t.url,
      authorization_endpoint: `${t.url}/auth/authorize`,
      token_endpoint: `${t.url}/auth/oauth2/token`,
      userinfo_endpoint: `${t.url}/auth/oauth2/userinfo`,
      revocation_endpoint: `${t.url}/auth/oauth2/revoke`,
      introspection_endpoint: `${t.url}/auth/oauth2/introspect`,
      registration_endpoint: `${t.url}/auth/oauth2/register`,
      jwks_uri: `${t.url}/auth/jwks`,
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
    });
    expect(doc.id_token_signing_alg_values_supported).toEqual(['RS256']);
    expect(doc.grant_types_supported).toEqual(expect.arrayContaining(['authorization_code', 'refresh_token', 'client_credentials']));
    expect(doc.scopes_supported).toEqual(expect.arrayContaining(['openid', 'profile', 'email']));
    // The claims an id_token or userinfo answer can carry, and no other (no logout session: no `sid`).
    expect([...doc.claims_supported].sort()).toEqual(['auth_time', 'email', 'email_verified', 'iss', 'name', 'picture', 'preferred_username', 'sub']);
    const rfc8414 = (await t.http.get('/.well-known/oauth-authorization-server').expect(200)).body;
    expect(rfc8414.issuer).toBe(t.url);
    expect(rfc8414.token_endpoint).toBe(doc.token_endpoint);
    // Bearer tokens only (SPEC 5.1): no DPoP.
    expect(doc).not.toHaveProperty('dpop_signing_alg_values_supported');
    // URLs come from SVC_BASE_URL, whatever Host the request names (a cache in front must not store another origin's).
    const spoofed = (await t.http.get('/.well-known/openid-configuration').set('Host', 'evil.example').set('X-Forwarded-Host', 'evil.example').set('X-Forwarded-Proto', 'https').expect(200)).body;
    expect(spoofed).toEqual(doc);
  });

  it('answers the browser pages\' repeated or unknown query parameters with the page, never a 500', async () => {
    for (const path of ['/auth/device?user_code=&user_code=', '/auth/device?user_code=BCD-FGHJ&user_code=x', '/auth/sign-in?uid=a&uid=b', '/auth/consent?uid=a&uid=b', '/auth?interaction=a&interaction=b', '/auth/device?utm_source=mail', '/auth/sessions?utm_source=mail', '/auth/grants?utm_source=mail']) {
      const res = await t.http.get(path);
      expect(res.status).toBeLessThan(500);
      if (res.status !== 303) expect(res.headers['content-type']).toMatch(/^text\/html/);
    }
  });

  it('answers an id with a NUL character (which nothing stored can have) as unknown, not with a 500', async () => {
    const authorize = await t.http.get('/auth/authorize?client_id=%00&response_type=code&scope=openid');
    expect(authorize.status).toBe(400);
    const token = await t.http.post('/auth/token').type('form').send({ grant_type: 'client_credentials', client_id: 'a\u0000', client_secret: 'x' });
    expect(token.status).toBe(400);
    expect(token.body.error).toBe('invalid_client');
    for (const [path, field] of [['/auth/device?user_code=AB%00', 'user_code'], ['/auth/sign-in?uid=%00', 'uid'], ['/auth/consent?uid=%00', 'uid']]) {
      expect([path, badFields(await t.http.get(path))]).toEqual([path, [field]]);
    }
  });

  it('publishes the RS256 signing key, public parts only, at /auth/jwks and the well-known path', async () => {
    for (const path of ['/auth/jwks', '/.well-known/jwks.json']) {
      const { keys } = (await t.http.get(path).expect(200)).body;
      expect(keys).toHaveLength(1);
      expect(keys[0]).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig', kid: expect.any(String) });
      for (const secret of ['d', 'p', 'q', 'dp', 'dq', 'qi']) expect(keys[0]).not.toHaveProperty(secret);
    }
    const [stored] = await t.sql<{ jwk_sealed: string }>(`SELECT jwk_sealed FROM oidc_signing_keys`);
    expect(stored.jwk_sealed).toMatch(/^v1\./);
  });

  it('registers a first-party client for an admin, with its secret shown once and stored sealed', async () => {
    const member = (await createKey(t, admin, { label: 'member' })).key;
    expectError(await t.http.post('/auth/clients').set(bearer(member)).send({ grant_types: ['client_credentials'] }), 403, 'forbidden');
    const res = await t.http
      .post('/auth/clients')
      .set(bearer(admin))
      .send({ client_name: 'importer', grant_types: ['client_credentials'], scope: 'core.note:read core.note:write', extension_permissions: { 'acme.*': 'read' } });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
    expect(res.body).toMatchObject({ client_id: expect.any(String), client_secret: expect.stringMatching(/^svc_cs_[A-Za-z0-9_-]{43}$/), scope: 'core.note:read core.note:write' });
    client = res.body;
    const rows = await t.sql<{ payload: string }>(`SELECT payload::text FROM oidc_models WHERE model = 'Client' AND id = $1`, [client.client_id]);
    expect(rows[0].payload).not.toContain(client.client_secret);
    expectError(await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['password'] }), 400, 'validation_error');
    // The rest of RFC 7591's metadata is taken, checked by the provider, and kept with the client.
    const described = {
      redirect_uris: ['https://app.example.com/cb'],
      post_logout_redirect_uris: ['https://app.example.com/bye'],
      client_uri: 'https://app.example.com',
      logo_uri: 'https://app.example.com/logo.png',
      policy_uri: 'https://app.example.com/privacy',
      tos_uri: 'https://app.example.com/terms',
      contacts: ['ops@example.com'],
      application_type: 'web',
    };
    const full = await t.http.post('/auth/clients').set(bearer(admin)).send(described);
    expect(full.status).toBe(201);
    expect(full.body).toMatchObject(described);
    const [kept] = await t.sql<{ payload: Record<string, unknown> }>(`SELECT payload FROM oidc_models WHERE model = 'Client' AND id = $1`, [full.body.client_id]);
    expect(kept.payload).toMatchObject(described);
    expectError(await t.http.post('/auth/clients').set(bearer(admin)).send({ ...described, contacts: ['not an address'] }), 400, 'validation_error');
    expectError(await t.http.post('/auth/clients').set(bearer(admin)).send({ ...described, client_uri: 'javascript:alert(1)' }), 400, 'validation_error');
  });

  it('refuses a tenant or an extension grant through open registration (RFC 7591 error form)', async () => {
    const res = await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example.com/cb'], tenant_id: '00000000-0000-0000-0000-000000000001' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'invalid_client_metadata', error_description: expect.any(String) });
    const ok = await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example.com/cb'], scope: 'openid core.note:read' });
    expect(ok.status).toBe(201);
    expect(ok.body.scope).toBe('openid core.note:read');
    // Its secret is the service's own kind, as an admin's client gets.
    expect(ok.body.client_secret).toMatch(/^svc_cs_[A-Za-z0-9_-]{43}$/);
    // RS256 is the only ID token algorithm offered (SPEC 5.6), so no client may ask for another.
    const ps256 = await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example.com/cb'], id_token_signed_response_alg: 'PS256' });
    expect(ps256.status).toBe(400);
    expect(ps256.body.error).toBe('invalid_client_metadata');
    // Metadata of the wrong JSON type is the client's mistake, never the server's (fuzz seed 2049: a 500).
    for (const grant_types of [0, 'client_credentials', { 0: 'client_credentials' }, null]) {
      const odd = await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example.com/cb'], token_endpoint_auth_method: 'none', grant_types });
      expect([grant_types, odd.status, odd.body.error]).toEqual([grant_types, 400, 'invalid_client_metadata']);
    }
    // A client that could never get a token (RFC 7591 2: metadata that does not hold together), openly or by an admin.
    const useless = [
      { redirect_uris: ['https://app.example.com/cb'], response_types: [] },
      { grant_types: ['refresh_token'], response_types: [] },
      { redirect_uris: ['https://app.example.com/cb'], token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [] } },
    ];
    for (const metadata of useless) {
      const open = await t.http.post('/auth/oauth2/register').send(metadata);
      expect([metadata, open.status, open.body.error]).toEqual([metadata, 400, 'invalid_client_metadata']);
    }
    expect(badFields(await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['refresh_token'] }))).toEqual(['grant_types']);
    expect(badFields(await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: [] }))).toEqual(['grant_types']);
    // Lists that disagree would show grants the provider does not act on (it corrects them, RFC 7591 2.1).
    const redirect = { redirect_uris: ['https://app.example.com/cb'] };
    expect(badFields(await t.http.post('/auth/clients').set(bearer(admin)).send({ ...redirect, grant_types: ['refresh_token'], response_types: ['code'] }))).toEqual(['grant_types']);
    expect(badFields(await t.http.post('/auth/clients').set(bearer(admin)).send({ ...redirect, grant_types: ['client_credentials'], response_types: ['code'] }))).toEqual(['grant_types']);
    expect(badFields(await t.http.post('/auth/clients').set(bearer(admin)).send({ ...redirect, grant_types: ['authorization_code', 'client_credentials'], response_types: [] }))).toEqual(['response_types']);
    const consistent = await t.http.post('/auth/clients').set(bearer(admin)).send({ ...redirect, grant_types: ['authorization_code'], response_types: ['code'] }).expect(201);
    expect(consistent.body).toMatchObject({ grant_types: ['authorization_code'], response_types: ['code'] });
    // Open registration answers with the lists the provider acts on, corrected.
    const corrected = await t.http.post('/auth/oauth2/register').send({ ...redirect, grant_types: ['refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' });
    expect([corrected.status, [...corrected.body.grant_types].sort(), corrected.body.response_types]).toEqual([201, ['authorization_code', 'refresh_token'], ['code']]);
    // RFC 7592: the configuration URL it answers with can be read with the registration access token, and only with it.
    const { pathname } = new URL(ok.body.registration_client_uri);
    expect((await t.http.get(pathname).set(bearer(ok.body.registration_access_token)).expect(200)).body.client_id).toBe(ok.body.client_id);
    expect((await t.http.get(pathname).set(bearer('not-the-token'))).body.error).toBe('invalid_token');
    // Read-only: an update or a deletion there is not supported (RFC 7592 2.3: 405), and changes nothing.
    for (const method of ['put', 'delete'] as const) {
      const res = await t.http[method](pathname).set(bearer(ok.body.registration_access_token)).send({ ...ok.body, client_name: 'changed' });
      expect([method, res.status, res.headers.allow, res.body.error]).toEqual([method, 405, 'GET, HEAD', 'invalid_request']);
    }
    expect((await t.http.get(pathname).set(bearer(ok.body.registration_access_token)).expect(200)).body).not.toHaveProperty('client_name');
  });

  it('issues svc_at_ tokens for client credentials through openid-client, with exactly the granted scopes', async () => {
    rp = await oidc.discovery(new URL(t.url), client.client_id, client.client_secret, undefined, { execute: [oidc.allowInsecureRequests] });
    const tokens = await oidc.clientCredentialsGrant(rp, { scope: 'core.note:write' });
    expect(tokens.access_token).toMatch(/^svc_at_/);
    expect(tokens.scope).toBe('core.note:write');
    expect(tokens.expires_in).toBe(3600);

    const note = await t.http.post('/items').set(bearer(tokens.access_token)).send({ type: 'core.note', properties: { title: 'from an app' } });
    expect(note.status).toBe(201);
    expect(note.body.source).toBe(`app:${client.client_id}`);
    // A type the token may not even read is answered as if it did not exist.
    expectError(await t.http.post('/items').set(bearer(tokens.access_token)).send({ type: 'core.task', properties: { title: 'no' } }), 400, 'invalid_type');
    // The admin key's tenant is the client's: the item is there for it.
    await t.http.get(`/items/${note.body.id}`).set(bearer(admin)).expect(200);
  });

  it('delivers webhooks registered with an OAuth token, as that token may read', async () => {
    const receiver = new Receiver();
    const base = await receiver.start();
    try {
      const { access_token } = await oidc.clientCredentialsGrant(rp, { scope: 'core.note:write' });
      await t.http.post('/webhooks').set(bearer(access_token)).send({ url: `${base}/app`, events: ['item.created'] }).expect(201);
      const note = await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'seen by the app' } }).expect(201);
      await t.http.post('/items').set(bearer(admin)).send({ type: 'core.task', properties: { title: 'not for the app' } }).expect(201);
      await waitFor(() => receiver.at('/app').length >= 1, 'the webhook delivery');
      expect(JSON.parse(receiver.at('/app')[0].body).item.id).toBe(note.body.id);
      const [{ tenant_id }] = await t.sql<{ tenant_id: string }>(`SELECT tenant_id FROM items WHERE id = $1`, [note.body.id]);
      const owner = await t.app.get(CredentialsService).principalById(tenant_id, `client:${client.client_id}`);
      expect(owner).toMatchObject({ kind: 'oauth', typePerms: { 'core.note': 'write' } });
      expect(await t.app.get(CredentialsService).principalById('00000000-0000-0000-0000-000000000009', `client:${client.client_id}`)).toBeNull();
    } finally {
      await receiver.stop();
    }
  });

  it('refuses a scope the client was not registered for (invalid_scope) and answers at the /auth/token alias', async () => {
    const res = await t.http.post('/auth/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.task:read' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'invalid_scope' });
    const ok = await t.http.post('/auth/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' });
    expect(ok.status).toBe(200);
    expect(ok.body.access_token).toMatch(/^svc_at_/);
  });

  it('refuses client credentials asking only for scopes it cannot be given (invalid_scope); a partial grant names its scope, and none asked is its default (RFC 6749 3.3, 5.1)', async () => {
    const ask = (scope?: string) =>
      t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', ...(scope === undefined ? {} : { scope }) });
    for (const scope of ['foo', 'foo bar', 'openid', 'core.task:read foo']) {
      const res = await ask(scope);
      expect([scope, res.status, res.body.error, res.body.error_description]).toEqual([scope, 400, 'invalid_scope', expect.any(String)]);
    }
    // An OIDC scope the client registered is refused even beside a usable API scope: its tokens would carry none.
    const oidcToo = (
      await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'worker', grant_types: ['client_credentials'], scope: 'openid email core.note:read' }).expect(201)
    ).body;
    for (const scope of ['openid core.note:read', 'core.note:read email']) {
      const res = await t.http.post('/auth/oauth2/token').auth(oidcToo.client_id, oidcToo.client_secret).type('form').send({ grant_type: 'client_credentials', scope });
      expect([scope, res.status, res.body.error, res.body.scope]).toEqual([scope, 400, 'invalid_scope', scope.includes('openid') ? 'openid' : 'email']);
    }
    // Part of it granted: the response says which part.
    const partial = await ask('core.note:read foo');
    expect([partial.status, partial.body.scope]).toEqual([200, 'core.note:read']);
    // None asked: a token with the client's extension grant alone, as asked, so no scope to name.
    const none = await ask();
    expect(none.status).toBe(200);
    expect(none.body).not.toHaveProperty('scope');
    expect((await t.http.post('/auth/oauth2/introspect').auth(client.client_id, client.client_secret).type('form').send({ token: none.body.access_token })).body).toMatchObject({ active: true });
  });

  it('publishes for introspection and revocation every client authentication the token endpoint takes, and each works there (RFC 8414 2)', async () => {
    const doc = (await t.http.get('/.well-known/oauth-authorization-server').expect(200)).body;
    expect([...doc.token_endpoint_auth_methods_supported].sort()).toEqual(['client_secret_basic', 'client_secret_jwt', 'client_secret_post', 'none', 'private_key_jwt']);
    for (const endpoint of ['introspection', 'revocation']) {
      expect([endpoint, doc[`${endpoint}_endpoint_auth_methods_supported`]]).toEqual([endpoint, doc.token_endpoint_auth_methods_supported]);
      // RFC 8414 2: required beside the JWT methods.
      expect([endpoint, doc[`${endpoint}_endpoint_auth_signing_alg_values_supported`]]).toEqual([endpoint, doc.token_endpoint_auth_signing_alg_values_supported]);
    }
    expect(doc.token_endpoint_auth_signing_alg_values_supported).toEqual(expect.arrayContaining(['HS256', 'RS256']));
    expect((await t.http.get('/.well-known/openid-configuration').expect(200)).body).toMatchObject({
      introspection_endpoint_auth_methods_supported: doc.introspection_endpoint_auth_methods_supported,
      revocation_endpoint_auth_methods_supported: doc.revocation_endpoint_auth_methods_supported,
    });

    // Each method, as a relying party configures it, at both endpoints.
    const keys = (await webcrypto.subtle.generateKey({ name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
    const publicJwk = { ...(await webcrypto.subtle.exportKey('jwk', keys.publicKey)), kid: 'app-key', alg: 'RS256', use: 'sig' };
    const register = async (metadata: Record<string, unknown>) =>
      (await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example.com/cb'], ...metadata }).expect(201)).body as { client_id: string; client_secret?: string };
    const post = (await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'], token_endpoint_auth_method: 'client_secret_post' }).expect(201)).body;
    const none = await register({ token_endpoint_auth_method: 'none' });
    const hmac = await register({ token_endpoint_auth_method: 'client_secret_jwt' });
    const signed = await register({ token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [publicJwk] } });
    const relyingParties: Array<[string, oidc.Configuration]> = [
      ['client_secret_basic', rp],
      ['client_secret_post', await oidc.discovery(new URL(t.url), post.client_id, undefined, oidc.ClientSecretPost(post.client_secret), { execute: [oidc.allowInsecureRequests] })],
      ['none', await oidc.discovery(new URL(t.url), none.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] })],
      ['client_secret_jwt', await oidc.discovery(new URL(t.url), hmac.client_id, undefined, oidc.ClientSecretJwt(hmac.client_secret!), { execute: [oidc.allowInsecureRequests] })],
      ['private_key_jwt', await oidc.discovery(new URL(t.url), signed.client_id, undefined, oidc.PrivateKeyJwt({ key: keys.privateKey, kid: 'app-key' }), { execute: [oidc.allowInsecureRequests] })],
    ];
    expect(relyingParties.map(([method]) => method).sort()).toEqual([...doc.introspection_endpoint_auth_methods_supported].sort());
    for (const [method, party] of relyingParties) {
      expect([method, await oidc.tokenIntrospection(party, 'svc_at_not-a-token')]).toEqual([method, { active: false }]);
      await expect(oidc.tokenRevocation(party, 'svc_at_not-a-token')).resolves.toBeUndefined();
    }
    // The methods are checked, not waved through: a wrong secret in the form is refused at both.
    for (const path of ['/auth/oauth2/introspect', '/auth/oauth2/revoke']) {
      const wrong = await t.http.post(path).type('form').send({ client_id: post.client_id, client_secret: 'not-the-secret', token: 'svc_at_not-a-token' });
      expect([path, wrong.body.error]).toEqual([path, 'invalid_client']);
    }
  });

  it('lets an admin register a client that authenticates with client_secret_jwt, which gets client-credentials tokens with an assertion', async () => {
    const client = (await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'], token_endpoint_auth_method: 'client_secret_jwt', scope: 'core.note:read' }).expect(201)).body;
    expect(client).toMatchObject({ token_endpoint_auth_method: 'client_secret_jwt', client_secret: expect.any(String) });
    const party = await oidc.discovery(new URL(t.url), client.client_id, undefined, oidc.ClientSecretJwt(client.client_secret), { execute: [oidc.allowInsecureRequests] });
    const tokens = await oidc.clientCredentialsGrant(party, { scope: 'core.note:read' });
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
    // The secret in the form is not the method registered.
    const plain = await t.http.post('/auth/token').type('form').send({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret, scope: 'core.note:read' });
    expect([plain.status, plain.body.error]).toEqual([400, 'invalid_client']);
  });

  it('answers the CORS preflight of userinfo for any origin with Authorization, of the token, revocation and introspection endpoints as the provider does, and of nothing else under /auth/', async () => {
    const preflight = (path: string, method = 'GET') =>
      t.http.options(path).set('Origin', 'https://app.example').set('Access-Control-Request-Method', method).set('Access-Control-Request-Headers', 'authorization');
    for (const [path, methods] of [['/auth/oauth2/userinfo', 'GET, POST'], ['/auth/userinfo', 'GET'], ['/AUTH/OAUTH2/USERINFO/', 'GET, POST']]) {
      const res = await preflight(path);
      expect([path, res.status]).toEqual([path, 204]);
      expect(res.headers).toMatchObject({ 'access-control-allow-origin': '*', 'access-control-allow-methods': methods, 'access-control-allow-headers': 'Authorization' });
      // Never with cookies: `*` and credentials do not go together (Fetch standard).
      expect(res.headers).not.toHaveProperty('access-control-allow-credentials');
    }
    // Every userinfo answer may be read by the app, a refusal's challenge included.
    const refused = await t.http.get('/auth/oauth2/userinfo').set('Origin', 'https://app.example').set(bearer('svc_at_not-a-token'));
    expect(refused.status).toBe(401);
    expect(refused.headers).toMatchObject({ 'access-control-allow-origin': '*', 'access-control-expose-headers': 'WWW-Authenticate' });
    const unreadable = await t.http.post('/auth/oauth2/userinfo').set('Origin', 'https://app.example').set('Content-Type', 'text/plain').send('x');
    expect([unreadable.status, unreadable.headers['access-control-allow-origin']]).toEqual([415, '*']);

    for (const path of ['/auth/oauth2/token', '/auth/token', '/auth/oauth2/revoke', '/auth/oauth2/introspect']) {
      const res = await preflight(path, 'POST');
      expect([path, res.status]).toEqual([path, 204]);
      expect(res.headers).toMatchObject({ 'access-control-allow-origin': 'https://app.example', 'access-control-allow-methods': 'POST', 'access-control-allow-headers': 'authorization' });
      // An OPTIONS that is no preflight (an empty requested method is none) is what it is on every path.
      expectError(await t.http.options(path), 404, 'not_found');
      expectError(await t.http.options(path).set('Origin', 'https://app.example').set('Access-Control-Request-Method', ''), 404, 'not_found');
    }
    // Cookie-authenticated routes (the account pages, the forms) and the rest of /auth/ answer no
    // preflight (the API outside /auth/ answers its own: cors.e2e-spec.ts).
    for (const path of ['/auth/sessions/revoke', '/auth/grants/x/revoke', '/auth/keys', '/auth/sign-in', '/auth/authorize/decision', '/auth/clients', '/auth/oauth2/register']) {
      const res = await preflight(path, 'POST');
      expect([path, res.status]).toEqual([path, 404]);
      expect(res.headers).not.toHaveProperty('access-control-allow-origin');
    }
  });

  it('answers item metadata without tags to a token that may not read them, and writes its extensions', async () => {
    const writer = (
      await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'], scope: 'core.note:write', extension_permissions: { 'acme.notes': 'write' } }).expect(201)
    ).body;
    const { access_token } = (
      await t.http.post('/auth/token').auth(writer.client_id, writer.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:write' }).expect(200)
    ).body;
    const item = (await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'metadata' }, tags: ['hidden'] }).expect(201)).body;
    const patched = await t.http.patch(`/items/${item.id}/metadata`).set(bearer(access_token)).send({ extensions: { 'acme.notes': { colour: 'blue' } } });
    expect([patched.status, patched.body]).toEqual([200, { item_id: item.id, extensions: { 'acme.notes': { colour: 'blue' } } }]);
    expect((await t.http.get(`/items/${item.id}/metadata`).set(bearer(access_token)).expect(200)).body).toEqual(patched.body);
    const stored = (await t.http.get(`/items/${item.id}`).set(bearer(admin)).expect(200)).body;
    expect([stored.version, stored.tags, stored.extensions]).toEqual([2, ['hidden'], { 'acme.notes': { colour: 'blue' } }]);
  });

  it('answers a narrower token of the same client 409 for an Idempotency-Key a wider one used, never with its kept response', async () => {
    const tokenFor = async (scope: string) =>
      (await t.http.post('/auth/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope }).expect(200)).body.access_token as string;
    const [wide, narrow] = [await tokenFor('core.note:read core.note:write'), await tokenFor('core.note:read')];
    const send = (token: string) =>
      t.http.post('/items').set(bearer(token)).set('Idempotency-Key', 'scoped-key').send({ type: 'core.note', properties: { title: 'kept per scopes' } });
    const created = await send(wide).expect(201);
    expectError(await send(narrow), 409, 'conflict');
    const replayed = await send(wide).expect(201);
    expect([replayed.headers['idempotent-replayed'], replayed.body.id]).toEqual(['true', created.body.id]);
    // The same scopes asked in another order are the same owner.
    expect((await send(await tokenFor('core.note:write core.note:read')).expect(201)).body.id).toBe(created.body.id);
  });

  it('matches search and bulk filters without tags for a token that may not read them', async () => {
    const tagged = (await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'quarterly report' }, tags: ['confidentialmerger'] }).expect(201)).body;
    const plain = (await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'quarterly plan' } }).expect(201)).body;
    const { access_token } = (
      await t.http.post('/auth/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read core.note:write' }).expect(200)
    ).body;
    const found = async (token: string, q: string) =>
      (await t.http.get('/search').query({ q }).set(bearer(token)).expect(200)).body.results.map((r: { item: { id: string } }) => r.item.id).sort();

    expect(await found(admin, 'confidentialmerger')).toEqual([tagged.id]);
    expect(await found(access_token, 'confidentialmerger')).toEqual([]);
    // An exclusion through a tag would tell it just as well.
    expect(await found(admin, 'quarterly -confidentialmerger')).toEqual([plain.id]);
    expect(await found(access_token, 'quarterly -confidentialmerger')).toEqual([tagged.id, plain.id].sort());
    expect(await found(access_token, 'quarterly report')).toEqual([tagged.id]);
    const dryRun = (token: string) =>
      t.http.post('/items/bulk_action').set(bearer(token)).send({ action: 'transition', to_state: 'archived', dry_run: true, filter: { filter: 'confidentialmerger' } });
    expect((await dryRun(admin).expect(200)).body.matched).toBe(1);
    expect((await dryRun(access_token).expect(200)).body.matched).toBe(0);

    // A phrase of common words across the title and the body: where the tags sit between them in the indexed
    // text, only the untagged twin would have it; the token's own text of both has it.
    const twin = (tags?: string[]) =>
      t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'quokka story of the', body: 'first of all' }, ...(tags && { tags }) }).expect(201);
    const [withTag, without] = [(await twin(['hiddentag'])).body.id, (await twin()).body.id];
    expect(await found(access_token, '"the first"')).toEqual([withTag, without].sort());
    expect(await found(access_token, 'quokka -"the first"')).toEqual([]);
  });

  it('excludes by the item\'s own text, wherever websearch_to_tsquery reads a `-` (after punctuation too), for a token that may not read tags', async () => {
    const reader = (
      await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'], scope: 'core.note:read core.note:write core.task:read' }).expect(201)
    ).body;
    const token = async (scope: string) =>
      (await t.http.post('/auth/token').auth(reader.client_id, reader.client_secret).type('form').send({ grant_type: 'client_credentials', scope }).expect(200)).body.access_token as string;
    const [searcher, bulker] = [await token('core.note:read core.task:read'), await token('core.note:read core.note:write')];
    const note = (
      await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'Wombat note', body: 'the wombat digs burrows' }, tags: ['secrettagalpha'] }).expect(201)
    ).body;
    const found = async (who: string, q: string) =>
      (await t.http.get('/search').query({ type: 'core.note', q }).set(bearer(who)).expect(200)).body.results.map((r: { item: { id: string } }) => r.item.id);
    const matched = async (who: string, filter: string) =>
      (await t.http.post('/items/bulk_action').set(bearer(who)).send({ action: 'transition', to_state: 'archived', dry_run: true, filter: { type: 'core.note', filter } }).expect(200)).body.matched;
    // Were the tag read in any of these, the answer would differ from `wombat(-nosuchtag)`'s and tell it.
    const excluding = ['wombat -secrettagalpha', 'wombat(-secrettagalpha)', 'wombat!-secrettagalpha', 'wombat&-secrettagalpha', 'wombat|-secrettagalpha', 'wombat"note"-secrettagalpha'];
    for (const q of [...excluding, 'wombat(-nosuchtag)']) {
      expect([q, await found(searcher, q), await matched(bulker, q)]).toEqual([q, [note.id], 1]);
    }
    // The admin may read tags, and its tag excludes the note however the `-` is written.
    for (const q of excluding) expect([q, await found(admin, q), await matched(admin, q)]).toEqual([q, [], 0]);
    // An excluded phrase after punctuation (`!( 'digs' <-> 'burrows' )`) is left to the exact test, not sent to the index.
    const zebrafish = (await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'Zebrafish tank', body: 'the zebrafish swims' } }).expect(201)).body;
    await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'Zebrafish burrow', body: 'a zebrafish that digs burrows' } }).expect(201);
    for (const q of ['zebrafish -"digs burrows"', 'zebrafish(-"digs burrows")', 'zebrafish!-"digs burrows"']) {
      expect([q, await found(admin, q), await found(searcher, q), await matched(admin, q)]).toEqual([q, [zebrafish.id], [zebrafish.id], 1]);
    }
    // A `-` inside a word negates nothing: `wombat,-digs` is the phrase 'wombat' <-> 'digs'.
    expect(await found(searcher, 'wombat,-digs')).toEqual([note.id]);
  });

  it('ranks without tags for a token that may not read them: a tagged twin scores as its untagged one', async () => {
    const twin = (tags: string[]) =>
      t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'ocelot numbers', body: 'ocelot quarterly' }, tags }).expect(201);
    const [tagged, plain] = [(await twin(['ocelot'])).body, (await twin([])).body];
    const { access_token } = (
      await t.http.post('/auth/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' }).expect(200)
    ).body;
    const scores = async (token: string) => {
      const { results } = (await t.http.get('/search').query({ q: 'ocelot' }).set(bearer(token)).expect(200)).body;
      return Object.fromEntries(results.map((r: { item: { id: string }; relevance_score: number }) => [r.item.id, r.relevance_score]));
    };
    const forAdmin = await scores(admin);
    expect(forAdmin[tagged.id]).toBeGreaterThan(forAdmin[plain.id]);
    const forToken = await scores(access_token);
    expect(Object.keys(forToken).sort()).toEqual([tagged.id, plain.id].sort());
    expect(forToken[tagged.id]).toBeCloseTo(forToken[plain.id], 6);
  });

  it('introspects and revokes (RFC 7662, RFC 7009); a revoked token is 401 at once', async () => {
    const { access_token } = await oidc.clientCredentialsGrant(rp, { scope: 'core.note:read' });
    const active = await oidc.tokenIntrospection(rp, access_token);
    expect(active).toMatchObject({ active: true, scope: 'core.note:read', client_id: client.client_id, exp: expect.any(Number) });
    await t.http.get('/items').set(bearer(access_token)).expect(200);
    // Another client learns nothing about it.
    const other = (await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'] }).expect(201)).body;
    const foreign = await t.http.post('/auth/oauth2/introspect').auth(other.client_id, other.client_secret).type('form').send({ token: access_token });
    expect(foreign.body).toEqual({ active: false });
    // Nor can it revoke it: 200 as for any token (SPEC 5.7), and the token lives on.
    await t.http.post('/auth/oauth2/revoke').auth(other.client_id, other.client_secret).type('form').send({ token: access_token }).expect(200);
    expect((await oidc.tokenIntrospection(rp, access_token)).active).toBe(true);

    await oidc.tokenRevocation(rp, access_token);
    expect((await oidc.tokenIntrospection(rp, access_token)).active).toBe(false);
    expectError(await t.http.get('/items').set(bearer(access_token)), 401, 'unauthorized');
    // Revoking what is not a token is still 200; introspecting it is inactive, never an error.
    await t.http.post('/auth/oauth2/revoke').auth(client.client_id, client.client_secret).type('form').send({ token: 'svc_at_nothing' }).expect(200);
    const unknown = await t.http.post('/auth/oauth2/introspect').auth(client.client_id, client.client_secret).type('form').send({ token: 'garbage' });
    expect(unknown.status).toBe(200);
    expect(unknown.body).toEqual({ active: false });
    // So is a JWT-shaped value, such as an id_token an app revokes at logout.
    const jwt = 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.';
    const revoked = await t.http.post('/auth/oauth2/revoke').auth(client.client_id, client.client_secret).type('form').send({ token: jwt });
    expect([revoked.status, revoked.text]).toEqual([200, '']);
    const structured = await t.http.post('/auth/oauth2/introspect').auth(client.client_id, client.client_secret).type('form').send({ token: jwt });
    expect([structured.status, structured.body]).toEqual([200, { active: false }]);
    // Client authentication still comes first.
    const stranger = await t.http.post('/auth/oauth2/introspect').auth(client.client_id, 'wrong').type('form').send({ token: jwt });
    expect([stranger.status, stranger.body.error]).toEqual([401, 'invalid_client']);
  });

  it('answers 401 expired_token for an expired access token and 401 unauthorized for an unknown one', async () => {
    const { access_token } = await oidc.clientCredentialsGrant(rp, { scope: 'core.note:read' });
    await t.sql(
      `UPDATE oidc_models SET payload = jsonb_set(payload, '{exp}', to_jsonb(extract(epoch from now())::int - 5)), expires_at = now() - interval '5 seconds' WHERE id = $1`,
      [storedTokenId(access_token)],
    );
    expectError(await t.http.get('/items').set(bearer(access_token)), 401, 'expired_token');
    expectError(await t.http.get('/items').set(bearer('svc_at_unknown')), 401, 'unauthorized');
    // The janitor keeps an expired token a day (so it still reads as expired), then removes it.
    expect(await t.app.get(OidcJanitor).sweep()).toBe(0);
    await t.sql(`UPDATE oidc_models SET expires_at = now() - interval '2 days' WHERE id = $1`, [storedTokenId(access_token)]);
    expect(await t.app.get(OidcJanitor).sweep()).toBeGreaterThanOrEqual(1);
    expectError(await t.http.get('/items').set(bearer(access_token)), 401, 'unauthorized');
  });

  it('converts a token stored in the clear before the secrets-at-rest migration, which keeps working', async () => {
    const { access_token } = await oidc.clientCredentialsGrant(rp, { scope: 'core.note:read' });
    // As the adapter stored it before: the value as the id and as the payload's jti.
    const [{ n }] = await t.sql<{ n: number }>(
      `WITH u AS (UPDATE oidc_models SET id = $2, payload = payload || jsonb_build_object('jti', $2::text) WHERE model = 'ClientCredentials' AND id = $1 RETURNING 1)
       SELECT count(*)::int AS n FROM u`,
      [storedTokenId(access_token), access_token],
    );
    expect(n).toBe(1);
    expect(await rowsHolding(t, [access_token])).not.toEqual([]);
    const runner = t.app.get(DataSource).createQueryRunner();
    try {
      await new OauthSecretsAtRest1732300002100().up(runner);
    } finally {
      await runner.release();
    }
    expect(await rowsHolding(t, [access_token])).toEqual([]);
    expect(await t.sql(`SELECT payload ? 'jti' AS jti FROM oidc_models WHERE model = 'ClientCredentials' AND id = $1`, [storedTokenId(access_token)])).toEqual([{ jti: false }]);
    await t.http.get('/items').set(bearer(access_token)).expect(200);
    expect((await oidc.tokenIntrospection(rp, access_token)).active).toBe(true);
  });

  it('answers a bare POST (no body, no Content-Type) to the browser forms with a refusal, not a 500', async () => {
    for (const path of ['/auth/authorize/decision', '/auth/oauth2/consent', '/auth/sign-in', '/auth/device/consent', '/auth/sessions/revoke']) {
      const res = await t.http.post(path);
      expect([path, res.status >= 400 && res.status < 500]).toEqual([path, true]);
    }
  });

  it('refuses client_credentials to a public client: at registration, and for one stored before the rule', async () => {
    const publicCc = { token_endpoint_auth_method: 'none', grant_types: ['client_credentials'] };
    expectError(await t.http.post('/auth/clients').set(bearer(admin)).send(publicCc), 400, 'validation_error');
    const open = await t.http.post('/auth/oauth2/register').send({ ...publicCc, redirect_uris: ['https://app.example/cb'] });
    expect(open.status).toBe(400);
    expect(open.body.error).toBe('invalid_client_metadata');

    // A public client, then turned into one allowed the grant behind the provider's back.
    const pub = (await t.http.post('/auth/clients').set(bearer(admin)).send({ token_endpoint_auth_method: 'none', redirect_uris: ['https://app.example/cb'] }).expect(201)).body;
    await t.sql(`UPDATE oidc_models SET payload = jsonb_set(payload, '{grant_types}', '["client_credentials"]') WHERE model = 'Client' AND id = $1`, [pub.client_id]);
    const res = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'client_credentials', client_id: pub.client_id, scope: '*:write' });
    // The provider refuses to load it, as it would refuse to register it.
    expect([res.status, res.body.error, res.body.access_token]).toEqual([400, 'invalid_client_metadata', undefined]);
  });

  it('redirects after a logout without an id_token_hint only for a client an admin registered', async () => {
    const bye = 'https://app.example/bye';
    /** Where a logout that names the client and asks to go to `bye` ends, in a browser without a session; sent as a GET or a form post (RP-Initiated Logout 1.0 §2). */
    const logout = async (clientId: string, method: 'get' | 'post' = 'get') => {
      const browser = request.agent(t.url);
      const params = { client_id: clientId, post_logout_redirect_uri: bye };
      // No session: the provider's own self-submitting form, which is not to be framed either.
      // A post is answered with the GET it stands for.
      const get = method === 'get' ? `/auth/logout?${new URLSearchParams(params)}` : (await browser.post('/auth/logout').type('form').send(params).expect(303)).headers.location;
      const form = await browser.get(get).expect(200);
      expect([form.headers['x-frame-options'], form.headers['content-security-policy']]).toEqual(['DENY', expect.stringContaining("frame-ancestors 'none'")]);
      const action = new URL(/<form[^>]*action="([^"]+)"/.exec(form.text)![1].replace(/&amp;/g, '&'), t.url);
      const out = await browser.post(action.pathname).type('form').send({ xsrf: field(form.text, 'xsrf'), logout: 'yes' });
      expect(out.status).toBe(303);
      return out.headers.location;
    };
    // An openly registered client's URI could be anyone's: the logout ends at the signed-out page.
    const open = await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example/cb'], post_logout_redirect_uris: [bye], token_endpoint_auth_method: 'none' }).expect(201);
    expect(await logout(open.body.client_id)).toBe(`${t.url}/auth/logout/success`);

    const admins = await t.http.post('/auth/clients').set(bearer(admin)).send({ token_endpoint_auth_method: 'none', redirect_uris: ['https://app.example/cb'], post_logout_redirect_uris: [bye] }).expect(201);
    expect(await logout(admins.body.client_id)).toBe(bye);
    expect(await logout(admins.body.client_id, 'post')).toBe(bye);
  });

  it('takes plain http redirect URIs to loopback hosts only', async () => {
    for (const uri of ['http://app.example/cb', 'http://10.0.0.5/cb']) {
      expectError(await t.http.post('/auth/clients').set(bearer(admin)).send({ token_endpoint_auth_method: 'none', redirect_uris: [uri] }), 400, 'validation_error');
      const open = await t.http.post('/auth/oauth2/register').send({ redirect_uris: [uri] });
      expect([uri, open.status, open.body.error]).toEqual([uri, 400, 'invalid_redirect_uri']);
    }
    const logout = await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example/cb'], post_logout_redirect_uris: ['http://app.example/bye'] });
    expect([logout.status, logout.body.error]).toEqual([400, 'invalid_redirect_uri']);
    expect(logout.body.error_description).toMatch(/loopback/); // the rule broken, not the provider's stock text
    for (const uri of ['http://127.0.0.1:8080/cb', 'http://localhost/cb', 'http://[::1]:9000/cb', 'https://app.example/cb']) {
      await t.http.post('/auth/clients').set(bearer(admin)).send({ token_endpoint_auth_method: 'none', redirect_uris: [uri] }).expect(201);
    }
  });

  it('refuses through open registration longer lists than POST /auth/clients takes, and redirect URIs RFC 8252 and RFC 6749 rule out (RFC 7591 form)', async () => {
    const register = (metadata: object) => t.http.post('/auth/oauth2/register').send(metadata);
    const many = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i));
    const cb = ['https://app.example/cb'];
    // The provider names a fault of redirect_uris invalid_redirect_uri, any other invalid_client_metadata.
    for (const [metadata, error] of [
      [{ redirect_uris: many(21, (i) => `https://app.example/cb/${i}`) }, 'invalid_redirect_uri'],
      [{ redirect_uris: cb, post_logout_redirect_uris: many(21, (i) => `https://app.example/bye/${i}`) }, 'invalid_client_metadata'],
      [{ redirect_uris: cb, contacts: many(21, (i) => `ops${i}@example.com`) }, 'invalid_client_metadata'],
    ] as const) {
      const res = await register(metadata);
      expect([res.status, res.body.error, res.body.error_description]).toEqual([400, error, expect.stringContaining('at most 20')]);
    }
    await register({ redirect_uris: many(20, (i) => `https://app.example/cb/${i}`) }).expect(201);

    const native = { application_type: 'native', token_endpoint_auth_method: 'none' };
    const refused = ['urn:ietf:wg:oauth:2.0:oob', 'myapp:/cb', 'https://user:pass@app.example/cb', 'http://127.0.0.1:0/cb', 'http://127.0.0.1:08080/cb', 'http://[::1]:0080/cb', `https://app.example/${'a'.repeat(2000)}`];
    for (const uri of refused) {
      const res = await register({ ...native, redirect_uris: [uri] });
      expect([uri, res.status, res.body.error]).toEqual([uri, 400, 'invalid_redirect_uri']);
    }
    const logout = await register({ ...native, redirect_uris: ['com.example.app:/cb'], post_logout_redirect_uris: ['myapp:/bye'] });
    expect([logout.status, logout.body.error]).toEqual([400, 'invalid_redirect_uri']);
    for (const uri of ['com.example.app:/cb', 'http://127.0.0.1:8080/cb', 'http://[::1]/cb', 'https://app.example/cb']) await register({ ...native, redirect_uris: [uri] }).expect(201);
  });

  it('holds an openly registered client\'s name to the rule POST /auth/clients applies, and its other text to its lengths (RFC 7591 form)', async () => {
    const register = (metadata: object) => t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example/cb'], ...metadata });
    // What the pages show as the app's name: not a screenful, nor text that reads as something else ("Notes daily app").
    for (const client_name of ['x'.repeat(201), 'x'.repeat(45000), 'Notes \u202Eppa yliad', 'Notes \u2066app', 'Notes\napp', 'Notes\u0007', '   ', '']) {
      const res = await register({ client_name });
      expect([client_name.slice(0, 20), res.status, res.body.error, res.body.error_description]).toEqual([client_name.slice(0, 20), 400, 'invalid_client_metadata', expect.stringContaining('client_name')]);
    }
    const named = async (client_name: string) => (await register({ client_name }).expect(201)).body.client_name;
    expect(await named('😀'.repeat(200))).toBe('😀'.repeat(200)); // characters, counted as code points
    expect(await named('Ünïcödé notes ❤️')).toBe('Ünïcödé notes ❤️');
    // The other text POST /auth/clients bounds, to its lengths.
    const long = `https://app.example/${'a'.repeat(2000)}`;
    for (const [metadata, key] of [
      [{ client_uri: long }, 'client_uri'],
      [{ logo_uri: long }, 'logo_uri'],
      [{ policy_uri: long }, 'policy_uri'],
      [{ tos_uri: long }, 'tos_uri'],
      [{ contacts: [`${'a'.repeat(320)}@example.com`] }, 'contacts'],
      [{ scope: `openid${' core.note:read'.repeat(300)}` }, 'scope'],
    ] as const) {
      const res = await register(metadata);
      expect([key, res.status, res.body.error, res.body.error_description]).toEqual([key, 400, 'invalid_client_metadata', expect.stringMatching(new RegExp(`^${key}.*at most`))]);
    }
    await register({ client_uri: 'https://app.example/about', logo_uri: 'https://app.example/logo.png', contacts: ['ops@example.com'], scope: 'openid core.note:read' }).expect(201);
  });

  it('answers invalid_client for a wrong client secret (RFC 6749 form)', async () => {
    const res = await t.http.post('/auth/oauth2/token').auth(client.client_id, 'not-the-secret').type('form').send({ grant_type: 'client_credentials' });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: 'invalid_client', error_description: expect.any(String) });
    // RFC 6749 5.2: the client tried the Authorization header, so the answer names its scheme.
    expect(res.headers['www-authenticate']).toBe('Basic realm="svc"');
  });

  it('answers a token request whose body it cannot read with a 4xx, not a 500', async () => {
    for (const path of ['/auth/oauth2/token', '/auth/token', '/auth/device/token']) {
      const res = await t.http.post(path).auth(client.client_id, client.client_secret).set('Content-Type', 'text/plain').send('grant_type=client_credentials');
      expect([path, res.status >= 400 && res.status < 500]).toEqual([path, true]);
    }
    // More than the provider reads is 413, as elsewhere, in the RFC 6749 form; as much is read.
    const form = 'grant_type=client_credentials&scope=core.note:read&pad=';
    const filler = (bytes: number) => form + 'x'.repeat(bytes - form.length);
    const over = await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send(filler(PROVIDER_BODY_LIMIT + 1));
    expect([over.status, over.body.error]).toEqual([413, 'invalid_request']);
    await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send(filler(PROVIDER_BODY_LIMIT)).expect(200);
    // A GET's body is no one's to read.
    await t.http.get('/.well-known/openid-configuration').type('form').send(filler(PROVIDER_BODY_LIMIT + 1)).expect(200);
    // A compressed form would be read as its compressed bytes: refused for what it is.
    for (const encoding of ['gzip', 'zstd']) {
      const packed = await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form')
        .set('Content-Encoding', encoding).send(gzipSync(Buffer.from('grant_type=client_credentials&scope=core.note:read')));
      expect([encoding, packed.status, packed.body.error]).toEqual([encoding, 415, 'invalid_request']);
    }
    // Every POST endpoint of the provider says so in the API description, for generated clients.
    const paths = (await t.http.get('/openapi.json').expect(200)).body.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>;
    const providerPosts = ['/auth/oauth2/token', '/auth/token', '/auth/device/token', '/auth/device', '/auth/oauth2/revoke', '/auth/oauth2/introspect', '/auth/oauth2/register', '/auth/logout/confirm'];
    expect(providerPosts.filter((path) => !paths[path]?.post?.responses['413'] || !paths[path]?.post?.responses['415'])).toEqual([]);
  });

  it('reads its bodies as the API does: UTF-8 only (415), bytes or %-escapes that are not UTF-8 refused (400), not read as U+FFFD; a BOM dropped', async () => {
    const post = (path: string, body: Buffer, type: string, basic?: { client_id: string; client_secret: string }) =>
      fetch(`${t.url}${path}`, {
        method: 'POST',
        body,
        headers: { 'Content-Type': type, ...(basic ? { Authorization: `Basic ${Buffer.from(`${basic.client_id}:${basic.client_secret}`).toString('base64')}` } : {}) },
      });
    const registration = (name: Buffer, uri = Buffer.from('https://app.example/cb')) =>
      Buffer.concat([Buffer.from('{"token_endpoint_auth_method":"none","redirect_uris":["'), uri, Buffer.from('"],"client_name":"'), name, Buffer.from('"}')]);
    const clients = async () => Number((await t.sql<{ n: string }>(`SELECT count(*) AS n FROM oidc_models WHERE model = 'Client'`))[0].n);
    const before = await clients();
    const refusals: Array<[string, Buffer, string, number, typeof client?]> = [
      ['/auth/oauth2/register', registration(Buffer.from('App\xff\xfe', 'latin1')), 'application/json', 400],
      ['/auth/oauth2/register', registration(Buffer.from('x'), Buffer.from('https://app.example/c\xffb', 'latin1')), 'application/json', 400],
      ['/auth/oauth2/register', registration(Buffer.from('caf\xe9', 'latin1')), 'application/json; charset=latin1', 415],
      ['/auth/oauth2/register', Buffer.from(registration(Buffer.from('app')).toString(), 'utf16le'), 'application/json; charset=utf-16le', 415],
      ['/auth/oauth2/register', registration(Buffer.from('+ADw-b+AD4-app')), 'application/json; charset=utf-7', 415],
      ['/auth/oauth2/token', Buffer.from('grant_type=client_credentials&scope=core.note:read\xff', 'latin1'), 'application/x-www-form-urlencoded', 400, client],
      ['/auth/oauth2/token', Buffer.from('grant_type=client_credentials&scope=core.note%3Aread%FF'), 'application/x-www-form-urlencoded', 400, client],
      ['/auth/oauth2/token', Buffer.from('grant_type=client_credentials&scope=core.note:read'), 'application/x-www-form-urlencoded; charset=iso-8859-1', 415, client],
      ['/auth/oauth2/introspect', Buffer.from('token=svc_at_%ED%A0%80'), 'application/x-www-form-urlencoded', 400, client],
      ['/auth/oauth2/revoke', Buffer.from('token=svc_at_%C3'), 'application/x-www-form-urlencoded', 400, client],
      ['/auth/device', Buffer.from('client_id=x&scope=openid%FF'), 'application/x-www-form-urlencoded', 400],
    ];
    for (const [path, body, type, status, basic] of refusals) {
      const res = await post(path, body, type, basic);
      expect([path, type, res.status, await res.json()]).toEqual([path, type, status, { error: 'invalid_request', error_description: expect.any(String) }]);
    }
    expect(await clients()).toBe(before);
    // A BOM (RFC 8259 8.1 lets a reader ignore it) is dropped, as on the API's routes.
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const registered = await post('/auth/oauth2/register', Buffer.concat([bom, registration(Buffer.from('Caf\u00e9 app'))]), 'application/json; charset=UTF-8');
    expect([registered.status, ((await registered.json()) as { client_name: string }).client_name]).toEqual([201, 'Café app']);
    const token = await post('/auth/oauth2/token', Buffer.concat([bom, Buffer.from('grant_type=client_credentials&scope=core.note%3Aread')]), 'application/x-www-form-urlencoded', client);
    expect(token.status).toBe(200);
  });

  it('answers unauthorized_client for a grant type the client was not registered for, and invalid_client without client authentication (RFC 6749 5.2)', async () => {
    for (const form of [{ grant_type: 'refresh_token', refresh_token: 'svc_rt_x' }, { grant_type: 'authorization_code', code: 'x', redirect_uri: 'https://app.example.com/cb', code_verifier: 'x'.repeat(43) }]) {
      const res = await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send(form);
      expect([form.grant_type, res.status, res.body.error]).toEqual([form.grant_type, 400, 'unauthorized_client']);
    }
    const anonymous: Array<[string, Record<string, string>]> = [
      ['/auth/oauth2/token', { grant_type: 'client_credentials' }],
      ['/auth/oauth2/introspect', { token: 'svc_at_x' }],
      ['/auth/oauth2/revoke', { token: 'svc_at_x' }],
    ];
    // Without the Authorization header, 400 (SPEC 7); with it, 401 and the challenge (RFC 6749 5.2).
    for (const [path, form] of anonymous) {
      const res = await t.http.post(path).type('form').send(form);
      expect([path, res.status, res.body.error, res.headers['www-authenticate']]).toEqual([path, 400, 'invalid_client', undefined]);
    }
    const inBody = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: 'not-the-secret' });
    expect([inBody.status, inBody.body.error, inBody.headers['www-authenticate']]).toEqual([400, 'invalid_client', undefined]);
    const unknown = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'client_credentials', client_id: 'no-such-client' });
    expect([unknown.status, unknown.body.error]).toEqual([400, 'invalid_client']);
    // HTTP Basic that names no client.
    const noId = await t.http.post('/auth/oauth2/token').set('Authorization', `Basic ${Buffer.from(':a secret').toString('base64')}`).type('form').send({ grant_type: 'client_credentials' });
    expect([noId.status, noId.body.error, noId.headers['www-authenticate']]).toEqual([401, 'invalid_client', 'Basic realm="svc"']);
  });

  it('answers invalid_client, 401 with the Basic challenge, for an Authorization header that holds no client credentials (RFC 6749 5.2)', async () => {
    const endpoints: Array<[string, Record<string, string>]> = [
      ['/auth/oauth2/token', { grant_type: 'client_credentials' }],
      ['/auth/oauth2/introspect', { token: 'svc_at_x' }],
      ['/auth/oauth2/revoke', { token: 'svc_at_x' }],
      ['/auth/device', { scope: 'openid' }],
    ];
    const headers = [
      `Basic ${Buffer.from('test').toString('base64')}`, // no colon
      'Basic ',
      'Basic',
      'Basic not*base64',
      'Digest x',
      'Bearer abc',
      `Basic ${Buffer.from(`${client.client_id}:`).toString('base64')}`, // curl -u 'someclient:'
      `Basic ${Buffer.from('someclient:').toString('base64')}`,
      `Basic ${Buffer.from('%zz:secret').toString('base64')}`, // not form-encoded
    ];
    for (const [path, form] of endpoints) {
      for (const authorization of headers) {
        const res = await t.http.post(path).set('Authorization', authorization).type('form').send(form);
        expect([path, authorization, res.status, res.body.error, res.headers['www-authenticate']]).toEqual([path, authorization, 401, 'invalid_client', 'Basic realm="svc"']);
      }
    }
    // What a wrong secret gets, for comparison; and a readable header with another fault stays invalid_request.
    const wrong = await t.http.post('/auth/oauth2/introspect').auth(client.client_id, 'not-the-secret').type('form').send({ token: 'svc_at_x' });
    expect([wrong.status, wrong.body.error, wrong.headers['www-authenticate']]).toEqual([401, 'invalid_client', 'Basic realm="svc"']);
    const twoWays = await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', client_secret: client.client_secret });
    expect([twoWays.status, twoWays.body.error, twoWays.headers['www-authenticate']]).toEqual([400, 'invalid_request', undefined]);
    const mismatch = await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', client_id: 'another-client' });
    expect([mismatch.status, mismatch.body.error, mismatch.headers['www-authenticate']]).toEqual([400, 'invalid_request', undefined]);
  });

  it('refuses client_credentials through open registration: such a client has no tenant for its tokens to act in', async () => {
    const ccOnly = { grant_types: ['client_credentials'], response_types: [], redirect_uris: [] };
    const withCode = { grant_types: ['authorization_code', 'refresh_token', 'client_credentials'], redirect_uris: ['https://app.example.com/cb'] };
    for (const metadata of [ccOnly, withCode]) {
      const res = await t.http.post('/auth/oauth2/register').send(metadata);
      expect([metadata.grant_types.join(), res.status, res.body.error]).toEqual([metadata.grant_types.join(), 400, 'invalid_client_metadata']);
      expect(res.body.error_description).toMatch(/tenant/);
    }
    // An admin's client belongs to the admin's tenant, and may.
    await t.http.post('/auth/clients').set(bearer(admin)).send(ccOnly).expect(201);
    // One registered openly before the rule still loads, for its users' consents.
    const earlier = (await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example.com/cb'] }).expect(201)).body;
    await t.sql(`UPDATE oidc_models SET payload = jsonb_set(payload, '{grant_types}', $2::jsonb) WHERE model = 'Client' AND id = $1`, [earlier.client_id, JSON.stringify(withCode.grant_types)]);
    const read = await t.http.get(new URL(earlier.registration_client_uri).pathname).set(bearer(earlier.registration_access_token));
    expect([read.status, read.body.grant_types]).toEqual([200, withCode.grant_types]);
  });
});

describe('OAuth provider: authorization code with PKCE, sign-in and partial consent', () => {
  let t: TestApp;
  let admin: string;
  let rp: oidc.Configuration;
  const redirectUri = 'https://app.example.com/callback';

  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
    await t.http.post('/users').set(bearer(admin)).send({ email: 'ada@example.com', password: 'correct horse battery', name: 'Ada Lovelace', picture: 'https://example.com/ada.png' }).expect(201);
    const client = await t.http
      .post('/auth/clients')
      .set(bearer(admin))
      .send({ client_name: 'Notes app', redirect_uris: [redirectUri], scope: 'openid profile email core.note:read core.note:write', token_endpoint_auth_method: 'none' })
      .expect(201);
    expect(client.body.client_secret).toBeUndefined();
    rp = await oidc.discovery(new URL(t.url), client.body.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
  });
  afterAll(async () => t?.close());

  const browse = (agent: ReturnType<typeof request.agent>, path: string) => browseOn(agent, t.url, path);

  /** Ada (signing in as `email`) asks for openid and core.note:read and reaches the consent page. */
  const toConsent = async (state: string, email = 'ada@example.com') => {
    const agent = request.agent(t.url);
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(rp, { redirect_uri: redirectUri, scope: 'openid core.note:read', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state });
    const signIn = await browse(agent, url.pathname + url.search);
    const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(signIn.page!, 'uid'), csrf: field(signIn.page!, 'csrf'), email, password: 'correct horse battery' });
    const consent = await browse(agent, new URL(signedIn.headers.location, t.url).pathname);
    return { agent, verifier, form: { uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf') } };
  };
  /** Ada signs in and approves the request: the callback URL the browser is sent to, and the PKCE verifier. */
  const authorize = async (state: string) => {
    const { agent, verifier, form } = await toConsent(state);
    const decision = await agent.post('/auth/authorize/decision').type('form').send({ ...form, decision: 'approve' });
    const back = await browse(agent, new URL(decision.headers.location, t.url).pathname);
    return { callback: new URL(back.leftTo!), verifier };
  };
  const tokenRequest = (form: Record<string, string>) => t.http.post('/auth/oauth2/token').type('form').send({ client_id: rp.clientMetadata().client_id, ...form });

  /**
   * One authorization of `app` in the browser `agent`, as `email`: signs in when the browser is
   * not signed in (or `prompt: 'login'` asks again), submits the provider's self-posting form
   * that signs the browser's previous user out, and approves the consent page when one is shown
   * (with only the `tick`ed scopes when given); the tokens the app then gets.
   */
  const connect = async (
    agent: ReturnType<typeof request.agent>,
    app: oidc.Configuration,
    o: { scope?: string; email?: string; prompt?: string; redirect?: string; tick?: string[]; params?: Record<string, string> } = {},
  ) => {
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const url = oidc.buildAuthorizationUrl(app, {
      redirect_uri: o.redirect ?? redirectUri,
      scope: o.scope ?? 'openid core.note:read',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      ...(o.prompt ? { prompt: o.prompt } : {}),
      ...o.params,
    });
    let at = await browse(agent, url.pathname + url.search);
    for (let step = 0; step < 4 && !at.leftTo; step++) {
      const signOut = /<form method="post" action="[^"]*(\/auth\/logout\/confirm)"/.exec(at.page!)?.[1];
      const form = new URLSearchParams(signOut ? { xsrf: field(at.page!, 'xsrf'), logout: field(at.page!, 'logout') } : { uid: field(at.page!, 'uid'), csrf: field(at.page!, 'csrf') });
      if (at.path.startsWith('/auth/sign-in')) Object.entries({ email: o.email ?? 'ada@example.com', password: 'correct horse battery' }).forEach(([k, v]) => form.append(k, v));
      else if (!signOut) {
        form.append('decision', 'approve');
        if (o.tick) [...o.tick.map((s) => ['scope', s]), ['scopes_shown', '1']].forEach(([k, v]) => form.append(k, v));
      }
      const res = await agent.post(signOut ?? (at.path.startsWith('/auth/sign-in') ? '/auth/sign-in' : '/auth/authorize/decision')).type('form').send(form.toString());
      if (res.status !== 303) throw new Error(`${at.path}: ${res.status} ${res.text.slice(0, 200)}`);
      const next = new URL(res.headers.location, t.url);
      at = await browse(agent, next.pathname + next.search);
    }
    return oidc.authorizationCodeGrant(app, new URL(at.leftTo!), { pkceCodeVerifier: verifier, expectedState: state });
  };
  /** A public client of the tenant, as a relying party. */
  const registerApp = async (clientName: string, scope: string, redirectUris = [redirectUri]) => {
    const { client_id } = (await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: clientName, redirect_uris: redirectUris, scope, token_endpoint_auth_method: 'none' }).expect(201)).body;
    return oidc.discovery(new URL(t.url), client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
  };
  /** The `auth.grant.revoked` rows of a grant. */
  const revocationsOf = (grantId: string) =>
    t.sql<{ user_id: string; details: object }>(`SELECT user_id::text, details FROM audit_events WHERE action = 'auth.grant.revoked' AND grant_id = $1`, [grantId]);
  /** The grant a code (or any token) belongs to. */
  const grantOf = async (value: string) => (await t.sql<{ grant_id: string }>(`SELECT grant_id FROM oidc_models WHERE id = $1`, [storedTokenId(value)]))[0].grant_id;
  /** Signs `agent` in to the account pages as Ada. */
  const accountSignIn = async (agent: ReturnType<typeof request.agent>) => {
    const form = await agent.get('/auth/sign-in?return_to=/auth/grants').expect(200);
    await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email: 'ada@example.com', password: 'correct horse battery' }).expect(303);
  };

  it('signs in, lets the user untick scopes, and issues tokens with exactly what was granted', async () => {
    const agent = request.agent(t.url);
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const url = oidc.buildAuthorizationUrl(rp, {
      redirect_uri: redirectUri,
      scope: 'openid profile email core.note:read core.note:write',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
    });
    const signIn = await browse(agent, url.pathname + url.search);
    expect(signIn.path).toMatch(/^\/auth\/sign-in\?uid=/);
    expect(signIn.page).toContain('Notes app');

    const uid = field(signIn.page!, 'uid');
    const wrong = await agent.post('/auth/sign-in').type('form').send({ uid, csrf: field(signIn.page!, 'csrf'), email: 'ada@example.com', password: 'wrong password!' });
    expect(wrong.status).toBe(401);
    const forged = await agent.post('/auth/sign-in').type('form').send({ uid, csrf: 'forged', email: 'ada@example.com', password: 'correct horse battery' });
    expect(forged.status).toBe(403);
    const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid, csrf: field(wrong.text, 'csrf'), email: 'ada@example.com', password: 'correct horse battery' });
    expect(signedIn.status).toBe(303);

    const consent = await browse(agent, new URL(signedIn.headers.location, t.url).pathname);
    expect(consent.path).toMatch(/^\/auth\/consent\?uid=/);
    for (const literal of ['core.note:read', 'core.note:write', 'items of type core.note', 'openid', 'profile', 'email']) expect(consent.page).toContain(literal);

    const decision = await agent
      .post('/auth/authorize/decision')
      .type('form')
      .send(`uid=${encodeURIComponent(field(consent.page!, 'uid'))}&csrf=${encodeURIComponent(field(consent.page!, 'csrf'))}&decision=approve&scope=openid&scope=profile&scope=core.note%3Aread`);
    if (decision.status !== 303) throw new Error(decision.text);
    const back = await browse(agent, new URL(decision.headers.location, t.url).pathname);
    expect(back.leftTo).toMatch(new RegExp(`^${redirectUri}\\?code=`));

    const tokens = await oidc.authorizationCodeGrant(rp, new URL(back.leftTo!), { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.access_token).toMatch(/^svc_at_/);
    expect(tokens.refresh_token).toMatch(/^svc_rt_/);
    expect(tokens.scope!.split(' ').sort()).toEqual(['core.note:read', 'openid', 'profile']);
    const claims = tokens.claims()!;
    expect(claims).toMatchObject({ iss: t.url, aud: rp.clientMetadata().client_id, name: 'Ada Lovelace', preferred_username: 'ada@example.com', picture: 'https://example.com/ada.png' });
    expect(claims).not.toHaveProperty('email');

    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
    const info = await oidc.fetchUserInfo(rp, tokens.access_token, claims.sub);
    expect(info).toEqual({ sub: claims.sub, name: 'Ada Lovelace', preferred_username: 'ada@example.com', picture: 'https://example.com/ada.png' });
    expect((await t.http.get('/auth/userinfo').set(bearer(tokens.access_token)).expect(200)).body).toEqual(info);
    // RFC 6749 3.1: parameters the server does not know are ignored, as at the provider's other endpoints.
    expect((await t.http.get('/auth/userinfo?utm_source=mail').set(bearer(tokens.access_token)).expect(200)).body).toEqual(info);
    const noToken = await t.http.get('/auth/userinfo');
    expect(noToken.status).toBe(401);
    expect(noToken.body.error).toBe('invalid_request');
    expect(noToken.headers['www-authenticate']).toBe('Bearer realm="svc"');
    expect((await t.http.post('/auth/oauth2/userinfo').set(bearer('svc_at_nope'))).body.error).toBe('invalid_token');
    // RFC 6750 2.2: a POST may send the token in its form instead, and only one way.
    expect((await t.http.post('/auth/oauth2/userinfo').type('form').send({ access_token: tokens.access_token }).expect(200)).body).toEqual(info);
    expect((await t.http.post('/auth/oauth2/userinfo').type('form').send({ access_token: 'svc_at_nope' })).body.error).toBe('invalid_token');
    const twice = await t.http.post('/auth/oauth2/userinfo').set(bearer(tokens.access_token)).type('form').send({ access_token: tokens.access_token });
    expect([twice.status, twice.body.error]).toEqual([400, 'invalid_request']);
    // A body it does not take is refused in the same form its clients parse, not the API's envelope.
    const json = await t.http.post('/auth/oauth2/userinfo').set(bearer(tokens.access_token)).send({});
    expect([json.status, json.body]).toEqual([415, { error: 'invalid_request', error_description: expect.stringContaining('Content-Type') }]);
    expectError(await t.http.post('/items').set(bearer(tokens.access_token)).send({ type: 'core.note', properties: { title: 'x' } }), 403, 'type_not_permitted');

    const refreshed = await oidc.refreshTokenGrant(rp, tokens.refresh_token!);
    expect(refreshed.refresh_token).toMatch(/^svc_rt_/);
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    expect(refreshed.scope!.split(' ').sort()).toEqual(['core.note:read', 'openid', 'profile']);
    await t.http.get('/items').set(bearer(refreshed.access_token)).expect(200);

    // Reusing the rotated refresh token: token_reuse_detected, and the whole grant is dead.
    const refresh = (token: string) =>
      t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: token, client_id: rp.clientMetadata().client_id });
    const reuse = await refresh(tokens.refresh_token!);
    expect(reuse.status).toBe(400);
    expect(reuse.body).toMatchObject({ error: 'token_reuse_detected', error_description: expect.any(String) });
    expectError(await t.http.get('/items').set(bearer(refreshed.access_token)), 401, 'unauthorized');
    expect((await refresh(refreshed.refresh_token!)).body.error).toBe('invalid_grant');
    expect((await refresh(tokens.refresh_token!)).body.error).toBe('token_reuse_detected');
    const revocations = (await t.http.get('/audit?action=auth.grant.revoked').set(bearer(admin)).expect(200)).body.events;
    expect(revocations[0]).toMatchObject({ action: 'auth.grant.revoked', client_id: rp.clientMetadata().client_id, details: { by: 'token_reuse' } });
  });

  it('stores access tokens, refresh tokens and codes so that reading oidc_models gives none of them, and they all still work', async () => {
    const { callback, verifier } = await authorize('at-rest');
    const code = callback.searchParams.get('code')!;
    expect(await rowsHolding(t, [code])).toEqual([]);
    const tokens = await oidc.authorizationCodeGrant(rp, callback, { pkceCodeVerifier: verifier, expectedState: 'at-rest' });
    const [accessToken, refreshToken] = [tokens.access_token, tokens.refresh_token!];
    expect(await rowsHolding(t, [accessToken, refreshToken, code])).toEqual([]);
    // Each is there, under the digest of its value.
    const stored = await t.sql<{ model: string }>(`SELECT model FROM oidc_models WHERE id = ANY($1) ORDER BY model`, [[accessToken, refreshToken, code].map(storedTokenId)]);
    expect(stored.map((r) => r.model)).toEqual(['AccessToken', 'AuthorizationCode', 'RefreshToken']);

    await t.http.get('/items').set(bearer(accessToken)).expect(200);
    const introspect = (token: string) => t.http.post('/auth/oauth2/introspect').type('form').send({ token, client_id: rp.clientMetadata().client_id });
    expect((await introspect(accessToken)).body).toMatchObject({ active: true, token_type: 'Bearer', client_id: rp.clientMetadata().client_id });
    expect((await introspect(refreshToken)).body).toMatchObject({ active: true, client_id: rp.clientMetadata().client_id });

    const refreshed = await oidc.refreshTokenGrant(rp, refreshToken);
    expect(await rowsHolding(t, [refreshed.access_token, refreshed.refresh_token!, accessToken, refreshToken])).toEqual([]);
    await t.http.get('/items').set(bearer(refreshed.access_token)).expect(200);
    await oidc.tokenRevocation(rp, refreshed.access_token);
    expectError(await t.http.get('/items').set(bearer(refreshed.access_token)), 401, 'unauthorized');
    expect((await introspect(refreshed.access_token)).body).toEqual({ active: false });

    const reuse = await tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken });
    expect([reuse.status, reuse.body.error]).toEqual([400, 'token_reuse_detected']);
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshed.refresh_token! })).body.error).toBe('invalid_grant');
    // The digest itself is no token.
    const byDigest = await tokenRequest({ grant_type: 'refresh_token', refresh_token: storedTokenId(refreshToken) });
    expect(byDigest.body.error).toBe('invalid_grant');
  });

  it('refuses an account form posted with a token bound to someone else\'s planted nonce cookie', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'csrf@example.com', password: 'correct horse battery', name: 'Target' }).expect(201);
    const cookie = (res: request.Response, name: string) => ((res.headers['set-cookie'] as unknown as string[]) ?? []).map((c) => c.split(';')[0]).find((c) => c.startsWith(`${name}=`))!;
    // The attacker's own nonce and the token the sign-in page gave it.
    const attackerPage = await request(t.url).get('/auth/sign-in').expect(200);
    const [attackerNonce, attackerToken] = [cookie(attackerPage, 'svc_form_nonce'), field(attackerPage.text, 'csrf')];
    // The victim signs in in their own browser.
    const victim = request.agent(t.url);
    const form = await victim.get('/auth/sign-in?return_to=/auth/sessions').expect(200);
    const login = await victim.post('/auth/sign-in').type('form').send({ return_to: '/auth/sessions', csrf: field(form.text, 'csrf'), email: 'csrf@example.com', password: 'correct horse battery' }).expect(303);
    const account = cookie(login, 'svc_account');

    const planted = await request(t.url).post('/auth/sessions/revoke').set('Cookie', `${attackerNonce}; ${account}`).type('form').send({ csrf: attackerToken });
    expect(planted.status).toBe(403);
    await victim.get('/auth/sessions').expect(200); // still signed in
    const own = await victim.get('/auth/sessions').expect(200);
    expect((await victim.post('/auth/sessions/revoke').type('form').send({ csrf: field(own.text, 'csrf') })).status).toBe(303);
  });

  it('ends the account pages\' sign-in in every browser when the user signs out everywhere', async () => {
    const signIn = async (agent: ReturnType<typeof request.agent>) => {
      const form = await agent.get('/auth/sign-in?return_to=/auth/grants').expect(200);
      const res = await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email: 'ada@example.com', password: 'correct horse battery' });
      expect([res.status, res.headers.location]).toEqual([303, '/auth/grants']);
    };
    const [laptop, phone] = [request.agent(t.url), request.agent(t.url)];
    await signIn(laptop);
    await signIn(phone);
    await laptop.get('/auth/grants').expect(200);
    await phone.get('/auth/grants').set('Accept', 'application/json').expect(200);

    const sessions = await laptop.get('/auth/sessions').expect(200);
    const out = await laptop.post('/auth/sessions/revoke').type('form').send({ csrf: field(sessions.text, 'csrf') });
    expect(out.status).toBe(303);

    // The phone still sends its cookie, which the server never told it to drop.
    const page = await phone.get('/auth/grants');
    expect([page.status, page.headers.location]).toEqual([303, '/auth/sign-in?return_to=%2Fauth%2Fgrants']);
    expectError(await phone.get('/auth/grants').set('Accept', 'application/json'), 401, 'unauthorized');
    expectError(await phone.post('/auth/sessions/revoke').set('Accept', 'application/json').send({}), 401, 'unauthorized');
    expect((await laptop.get('/auth/grants')).status).toBe(303);

    // Signing in again, at once, works.
    await signIn(phone);
    await phone.get('/auth/grants').expect(200);
    expect((await laptop.get('/auth/grants')).status).toBe(303);
  });

  it('answers the account pages\' form posts refused (signed out, already revoked) with pages linking on, and JSON requests with the envelope', async () => {
    const { callback, verifier } = await authorize('refused-forms');
    await oidc.authorizationCodeGrant(rp, callback, { pkceCodeVerifier: verifier, expectedState: 'refused-forms' });
    const account = request.agent(t.url);
    await accountSignIn(account);
    const grantsPage = await account.get('/auth/grants').expect(200);
    const csrf = field(grantsPage.text, 'csrf');
    const grantId = /action="\/auth\/grants\/([^/"]+)\/revoke"/.exec(grantsPage.text)![1];
    const page = (res: request.Response, status: number, title: string, href: string) => {
      expect([res.status, res.headers['content-type'], /<h1>([^<]*)<\/h1>/.exec(res.text)?.[1]]).toEqual([status, 'text/html; charset=utf-8', title]);
      expect(res.text).toContain(`<a href="${href}">`);
    };

    await account.post(`/auth/grants/${grantId}/revoke`).type('form').send({ csrf }).expect(303);
    // The same form sent again (a second tab, the back button): the grant is gone.
    page(await account.post(`/auth/grants/${grantId}/revoke`).type('form').send({ csrf }), 404, 'Already revoked', '/auth/grants');
    expectError(await account.post(`/auth/grants/${grantId}/revoke`).send({}), 404, 'not_found');
    expectError(await account.post(`/auth/grants/${grantId}/revoke`).set('Accept', 'application/json').type('form').send({ csrf }), 404, 'not_found');

    // The account pages' sign-in ends (signing out everywhere); the forms still on screen are sent.
    const sessions = await account.get('/auth/sessions').expect(200);
    await account.post('/auth/sessions/revoke').type('form').send({ csrf: field(sessions.text, 'csrf') }).expect(303);
    page(await account.post(`/auth/grants/${grantId}/revoke`).type('form').send({ csrf }), 401, 'Signed out', '/auth/sign-in?return_to=%2Fauth%2Fgrants');
    page(await account.post('/auth/sessions/revoke').type('form').send({ csrf: field(sessions.text, 'csrf') }), 401, 'Signed out', '/auth/sign-in?return_to=%2Fauth%2Fsessions');
    page(await account.post('/auth/keys').type('form').send({ csrf, form_nonce: 'made-up-by-the-client-00', label: 'x' }), 401, 'Signed out', '/auth/sign-in?return_to=%2Fauth%2Fsecurity');
    expectError(await account.post(`/auth/grants/${grantId}/revoke`).send({}), 401, 'unauthorized');
    expectError(await account.post('/auth/sessions/revoke').set('Accept', 'application/json').type('form').send({ csrf }), 401, 'unauthorized');
    expectError(await account.delete(`/auth/grants/${grantId}`), 401, 'unauthorized');
  });

  it('lets one of several requests presenting one code or refresh token at once use it; the others revoke the grant', async () => {
    const [{ id: ada }] = await t.sql<{ id: string }>(`SELECT id::text FROM users WHERE email = 'ada@example.com'`);
    const first = await authorize('race-code');
    const code = { grant_type: 'authorization_code', code: first.callback.searchParams.get('code')!, redirect_uri: redirectUri, code_verifier: first.verifier };
    const codeGrant = await grantOf(code.code);
    const exchanges = await Promise.all(Array.from({ length: 8 }, () => tokenRequest(code)));
    expect(exchanges.map((r) => r.body.error ?? r.status).sort()).toEqual([200, ...Array(7).fill('invalid_grant')]);
    const won = exchanges.find((r) => r.status === 200)!;
    expectError(await t.http.get('/items').set(bearer(won.body.access_token)), 401, 'unauthorized');
    // One grant revoked, audited once (SPEC 6.4), however many requests lost.
    expect(await revocationsOf(codeGrant)).toEqual([{ user_id: ada, details: { by: 'token_reuse' } }]);

    const second = await authorize('race-refresh');
    const tokens = await oidc.authorizationCodeGrant(rp, second.callback, { pkceCodeVerifier: second.verifier, expectedState: 'race-refresh' });
    const refreshes = await Promise.all(Array.from({ length: 8 }, () => tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! })));
    expect(refreshes.map((r) => r.body.error ?? r.status).sort()).toEqual([200, ...Array(7).fill('token_reuse_detected')]);
    const rotated = refreshes.find((r) => r.status === 200)!;
    expectError(await t.http.get('/items').set(bearer(rotated.body.access_token)), 401, 'unauthorized');
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: rotated.body.refresh_token })).body.error).toBe('invalid_grant');
    expect(await revocationsOf(await grantOf(tokens.refresh_token!))).toEqual([{ user_id: ada, details: { by: 'token_reuse' } }]);
  });

  it('audits a grant revoked by several requests at once, on the account pages and at the revocation endpoint, once: by the request that deleted it', async () => {
    const [{ id: ada }] = await t.sql<{ id: string }>(`SELECT id::text FROM users WHERE email = 'ada@example.com'`);
    const { callback, verifier } = await authorize('revoke-race');
    const tokens = await oidc.authorizationCodeGrant(rp, callback, { pkceCodeVerifier: verifier, expectedState: 'revoke-race' });
    const grantId = await grantOf(tokens.refresh_token!);
    const account = request.agent(t.url);
    await accountSignIn(account);
    const onPage = [
      () => account.post(`/auth/grants/${grantId}/revoke`).send({}),
      () => account.post(`/auth/grants/${grantId}/revoke`).send({}),
      () => account.delete(`/auth/grants/${grantId}`).set('Accept', 'application/json'),
      () => account.delete(`/auth/grants/${grantId}`).set('Accept', 'application/json'),
    ];
    const atEndpoint = () => t.http.post('/auth/oauth2/revoke').type('form').send({ token: tokens.refresh_token!, client_id: rp.clientMetadata().client_id });
    // The grant's row is held locked until every request waits to delete it, so that each one has
    // found the grant before any deletes it: the race at its widest, not left to timing.
    let blocked: string[] = [];
    const waiting = async () => {
      await t.sql('SELECT pg_stat_clear_snapshot()'); // pg_stat_activity is read once per transaction otherwise
      blocked = (await t.sql<{ query: string }>(`SELECT query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).map((r) => r.query);
      const pageDeletes = blocked.filter((q) => q.includes(`OR (model = 'Grant' AND id = $1)`)).length;
      return pageDeletes === onPage.length && blocked.length > pageDeletes;
    };
    let answers: request.Response[];
    await t.sql('BEGIN');
    try {
      await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND id = $1 FOR UPDATE`, [grantId]);
      const all = Promise.all([...onPage.map((send) => send()), atEndpoint()]);
      await waitFor(waiting, 'every revocation to wait for the grant\'s row');
      await t.sql('COMMIT');
      answers = await all;
    } catch (err) {
      await t.sql('ROLLBACK');
      throw new Error(`${String(err)}; blocked then: ${JSON.stringify(blocked)}`);
    }
    const endpoint = answers.pop()!;
    expect(endpoint.status).toBe(200);
    // A page request that found the grant gone under it answers as for no such grant.
    const deleted = answers.filter((r) => r.status === 200);
    expect(deleted.length).toBeLessThanOrEqual(1);
    for (const r of answers.filter((a) => a.status !== 200)) expectError(r, 404, 'not_found');
    for (const r of deleted) expect(r.body).toEqual({ id: grantId, revoked: true });
    expect(await revocationsOf(grantId)).toEqual([{ user_id: ada, details: { by: deleted.length ? 'user' : 'revocation_endpoint' } }]);
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND id = $1`, [grantId])).toEqual([]);
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
  });

  it('audits the revocation of a grant whose code was used twice (SPEC 6.4)', async () => {
    const [{ id: ada }] = await t.sql<{ id: string }>(`SELECT id::text FROM users WHERE email = 'ada@example.com'`);
    const { callback, verifier } = await authorize('code-twice');
    const code = { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: redirectUri, code_verifier: verifier };
    const grantId = await grantOf(code.code);
    const tokens = (await tokenRequest(code).expect(200)).body;
    expect((await tokenRequest(code)).body.error).toBe('invalid_grant');
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    expect(await revocationsOf(grantId)).toEqual([{ user_id: ada, details: { by: 'token_reuse' } }]);
  });

  it('revokes the grant for a rotated refresh token replayed with a scope it lacks; another client presenting it hears a plain invalid_grant, and nothing is revoked', async () => {
    const replayed = async (state: string) => {
      const { callback, verifier } = await authorize(state);
      const first = await oidc.authorizationCodeGrant(rp, callback, { pkceCodeVerifier: verifier, expectedState: state });
      return { first, current: await oidc.refreshTokenGrant(rp, first.refresh_token!), grantId: await grantOf(first.refresh_token!) };
    };
    // Another client (confidential, of the same tenant) with the rotated token.
    const other = (await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'Other app', redirect_uris: [redirectUri], scope: 'openid core.note:read' }).expect(201)).body;
    const a = await replayed('replay-other-client');
    const byOther = await t.http
      .post('/auth/oauth2/token')
      .auth(other.client_id, other.client_secret)
      .type('form')
      .send({ grant_type: 'refresh_token', refresh_token: a.first.refresh_token! });
    expect([byOther.status, byOther.body.error]).toEqual([400, 'invalid_grant']);
    expect(byOther.body.error_description).not.toMatch(/used|revoked/);
    await t.http.get('/items').set(bearer(a.current.access_token)).expect(200);
    expect(await revocationsOf(a.grantId)).toEqual([]);

    // The client it was issued to, asking for a scope the grant does not hold: still a reuse.
    const b = await replayed('replay-wider-scope');
    const wider = await tokenRequest({ grant_type: 'refresh_token', refresh_token: b.first.refresh_token!, scope: 'openid email' });
    expect([wider.status, wider.body.error]).toEqual([400, 'token_reuse_detected']);
    expectError(await t.http.get('/items').set(bearer(b.current.access_token)), 401, 'unauthorized');
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: b.current.refresh_token! })).body.error).toBe('invalid_grant');
    expect(await revocationsOf(b.grantId)).toHaveLength(1);
  });

  it('revokes the grant for a rotated refresh token replayed after its own lifetime, while its tombstone is kept; once the janitor removed it, invalid_grant', async () => {
    const [{ id: ada }] = await t.sql<{ id: string }>(`SELECT id::text FROM users WHERE email = 'ada@example.com'`);
    /** The token's lifetime passed `ago` (as when an app keeps refreshing for a month after it was rotated). */
    const expire = (token: string, ago: string) =>
      t.sql(`UPDATE oidc_models SET expires_at = now() - $2::interval, payload = jsonb_set(payload, '{exp}', to_jsonb(extract(epoch from now() - $2::interval)::bigint)) WHERE id = $1`, [
        storedTokenId(token),
        ago,
      ]);
    const late = await authorize('late-replay');
    const stolen = await oidc.authorizationCodeGrant(rp, late.callback, { pkceCodeVerifier: late.verifier, expectedState: 'late-replay' });
    const grantId = await grantOf(stolen.refresh_token!);
    const current = await oidc.refreshTokenGrant(rp, stolen.refresh_token!);
    await expire(stolen.refresh_token!, '1 second');
    const reuse = await tokenRequest({ grant_type: 'refresh_token', refresh_token: stolen.refresh_token! });
    expect([reuse.status, reuse.body.error]).toEqual([400, 'token_reuse_detected']);
    // What the answer says is so: the grant and every token of it are gone, and the revocation is audited.
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: current.refresh_token! })).body.error).toBe('invalid_grant');
    expectError(await t.http.get('/items').set(bearer(current.access_token)), 401, 'unauthorized');
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND id = $1`, [grantId])).toEqual([]);
    expect(await revocationsOf(grantId)).toEqual([{ user_id: ada, details: { by: 'token_reuse' } }]);
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: stolen.refresh_token! })).body.error).toBe('token_reuse_detected');

    // A day after the used token expired the janitor deletes it: it is unknown then, and revokes nothing.
    const older = await authorize('too-late-replay');
    const gone = await oidc.authorizationCodeGrant(rp, older.callback, { pkceCodeVerifier: older.verifier, expectedState: 'too-late-replay' });
    const kept = await oidc.refreshTokenGrant(rp, gone.refresh_token!);
    await expire(gone.refresh_token!, '2 days');
    await t.app.get(OidcJanitor).sweep();
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE id = $1`, [storedTokenId(gone.refresh_token!)])).toEqual([]);
    const unknown = await tokenRequest({ grant_type: 'refresh_token', refresh_token: gone.refresh_token! });
    expect([unknown.status, unknown.body.error]).toEqual([400, 'invalid_grant']);
    await oidc.refreshTokenGrant(rp, kept.refresh_token!);
  });

  it('renews a grant\'s lifetime with each consent to the app, not with refreshes, and issues no refresh token that outlives its grant', async () => {
    const app = await registerApp('Yearly app', 'openid core.note:read');
    const browser = request.agent(t.url);
    const first = await connect(browser, app);
    const grantId = await grantOf(first.refresh_token!);
    const endOf = async (id: string) =>
      (await t.sql<{ exp: number; expires_at: number }>(`SELECT (payload->>'exp')::int AS exp, floor(extract(epoch from expires_at))::int AS expires_at FROM oidc_models WHERE id = $1`, [id]))[0];
    const now = async () => (await t.sql<{ now: number }>(`SELECT floor(extract(epoch from now()))::int AS now`))[0].now;
    const [{ iat }] = await t.sql<{ iat: number }>(`SELECT (payload->>'iat')::int AS iat FROM oidc_models WHERE id = $1`, [grantId]);
    /** Moves the grant's end to `interval` from now. */
    const endGrantIn = (interval: string) =>
      t.sql(
        `WITH e AS (SELECT floor(extract(epoch from now() + $2::interval))::int AS exp)
         UPDATE oidc_models SET expires_at = to_timestamp(e.exp), payload = jsonb_set(payload, '{exp}', to_jsonb(e.exp)) FROM e WHERE id = $1`,
        [grantId, interval],
      );
    // The first consent was a year ago, less a day.
    await endGrantIn('1 day');
    const grantEnd = await endOf(grantId);

    // A refresh leaves the grant's end where it is, and the refresh token it issues ends with the grant, not 30 days on
    // (within the provider's whole seconds, read apart).
    const refreshed = await oidc.refreshTokenGrant(app, first.refresh_token!);
    expect(await endOf(grantId)).toEqual(grantEnd);
    const capped = await endOf(storedTokenId(refreshed.refresh_token!));
    expect(capped.exp).toBeLessThanOrEqual(grantEnd.exp + 1);
    expect(capped.expires_at).toBeLessThanOrEqual(grantEnd.expires_at + 1);
    // So does one a code exchange issues, where the user was not asked again.
    const signedIn = await connect(browser, app);
    expect((await endOf(storedTokenId(signedIn.refresh_token!))).exp).toBeLessThanOrEqual(grantEnd.exp + 1);

    // The user approving the app again gives the grant its year from then; it is still the grant first given.
    const before = await now();
    const again = await connect(browser, app, { prompt: 'consent' });
    expect(await grantOf(again.refresh_token!)).toBe(grantId);
    const renewed = await endOf(grantId);
    expect(renewed.exp).toBeGreaterThanOrEqual(before + 365 * 24 * 3600);
    expect(renewed.expires_at).toBeGreaterThanOrEqual(before + 365 * 24 * 3600);
    expect((await endOf(storedTokenId(again.refresh_token!))).exp).toBeGreaterThanOrEqual(before + 30 * 24 * 3600);
    const account = request.agent(t.url);
    await accountSignIn(account);
    const listed = (await account.get(`/auth/grants/${grantId}`).set('Accept', 'application/json').expect(200)).body;
    expect(listed).toMatchObject({ created_at: new Date(iat * 1000).toISOString(), expires_at: new Date(renewed.exp * 1000).toISOString() });
    const last = await oidc.refreshTokenGrant(app, refreshed.refresh_token!);

    // Ten minutes from its end, the grant's access tokens (an hour otherwise) say they last ten minutes, as its refresh tokens do.
    await endGrantIn('10 minutes');
    const closing = await endOf(grantId);
    const late = await oidc.refreshTokenGrant(app, last.refresh_token!);
    expect(late.expires_in).toBeGreaterThan(0);
    expect(late.expires_in).toBeLessThanOrEqual(601);
    expect((await endOf(storedTokenId(late.access_token))).exp).toBeLessThanOrEqual(closing.exp + 1);
  });

  it('answers userinfo by the OIDC scopes its access token was issued with, not by all its grant holds (OIDC Core 5.3)', async () => {
    const app = await registerApp('Profile reader', 'openid profile email core.note:read');
    const agent = request.agent(t.url);
    const full = await connect(agent, app, { scope: 'openid profile email' });
    const apiOnly = await connect(agent, app, { scope: 'core.note:read' });
    expect([apiOnly.scope, apiOnly.id_token]).toEqual(['core.note:read', undefined]);
    for (const res of [await t.http.get('/auth/oauth2/userinfo').set(bearer(apiOnly.access_token)), await t.http.post('/auth/oauth2/userinfo').set(bearer(apiOnly.access_token))]) {
      expect([res.status, res.body.error]).toEqual([403, 'insufficient_scope']);
      expect(res.headers['www-authenticate']).toContain('error="insufficient_scope"');
    }
    const openidOnly = await connect(agent, app, { scope: 'openid core.note:read' });
    const { sub } = openidOnly.claims()!;
    expect((await t.http.get('/auth/userinfo').set(bearer(openidOnly.access_token)).expect(200)).body).toEqual({ sub });
    expect((await t.http.get('/auth/userinfo').set(bearer(full.access_token)).expect(200)).body).toEqual({
      sub,
      name: 'Ada Lovelace',
      preferred_username: 'ada@example.com',
      picture: 'https://example.com/ada.png',
      email: 'ada@example.com',
      email_verified: false,
    });
    // An admin vouches for the address: the claim says so from the next request, in a refreshed id_token too.
    await t.http.patch(`/users/${sub}`).set(bearer(admin)).send({ email_verified: true }).expect(200);
    expect((await t.http.get('/auth/userinfo').set(bearer(full.access_token)).expect(200)).body.email_verified).toBe(true);
    const refreshed = await oidc.refreshTokenGrant(app, full.refresh_token!);
    expect(refreshed.claims()).toMatchObject({ email: 'ada@example.com', email_verified: true });
    await t.http.patch(`/users/${sub}`).set(bearer(admin)).send({ email_verified: false }).expect(200);
  });

  it('lists in a token response\'s scope exactly what its access token carries: a refresh may ask for less, a re-consent may withdraw (RFC 6749 5.1)', async () => {
    const app = await registerApp('Scope reporter', 'openid email core.note:read');
    const agent = request.agent(t.url);
    const first = await connect(agent, app, { scope: 'openid email core.note:read' });
    expect(first.scope!.split(' ').sort()).toEqual(['core.note:read', 'email', 'openid']);
    const refresh = async (refreshToken: string, scope?: string) =>
      (await tokenRequest({ client_id: app.clientMetadata().client_id, grant_type: 'refresh_token', refresh_token: refreshToken, ...(scope ? { scope } : {}) }).expect(200)).body;
    // A refresh asking for the API scope alone: no id_token, no OIDC scope, and no userinfo.
    const narrowed = await refresh(first.refresh_token!, 'core.note:read');
    expect([narrowed.scope, narrowed.id_token]).toEqual(['core.note:read', undefined]);
    expect((await t.http.get('/auth/userinfo').set(bearer(narrowed.access_token))).status).toBe(403);

    // Consenting again without email withdraws it from the grant: the next tokens no longer have it anywhere.
    await connect(agent, app, { scope: 'openid email core.note:read', prompt: 'consent', tick: ['openid', 'core.note:read'] });
    const after = await refresh(narrowed.refresh_token);
    expect(after.scope.split(' ').sort()).toEqual(['core.note:read', 'openid']);
    const claims = JSON.parse(Buffer.from(after.id_token.split('.')[1], 'base64url').toString());
    expect(claims).not.toHaveProperty('email');
    expect((await t.http.get('/auth/userinfo').set(bearer(after.access_token)).expect(200)).body).toEqual({ sub: claims.sub });
    // Nor does userinfo answer it to the token issued before.
    expect((await t.http.get('/auth/userinfo').set(bearer(first.access_token)).expect(200)).body).toEqual({ sub: claims.sub });
  });

  it('refuses a NUL character or a lone surrogate in what the provider keeps (an authorization request, a logout, a registration, a device request) with invalid_request, never a 500', async () => {
    const client_id = rp.clientMetadata().client_id;
    const authorization = { client_id, response_type: 'code', redirect_uri: redirectUri, scope: 'openid', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' };
    for (const param of ['state', 'nonce', 'login_hint']) {
      const res = await t.http.get(`/auth/authorize?${new URLSearchParams({ ...authorization, [param]: 'a\u0000b' })}`);
      expect([param, res.status]).toEqual([param, 400]);
      expect(res.text).toContain('invalid_request');
    }
    const logout = await t.http.get('/auth/logout?state=%00');
    expect([logout.status, logout.text]).toEqual([400, expect.stringContaining('invalid_request')]);
    for (const client_name of ['a\u0000b', 'a\ud800b']) {
      const registration = await t.http.post('/auth/oauth2/register').send({ client_name, redirect_uris: [redirectUri] });
      expect([registration.status, registration.body.error]).toEqual([400, 'invalid_request']);
    }
    const tv = (await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], token_endpoint_auth_method: 'none' }).expect(201)).body;
    const device = await t.http.post('/auth/device').type('form').send({ client_id: tv.client_id, scope: 'openid', acr_values: '\u0000' });
    expect([device.status, device.body.error]).toEqual([400, 'invalid_request']);
  });

  it('answers a NUL in a logout (GET, form post, confirmation), with or without a provider session, with the HTML error page and the service\'s headers', async () => {
    /** The provider's HTML 400 page, with the headers every answer of the service carries and those of its pages. */
    const refusedPage = (res: request.Response, what: string) => {
      expect([what, res.status, res.headers['content-type']]).toEqual([what, 400, expect.stringMatching(/^text\/html/)]);
      expect(res.text).toContain('invalid_request');
      expect(res.headers).toMatchObject({ 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'x-frame-options': 'DENY', 'x-request-id': expect.any(String) });
      expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    };
    const html = { Accept: 'text/html' };
    const signedIn = request.agent(t.url);
    await connect(signedIn, rp);
    for (const [who, agent] of [['no session', request.agent(t.url)], ['signed in', signedIn]] as const) {
      refusedPage(await agent.get('/auth/logout?state=%00').set(html), `${who}: GET`);
      refusedPage(await agent.get(`/auth/logout?${new URLSearchParams({ client_id: rp.clientMetadata().client_id, state: 'a\u0000b' })}`).set(html), `${who}: GET with a client`);
      // A form post is refused by the input policy before it is sent on to the GET it stands for, as POST /auth/authorize's is.
      const posted = await agent.post('/auth/logout').set(html).type('form').send({ state: 'a\u0000b' });
      expect([posted.status, posted.body.error?.details?.fields?.[0]?.field]).toEqual([400, 'state']);
      expect(posted.headers).toMatchObject({ 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'x-request-id': expect.any(String) });
    }
    // A caller that takes JSON gets the error as JSON, with the service's headers.
    const json = await t.http.get('/auth/logout?state=%00').set('Accept', 'application/json');
    expect([json.status, json.body.error, json.headers['x-content-type-options'], json.headers['referrer-policy']]).toEqual([400, 'invalid_request', 'nosniff', 'no-referrer']);
    // The confirmation's fields are compared, never kept: a NUL in its CSRF token is a token that does not match.
    const page = await signedIn.get('/auth/logout').set(html).expect(200); // the refusals left the session be
    refusedPage(await signedIn.post('/auth/logout/confirm').set(html).type('form').send({ xsrf: 'a\u0000b', logout: 'yes' }), 'confirmation');
    const confirmed = await signedIn.post('/auth/logout/confirm').set(html).type('form').send({ xsrf: field(page.text, 'xsrf'), logout: 'a\u0000b' });
    expect([confirmed.status, confirmed.headers['x-content-type-options'], confirmed.headers['x-request-id']]).toEqual([303, 'nosniff', expect.any(String)]);
  });

  it('ends a scope a later consent refuses for the tokens issued before it too, at once, in the API and in introspection', async () => {
    const app = await registerApp('Scope taker', 'openid core.note:read core.note:write');
    const agent = request.agent(t.url);
    const before = (await connect(agent, app, { scope: 'openid core.note:read core.note:write' })).access_token;
    const write = () => t.http.post('/items').set(bearer(before)).send({ type: 'core.note', properties: { title: 'by the app' } });
    expect((await write()).status).toBe(201);
    const introspect = async () => (await t.http.post('/auth/oauth2/introspect').type('form').send({ token: before, client_id: app.clientMetadata().client_id }).expect(200)).body;
    expect((await introspect()).scope).toBe('openid core.note:read core.note:write');
    await connect(agent, app, { scope: 'openid core.note:read core.note:write', prompt: 'consent', tick: ['openid', 'core.note:read'] });
    expectError(await write(), 403, 'type_not_permitted');
    await t.http.get('/items?type=core.note').set(bearer(before)).expect(200);
    // Introspection agrees with the API.
    expect(await introspect()).toMatchObject({ active: true, scope: 'openid core.note:read' });
    // Consenting to it again gives it back.
    await connect(agent, app, { scope: 'openid core.note:read core.note:write', prompt: 'consent' });
    expect((await write()).status).toBe(201);
  });

  it('ends the account pages\' sign-in in the browser that signs out at the provider, wherever the logout ends, and in no other browser', async () => {
    const bye = 'https://app.example.com/bye';
    const registered = (
      await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'Leaving app', redirect_uris: [redirectUri], post_logout_redirect_uris: [bye], scope: 'openid core.note:read', token_endpoint_auth_method: 'none' }).expect(201)
    ).body;
    const app = await oidc.discovery(new URL(t.url), registered.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    const signedIn = async (agent: ReturnType<typeof request.agent>) => (await agent.get('/auth/security')).status === 200;
    /** Answers the logout page `query` opens in `agent`: "Yes" by default, `{}` for "No" (or the provider's self-submitting form). */
    const logout = async (agent: ReturnType<typeof request.agent>, query: Record<string, string>, choice: { logout?: string } = { logout: 'yes' }) => {
      const page = await agent.get('/auth/logout').query(query).expect(200);
      const action = new URL(/<form[^>]*action="([^"]+)"/.exec(page.text)![1].replace(/&amp;/g, '&'), t.url);
      const out = await agent.post(action.pathname).type('form').send({ xsrf: field(page.text, 'xsrf'), ...choice });
      expect(out.status).toBe(303);
      return out;
    };
    const [laptop, phone] = [request.agent(t.url), request.agent(t.url)];
    await accountSignIn(phone);

    // Signed in to an app and to the account pages: "No, stay signed in" leaves the account pages be.
    await connect(laptop, app);
    await accountSignIn(laptop);
    const stayed = await logout(laptop, { client_id: registered.client_id }, {});
    expect(await signedIn(laptop)).toBe(true);
    // Its last page says so, and that the app alone was left.
    const { pathname, search } = new URL(stayed.headers.location, t.url);
    const stayedPage = (await laptop.get(pathname + search).expect(200)).text;
    expect(stayedPage).toContain('still signed in');
    expect(stayedPage).toContain('signed out of Leaving app');

    // "Yes", and back to the app: out of both in this browser, beside the provider's own cookies.
    const out = await logout(laptop, { client_id: registered.client_id, post_logout_redirect_uri: bye });
    expect(out.headers.location).toBe(bye);
    expect(out.headers['set-cookie']).toEqual(expect.arrayContaining([expect.stringMatching(/^_session=;/), 'svc_account=; Path=/auth; HttpOnly; SameSite=Lax; Max-Age=0']));
    expect(await signedIn(laptop)).toBe(false);
    // Not everywhere: the other browser stays signed in.
    expect(await signedIn(phone)).toBe(true);

    // Signed in to the account pages only: no provider session, and the provider's page submits itself.
    await accountSignIn(laptop);
    const alone = await logout(laptop, {});
    expect(alone.headers.location).toBe(`${t.url}/auth/logout/success`);
    expect(await signedIn(laptop)).toBe(false);
    const signedOutPage = (await laptop.get('/auth/logout/success').expect(200)).text;
    expect(signedOutPage).toContain('You have signed out.');
    expect(signedOutPage).not.toContain('still signed in');
  });

  it('goes back to an openly registered client after a logout only for an id_token_hint of the account signed in (RP-Initiated Logout 1.0 §3)', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'mallory@example.com', password: 'correct horse battery', name: 'Mallory' }).expect(201);
    const landing = 'https://evil.example/landing';
    const registered = (await t.http.post('/auth/oauth2/register').send({ client_name: 'Lure', redirect_uris: [redirectUri], post_logout_redirect_uris: [landing], token_endpoint_auth_method: 'none' }).expect(201)).body;
    const lure = await oidc.discovery(new URL(t.url), registered.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    // The client's owner signs in to it and has an id_token of their own.
    const mallorys = (await connect(request.agent(t.url), lure, { scope: 'openid', email: 'mallory@example.com' })).id_token!;
    /** Where a logout with `hint` ends in `browser`: "Yes" or "No" on the confirmation page, or the provider's self-submitting form. */
    const logout = async (browser: ReturnType<typeof request.agent>, hint: string, choice: { logout?: string } = { logout: 'yes' }) => {
      const page = await browser.get('/auth/logout').query({ id_token_hint: hint, post_logout_redirect_uri: landing }).expect(200);
      const action = new URL(/<form[^>]*action="([^"]+)"/.exec(page.text)![1].replace(/&amp;/g, '&'), t.url);
      const out = await browser.post(action.pathname).type('form').send({ xsrf: field(page.text, 'xsrf'), ...choice });
      expect(out.status).toBe(303);
      return new URL(out.headers.location, t.url);
    };
    const signedOutPage = `${t.url}/auth/logout/success`;

    // Ada, signed in, is sent to a logout with Mallory's hint: either button ends on the service.
    const victim = request.agent(t.url);
    await connect(victim, rp);
    expect((await logout(victim, mallorys, {})).href).toMatch(new RegExp(`^${signedOutPage}`));
    expect((await logout(victim, mallorys)).href).toBe(signedOutPage);
    // No session: the provider's page submits itself, and ends on the service too.
    expect((await logout(request.agent(t.url), mallorys)).href).toBe(signedOutPage);

    // Ada's own sign-in to the client, and its hint: back to the client.
    const adas = (await connect(victim, lure, { scope: 'openid' })).id_token!;
    expect((await logout(victim, adas)).href).toBe(landing);
  });

  it('lets a member user give an app only what a member may do: managing types is an admin user\'s to give', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'root@example.com', password: 'correct horse battery', name: 'Root', role: 'admin' }).expect(201);
    // A type it creates is one it must be able to read (acme.*:read).
    const asked = 'openid core.note:read acme.*:read metadata.types:write';
    const registered = (await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'Schema tool', redirect_uris: [redirectUri], scope: asked, token_endpoint_auth_method: 'none' }).expect(201)).body;
    const tool = await oidc.discovery(new URL(t.url), registered.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    const consentOf = async (email: string) => {
      const agent = request.agent(t.url);
      const verifier = oidc.randomPKCECodeVerifier();
      const url = oidc.buildAuthorizationUrl(tool, { redirect_uri: redirectUri, scope: asked, code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: email });
      const signIn = await browse(agent, url.pathname + url.search);
      const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(signIn.page!, 'uid'), csrf: field(signIn.page!, 'csrf'), email, password: 'correct horse battery' });
      const consent = await browse(agent, new URL(signedIn.headers.location, t.url).pathname);
      const decision = await agent.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' });
      const back = await browse(agent, new URL(decision.headers.location, t.url).pathname);
      return { page: consent.page!, tokens: await oidc.authorizationCodeGrant(tool, new URL(back.leftTo!), { pkceCodeVerifier: verifier, expectedState: email }) };
    };
    const type = { name: 'acme.schema', schema: { type: 'object' } };

    const member = await consentOf('ada@example.com');
    expect(member.page).not.toContain('metadata.types:write');
    expect(member.tokens.scope!.split(' ').sort()).toEqual(['acme.*:read', 'core.note:read', 'openid']);
    expectError(await t.http.post('/types').set(bearer(member.tokens.access_token)).send(type), 403, 'forbidden');

    const root = await consentOf('root@example.com');
    expect(root.page).toContain('metadata.types:write');
    expect(root.tokens.scope!.split(' ')).toContain('metadata.types:write');
    await t.http.post('/types').set(bearer(root.tokens.access_token)).send(type).expect(201);
  });

  it(`caps a user's open event streams at ${MAX_STREAMS_PER_USER} across all their apps' grants, apart from the cap per grant`, async () => {
    const apps = await Promise.all(['Feed one', 'Feed two', 'Feed three'].map((name) => registerApp(name, 'openid core.note:read')));
    const agent = request.agent(t.url);
    const tokens: string[] = [];
    for (const app of apps) tokens.push((await connect(agent, app)).access_token);
    const open = (token: string) => SseClient.open(`${t.url}/events`, { authorization: `Bearer ${token}` });
    const held: SseClient[] = [];
    try {
      for (const token of tokens.slice(0, 2)) for (let n = 0; n < MAX_STREAMS_PER_CREDENTIAL; n++) held.push(await open(token));
      expect(held.map((s) => s.status)).toEqual(held.map(() => 200));
      expect(held).toHaveLength(MAX_STREAMS_PER_USER);
      const third = await fetch(`${t.url}/events`, { headers: { authorization: `Bearer ${tokens[2]}` } });
      expect(third.status).toBe(429);
      expect(((await third.json()) as { error: unknown }).error).toMatchObject({ code: 'rate_limited', details: { scope: 'user', limit: MAX_STREAMS_PER_USER } });
      // Someone else's streams are not held back by Ada's.
      const others = await open(admin);
      expect(others.status).toBe(200);
      others.close();
      held.pop()!.close();
      const freed = await waitFor(async () => {
        const s = await open(tokens[2]);
        return s.status === 200 && s;
      }, 'a stream in the slot Ada freed');
      held.push(freed);
    } finally {
      held.forEach((s) => s.close());
    }
  });

  it('caps the webhooks one user\'s grants hold together, those of a grant since revoked included', async () => {
    const { WEBHOOKS_MAX_PER_CREDENTIAL: perGrant, WEBHOOKS_MAX_PER_USER: perUser } = t.config;
    const apps = await Promise.all(Array.from({ length: Math.ceil(perUser / perGrant) + 1 }, (_, n) => registerApp(`Hooks ${n}`, 'openid core.note:read')));
    const agent = request.agent(t.url);
    const grants = [];
    for (const app of apps) grants.push(await connect(agent, app));
    // Disabled: counted all the same, and nothing is sent to them.
    const register = (token: string) => t.http.post('/webhooks').set(bearer(token)).send({ url: 'http://127.0.0.1:9/hook', events: ['item.created'], disabled: true });
    let made = 0;
    for (const grant of grants.slice(0, -1)) for (let n = 0; n < perGrant && made < perUser; n++, made++) await register(grant.access_token).expect(201);
    const last = grants[grants.length - 1];
    expect(expectError(await register(last.access_token), 409, 'conflict').details).toEqual({ limit: perUser });
    // Revoking a grant and granting the app again makes a new grant, but no fresh allowance.
    await oidc.tokenRevocation(apps[0], grants[0].refresh_token!);
    const again = await connect(agent, apps[0]);
    expectError(await register(again.access_token), 409, 'conflict');
    // Someone else's webhooks are not held back by Ada's.
    await register(admin).expect(201);

    // Webhooks registered before the count per user existed are attributed through their grant, where it still exists.
    const attributed = async () =>
      (await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM webhooks w JOIN users u ON u.id = w.user_id WHERE u.email = 'ada@example.com'`))[0].n;
    expect(await attributed()).toBe(perUser);
    const runner = t.app.get(DataSource).createQueryRunner();
    try {
      const migration = new WebhooksUser1732300003300();
      await migration.down(runner);
      await migration.up(runner);
    } finally {
      await runner.release();
    }
    expect(await attributed()).toBe(perUser - perGrant);
  });

  it('ends a deleted user\'s grants at once and audits each one as revoked (by user_deleted)', async () => {
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email: 'leaving@example.com', password: 'correct horse battery', name: 'Leaving' }).expect(201)).body;
    const tokens = await connect(request.agent(t.url), rp, { email: 'leaving@example.com' });
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
    const [{ id: grantId }] = (await t.http.get('/audit?action=auth.grant.created').set(bearer(admin)).expect(200)).body.events.filter((e: { user_id: string }) => e.user_id === user.id).map((e: { grant_id: string }) => ({ id: e.grant_id }));
    const rotated = await oidc.refreshTokenGrant(rp, tokens.refresh_token!);
    const refresh = (token: string) =>
      t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: token, client_id: rp.clientMetadata().client_id });

    await t.http.delete(`/users/${user.id}`).set(bearer(admin)).expect(200);
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    // A used refresh token is still known for one (SPEC 5.2.6), as after a revocation; the unused one is gone with the grant.
    expect((await refresh(tokens.refresh_token!)).body.error).toBe('token_reuse_detected');
    expect((await refresh(rotated.refresh_token!)).body.error).toBe('invalid_grant');
    const revoked = (await t.http.get('/audit?action=auth.grant.revoked').set(bearer(admin)).expect(200)).body.events.filter((e: { user_id: string }) => e.user_id === user.id);
    expect(revoked).toEqual([expect.objectContaining({ grant_id: grantId, client_id: rp.clientMetadata().client_id, details: { by: 'user_deleted' } })]);
  });

  it('revokes an access token alone, and with a refresh token the whole grant (SPEC 5.7)', async () => {
    const { callback, verifier } = await authorize('revoke-one');
    const tokens = await oidc.authorizationCodeGrant(rp, callback, { pkceCodeVerifier: verifier, expectedState: 'revoke-one' });
    await oidc.tokenRevocation(rp, tokens.access_token);
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    // The refresh token of the same grant lives on.
    const refreshed = await oidc.refreshTokenGrant(rp, tokens.refresh_token!);
    await t.http.get('/items').set(bearer(refreshed.access_token)).expect(200);

    await oidc.tokenRevocation(rp, refreshed.refresh_token!);
    expectError(await t.http.get('/items').set(bearer(refreshed.access_token)), 401, 'unauthorized');
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshed.refresh_token! })).body.error).toBe('invalid_grant');
  });

  it('lists the grant on the account pages, revokes it there (tokens dead at once), and audits both', async () => {
    const { callback, verifier } = await authorize('g1');
    const first = await oidc.authorizationCodeGrant(rp, callback, { pkceCodeVerifier: verifier, expectedState: 'g1' });
    // One rotation, so that the grant has a used refresh token when it is revoked.
    const tokens = await oidc.refreshTokenGrant(rp, first.refresh_token!);

    // The account pages want their own sign-in; GET /auth leads to them.
    const account = request.agent(t.url);
    const home = await account.get('/auth');
    expect([home.status, home.headers.location]).toEqual([303, '/auth/grants']);
    const redirect = await account.get('/auth/grants');
    expect(redirect.status).toBe(303);
    expect(redirect.headers.location).toBe('/auth/sign-in?return_to=%2Fauth%2Fgrants');
    const head = await account.head('/auth/grants');
    expect([head.status, head.headers.location]).toEqual([303, redirect.headers.location]);
    const form = await account.get(redirect.headers.location);
    const login = await account.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email: 'ada@example.com', password: 'correct horse battery' });
    expect(login.status).toBe(303);
    expect(login.headers.location).toBe('/auth/grants');
    const page = await account.get('/auth/grants');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Notes app');
    const { grants } = (await account.get('/auth/grants').set('Accept', 'application/json').expect(200)).body;
    const grant = grants.find((g: { client_name: string; scope: string }) => g.client_name === 'Notes app' && g.scope.includes('core.note:read'));
    expect(grant).toMatchObject({ client_name: 'Notes app', scope: expect.stringContaining('openid') });
    expect((await account.get(`/auth/grants/${grant.id}`).set('Accept', 'application/json').expect(200)).body.id).toBe(grant.id);

    const [{ tenant_id }] = await t.sql<{ tenant_id: string }>(`SELECT tenant_id FROM users WHERE email = 'ada@example.com'`);
    const credentials = t.app.get(CredentialsService);
    expect(await credentials.principalById(tenant_id, grant.id)).toMatchObject({ kind: 'oauth', credentialId: grant.id, typePerms: { 'core.note': 'read' } });
    expect((await account.post(`/auth/grants/${grant.id}/revoke`).type('form').send({ csrf: 'forged' })).status).toBe(403);
    // Asking for JSON does not excuse a form from its CSRF token (a cross-site page can set Accept).
    // It is refused in the envelope then, which is what such a caller reads.
    expectError(await account.post(`/auth/grants/${grant.id}/revoke`).set('Accept', 'application/json').type('form').send({ csrf: 'forged' }), 403, 'forbidden');
    expectError(await account.post('/auth/sessions/revoke').set('Accept', 'application/json').type('form').send({}), 403, 'forbidden');
    const revoked = await account.post(`/auth/grants/${grant.id}/revoke`).type('form').send({ csrf: field(page.text, 'csrf') });
    expect(revoked.status).toBe(303);
    expect(await credentials.principalById(tenant_id, grant.id)).toBeNull();
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    const refresh = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: rp.clientMetadata().client_id });
    expect(refresh.body.error).toBe('invalid_grant');
    expectError(await t.http.get('/auth/grants').set('Accept', 'application/json'), 401, 'unauthorized');

    const audit = (await t.http.get('/audit').set(bearer(admin)).expect(200)).body.events;
    expect(audit.find((e: { action: string; grant_id: string }) => e.action === 'auth.grant.revoked' && e.grant_id === grant.id)).toMatchObject({
      client_id: rp.clientMetadata().client_id,
      user_id: expect.any(String),
    });
    const created = (await t.http.get('/audit?action=auth.grant.created').set(bearer(admin)).expect(200)).body.events;
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(created.every((e: { action: string }) => e.action === 'auth.grant.created')).toBe(true);
    expect(created.find((e: { grant_id: string }) => e.grant_id === grant.id)?.details).toMatchObject({ source: 'authorization_code' });
    expect(created.some((e: { details: { created: boolean } }) => e.details.created === true)).toBe(true);

    // The used refresh token is still a reuse after the revocation (SPEC 5.2.6); checked after the audit, to which a reuse adds.
    const reuse = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: rp.clientMetadata().client_id });
    expect([reuse.status, reuse.body.error]).toEqual([400, 'token_reuse_detected']);
    const sessions = (await account.get('/auth/sessions').set('Accept', 'application/json').expect(200)).body.sessions;
    expect(sessions.length).toBeGreaterThanOrEqual(1);
    // The activity names the app, not only its client id.
    expect((await account.get('/auth/security')).text).toContain('access revoked from <strong>Notes app</strong>');
    const sessionsPage = await account.get('/auth/sessions');
    expect((await account.post('/auth/sessions/revoke').type('form').send({ csrf: field(sessionsPage.text, 'csrf') })).status).toBe(303);
    const ada = `SELECT id::text FROM users WHERE email = 'ada@example.com'`;
    expect((await t.sql(`SELECT count(*)::int AS n FROM oidc_models WHERE model = 'Session' AND payload->>'accountId' = (${ada})`))[0]).toEqual({ n: 0 });
  });

  it('answers a consent form submitted three times at once only once: one grant, and the others are refused', async () => {
    // A user with no grant yet, so that an approval applied twice would make two.
    await t.http.post('/users').set(bearer(admin)).send({ email: 'twice@example.com', password: 'correct horse battery', name: 'Twice' }).expect(201);
    const { agent, form } = await toConsent('twice', 'twice@example.com');
    const answers = await Promise.all(Array.from({ length: 3 }, () => agent.post('/auth/authorize/decision').type('form').send({ ...form, decision: 'approve' })));
    expect(answers.map((a) => a.status).sort()).toEqual([303, 400, 400]);
    expect(answers.filter((a) => a.status === 400).map((a) => [a.headers.location, a.type])).toEqual([
      [undefined, 'text/html'],
      [undefined, 'text/html'],
    ]);
    const grants = await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND payload->>'accountId' = (SELECT id::text FROM users WHERE email = 'twice@example.com')`);
    expect(grants).toHaveLength(1);
  });

  it('denying sends the user back with access_denied', async () => {
    const { agent, form } = await toConsent('s1', 'ADA@example.com');
    const decision = await agent.post('/auth/authorize/decision').type('form').send({ ...form, decision: 'deny' });
    if (decision.status !== 303) throw new Error(decision.status + decision.text);
    const back = await browse(agent, new URL(decision.headers.location, t.url).pathname);
    const to = new URL(back.leftTo!);
    expect(to.searchParams.get('error')).toBe('access_denied');
    expect(to.searchParams.get('state')).toBe('s1');
  });

  it('refuses at once, with invalid_scope sent back to the app, a request naming no scope the client can be given: none, unknown ones, or API scopes it did not register (RFC 6749 4.1.2.1)', async () => {
    const app = await registerApp('Scope-picky app', 'openid core.note:read');
    const authorize = async (scope?: string) => {
      const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()), code_challenge_method: 'S256', state: 'picky' });
      if (scope === undefined) url.searchParams.delete('scope');
      else url.searchParams.set('scope', scope);
      return t.http.get(url.pathname + url.search);
    };
    const refusals: Array<[string | undefined, string | null, string | null]> = [
      [undefined, null, 'scope is required: openid, profile, email, or API scopes such as core.note:read'],
      ['', null, 'scope is required: openid, profile, email, or API scopes such as core.note:read'],
      ['foo bar', 'foo bar', 'none of the requested scopes can be granted: openid, profile, email, or API scopes such as core.note:read'],
      // As for an OIDC scope the client did not register (the provider's own answer, below).
      ['core.bookmark:read', 'core.bookmark:read', 'requested scope is not allowed'],
      ['foo core.bookmark:read', 'core.bookmark:read', 'requested scope is not allowed'],
      ['openid profile', 'profile', 'requested scope is not allowed'],
    ];
    for (const [scope, refused, description] of refusals) {
      const res = await authorize(scope);
      // Straight back to the app: no sign-in first.
      expect([scope, res.status]).toEqual([scope, 303]);
      const back = new URL(res.headers.location, t.url);
      expect([scope, back.origin + back.pathname, back.searchParams.get('error'), back.searchParams.get('error_description'), back.searchParams.get('scope'), back.searchParams.get('state')]).toEqual([
        scope,
        redirectUri,
        'invalid_scope',
        description,
        refused,
        'picky',
      ]);
    }
    // Something it can be given, beside what it cannot: on to the sign-in, asking only about that.
    for (const scope of ['core.note:read foo core.bookmark:read', 'openid foo']) {
      const res = await authorize(scope);
      expect([scope, res.status, new URL(res.headers.location, t.url).pathname]).toEqual([scope, 303, '/auth/']);
    }
  });

  it('refuses an authorization request without PKCE', async () => {
    const url = oidc.buildAuthorizationUrl(rp, { redirect_uri: redirectUri, scope: 'openid', state: 's2' });
    const res = await t.http.get(url.pathname + url.search);
    const to = new URL(res.headers.location);
    expect(to.searchParams.get('error')).toBe('invalid_request');
  });

  it('passes an authorization request posted as a form on to GET /auth/authorize, and refuses one too long for a URL with a page', async () => {
    // OIDC Core 3.1.2.1: POST at the advertised endpoint as well as at the SPEC's path.
    for (const endpoint of ['/auth/authorize', '/auth/oauth2/authorize']) {
      const posted = await t.http.post(endpoint).type('form').send({ client_id: rp.clientMetadata().client_id, scope: 'openid', state: 'a b&c' });
      expect(posted.status).toBe(303);
      const to = new URL(posted.headers.location, t.url);
      expect([to.pathname, Object.fromEntries(to.searchParams)]).toEqual(['/auth/authorize', { client_id: rp.clientMetadata().client_id, scope: 'openid', state: 'a b&c' }]);
    }
    // Each emoji sent as its four bytes becomes a twelve-character escape in the URL: 36 KB from a 12 KB body.
    const long = await t.http.post('/auth/oauth2/authorize').type('form').send(`state=${'😀'.repeat(3000)}`);
    expect(long.status).toBe(400);
    expect(long.headers.location).toBeUndefined();
    expect(long.headers['content-type']).toMatch(/^text\/html/);
    // A form whose escapes are not UTF-8 is refused, as on every route, not passed on as their text.
    expectError(await t.http.post('/auth/oauth2/authorize').type('form').send('scope=openid&state=%FF'), 400, 'invalid_request');
  });

  it('keeps apps\' tokens when the user signs out, another app signs them out, or someone else signs in on the browser: only the grant ends them', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'bob@example.com', password: 'correct horse battery', name: 'Bob' }).expect(201);
    const other = await registerApp('Other app', 'openid core.note:read');
    /** Each token is used here for the first time: the API caches what a token resolved to. */
    const stillWorks = async (app: oidc.Configuration, tokens: oidc.TokenEndpointResponse) => {
      await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
      await t.http.get('/auth/userinfo').set(bearer(tokens.access_token)).expect(200);
      const introspected = await t.http.post('/auth/oauth2/introspect').type('form').send({ token: tokens.access_token, client_id: app.clientMetadata().client_id });
      expect(introspected.body.active).toBe(true);
      const refreshed = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: app.clientMetadata().client_id });
      expect([refreshed.status, refreshed.body.error]).toEqual([200, undefined]);
    };

    // Signing out everywhere ends the browser's session.
    const laptop = request.agent(t.url);
    const beforeSignOut = await connect(laptop, rp);
    const account = request.agent(t.url);
    await accountSignIn(account);
    const sessions = await account.get('/auth/sessions').expect(200);
    await account.post('/auth/sessions/revoke').type('form').send({ csrf: field(sessions.text, 'csrf') }).expect(303);
    await stillWorks(rp, beforeSignOut);

    // Another app's RP-initiated logout ends the session both apps were authorized in.
    const phone = request.agent(t.url);
    const [notes, viaOther] = [await connect(phone, rp), await connect(phone, other)];
    // As sessions stored before grants outlived them: their authorizations do not say they persist after a logout.
    const [{ n: unmarked }] = await t.sql<{ n: number }>(
      `WITH u AS (UPDATE oidc_models SET payload = jsonb_set(payload, '{authorizations}', (SELECT jsonb_object_agg(k, v - 'persistsLogout') FROM jsonb_each(payload->'authorizations') AS e(k, v)))
        WHERE model = 'Session' AND payload->'authorizations' IS NOT NULL RETURNING 1) SELECT count(*)::int AS n FROM u`,
    );
    expect(unmarked).toBeGreaterThanOrEqual(1);
    const confirm = await phone.get(`/auth/logout?client_id=${other.clientMetadata().client_id}`).expect(200);
    const action = new URL(/<form[^>]*action="([^"]+)"/.exec(confirm.text)![1].replace(/&amp;/g, '&'), t.url);
    const out = await phone.post(action.pathname).type('form').send({ xsrf: field(confirm.text, 'xsrf'), logout: 'yes' });
    expect([out.status, out.headers.location]).toEqual([303, expect.stringContaining('/auth/logout/success')]);
    await stillWorks(rp, notes);
    await stillWorks(other, viaOther);

    // Someone else signs in on the same browser.
    const shared = request.agent(t.url);
    const adas = await connect(shared, rp);
    await connect(shared, rp, { prompt: 'login', email: 'bob@example.com' });
    await stillWorks(rp, adas);

    // Tokens stored while the provider's default bound them to their session (long gone) too.
    const older = await connect(request.agent(t.url), rp);
    await t.sql(
      `UPDATE oidc_models SET payload = payload || '{"expiresWithSession": true, "sessionUid": "a-session-long-gone"}' WHERE id = ANY($1)`,
      [[older.access_token, older.refresh_token!].map(storedTokenId)],
    );
    await stillWorks(rp, older);
  });

  it('refuses an expired access token at userinfo exactly as the API does', async () => {
    const tokens = await connect(request.agent(t.url), rp, { scope: 'openid email' });
    // Expired five seconds ago: within oidc-provider's clock tolerance, which the API does not allow.
    await t.sql(`UPDATE oidc_models SET payload = jsonb_set(payload, '{exp}', to_jsonb(extract(epoch from now())::int - 5)) WHERE id = $1`, [storedTokenId(tokens.access_token)]);
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'expired_token');
    for (const res of [await t.http.get('/auth/oauth2/userinfo').set(bearer(tokens.access_token)), await t.http.post('/auth/oauth2/userinfo').set(bearer(tokens.access_token))]) {
      expect([res.status, res.body.error]).toEqual([401, 'invalid_token']);
      expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
    }
    const introspected = await t.http.post('/auth/oauth2/introspect').type('form').send({ token: tokens.access_token, client_id: rp.clientMetadata().client_id });
    expect(introspected.body).toEqual({ active: false });
  });

  it('refuses at userinfo, as the API does, a token of a tenant\'s client for another tenant\'s user (a grant made before the rule)', async () => {
    const app = await registerApp('Later another tenant\'s app', 'openid profile core.note:read');
    const tokens = await connect(request.agent(t.url), app, { scope: 'openid profile core.note:read' });
    // The client becomes another tenant's, as if Ada's consent had been given to such a client.
    const other = await createTenant(t, admin, 'userinfo-other');
    await t.sql(`UPDATE oidc_models SET payload = payload || $2::jsonb WHERE model = 'Client' AND id = $1`, [app.clientMetadata().client_id, JSON.stringify({ tenant_id: other.tenantId })]);
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    for (const res of [await t.http.get('/auth/oauth2/userinfo').set(bearer(tokens.access_token)), await t.http.post('/auth/oauth2/userinfo').set(bearer(tokens.access_token))]) {
      expect([res.status, res.body.error]).toEqual([401, 'invalid_token']);
      expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
    }
  });

  it('keeps one grant per user and app across browsers: later consents add to it (created: false), and revoking it ends every token', async () => {
    const app = await registerApp('Laptop and phone app', 'openid core.note:read core.note:write');
    const clientId = app.clientMetadata().client_id;
    const [laptop, phone] = [request.agent(t.url), request.agent(t.url)];
    // The first consent leaves core.note:write out; asking again in the same browser, then on a phone, gives it after all.
    const first = await connect(laptop, app, { scope: 'openid core.note:read core.note:write', tick: ['openid', 'core.note:read'] });
    expect(first.scope!.split(' ').sort()).toEqual(['core.note:read', 'openid']);
    const again = await connect(laptop, app, { scope: 'openid core.note:read core.note:write', prompt: 'consent' });
    const onPhone = await connect(phone, app, { scope: 'openid core.note:write' });
    expect(onPhone.scope!.split(' ').sort()).toEqual(['core.note:write', 'openid']);

    const grants = await t.sql<{ id: string }>(`SELECT id FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [clientId]);
    expect(grants).toHaveLength(1);
    const consents = await t.sql<{ grant_id: string; created: boolean }>(
      `SELECT grant_id, (details->>'created')::boolean AS created FROM audit_events WHERE action = 'auth.grant.created' AND client_id = $1`,
      [clientId],
    );
    expect(consents.map((c) => c.grant_id)).toEqual([grants[0].id, grants[0].id, grants[0].id]);
    expect(consents.map((c) => c.created).sort()).toEqual([false, false, true]);
    const account = request.agent(t.url);
    await accountSignIn(account);
    const listed = (await account.get('/auth/grants').set('Accept', 'application/json').expect(200)).body.grants.filter((g: { client_id: string }) => g.client_id === clientId);
    expect(listed.map((g: { id: string; scope: string }) => [g.id, g.scope.split(' ').sort()])).toEqual([[grants[0].id, ['core.note:read', 'core.note:write', 'openid']]]);

    await account.post(`/auth/grants/${grants[0].id}/revoke`).send({}).expect(200);
    for (const tokens of [first, again, onPhone]) {
      expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
      const refresh = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId });
      expect(refresh.body.error).toBe('invalid_grant');
    }
    // Connecting again makes a new grant: a first consent again.
    await connect(phone, app);
    const [latest] = await t.sql<{ created: boolean }>(
      `SELECT (details->>'created')::boolean AS created FROM audit_events WHERE action = 'auth.grant.created' AND client_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`,
      [clientId],
    );
    expect(latest.created).toBe(true);
  });

  it('makes one grant of first consents to an app given at once in two browsers', async () => {
    for (let round = 0; round < 3; round++) {
      const app = await registerApp(`Race app ${round}`, 'openid core.note:read');
      const atConsent = await Promise.all(
        [0, 1].map(async () => {
          const agent = request.agent(t.url);
          const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, scope: 'openid core.note:read', code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()), code_challenge_method: 'S256' });
          const signIn = await browse(agent, url.pathname + url.search);
          const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(signIn.page!, 'uid'), csrf: field(signIn.page!, 'csrf'), email: 'ada@example.com', password: 'correct horse battery' });
          const consent = await browse(agent, new URL(signedIn.headers.location, t.url).pathname);
          return { agent, form: { uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' } };
        }),
      );
      const decisions = await Promise.all(atConsent.map(({ agent, form }) => agent.post('/auth/authorize/decision').type('form').send(form)));
      expect(decisions.map((d) => d.status)).toEqual([303, 303]);
      const clientId = app.clientMetadata().client_id;
      expect(await t.sql(`SELECT id FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [clientId])).toHaveLength(1);
      const consents = await t.sql<{ created: boolean }>(`SELECT (details->>'created')::boolean AS created FROM audit_events WHERE action = 'auth.grant.created' AND client_id = $1`, [clientId]);
      expect(consents.map((c) => c.created).sort()).toEqual([false, true]);
    }
  });

  it('takes a loopback IP redirect URI on any port (RFC 8252 7.3), the rest of it exactly; localhost and other hosts exactly', async () => {
    const port = Number(new URL(t.url).port) + 1;
    const app = await registerApp('Desktop app', 'openid core.note:read', ['http://127.0.0.1:9/cb', 'http://[::1]:9/cb?app=1', 'http://localhost:9/cb']);
    const tokens = await connect(request.agent(t.url), app, { redirect: `http://127.0.0.1:${port}/cb` });
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);

    const asks = async (redirect: string) => {
      const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirect, scope: 'openid', code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()), code_challenge_method: 'S256' });
      const res = await t.http.get(url.pathname + url.search);
      return [redirect, res.status === 303 && res.headers.location.startsWith('/auth/?interaction=') ? 'sign-in' : res.status];
    };
    for (const ok of [`http://127.0.0.1:${port}/cb`, 'http://127.0.0.1/cb', 'http://[::1]:49152/cb?app=1', 'http://127.0.0.1:9/cb']) expect(await asks(ok)).toEqual([ok, 'sign-in']);
    for (const refused of ['http://127.0.0.1:49152/other', 'http://127.0.0.1:49152/cb?x=1', 'http://[::1]:49152/cb', 'http://localhost:49152/cb', 'https://127.0.0.1:49152/cb']) {
      expect(await asks(refused)).toEqual([refused, 400]);
    }
    // The native-app rule of oidc-provider let localhost through on any port; the one rule here does not.
    const native = (await t.http.post('/auth/clients').set(bearer(admin)).send({ application_type: 'native', redirect_uris: ['http://localhost:9/cb'], token_endpoint_auth_method: 'none' }).expect(201)).body;
    const nativeAsks = await t.http.get(`/auth/authorize?${new URLSearchParams({ response_type: 'code', client_id: native.client_id, redirect_uri: 'http://localhost:49152/cb', scope: 'openid', code_challenge: 'x'.repeat(43), code_challenge_method: 'S256' })}`);
    expect(nativeAsks.status).toBe(400);
  });

  it('takes no authorization request without redirect_uri, even from a client with one registered, and sends nobody there (OIDC Core 3.1.2.1)', async () => {
    const app = await registerApp('Single redirect', 'openid core.note:read', [redirectUri]);
    const params = { response_type: 'code', client_id: app.clientMetadata().client_id, scope: 'openid', state: 'st', code_challenge: 'x'.repeat(43), code_challenge_method: 'S256' };
    const without = await t.http.get(`/auth/authorize?${new URLSearchParams(params)}`);
    expect([without.status, without.headers.location]).toEqual([400, undefined]);
    const withIt = await t.http.get(`/auth/authorize?${new URLSearchParams({ ...params, redirect_uri: redirectUri })}`);
    expect([withIt.status, withIt.headers.location?.startsWith('/auth/?interaction=')]).toEqual([303, true]);
  });

  /**
   * Ada, in the browser `agent` (signing in when it is not), asks `app` for `scope`: the consent
   * page when one is shown, else where the browser left to; `decide` answers the page as it posts
   * (`scopes_shown` and the ticked boxes) and answers where the browser is sent back to the app.
   */
  const askConsent = async (agent: ReturnType<typeof request.agent>, app: oidc.Configuration, scope: string, extra: Record<string, string> = {}) => {
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, scope, code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state, ...extra });
    let at = await browse(agent, url.pathname + url.search);
    if (at.path.startsWith('/auth/sign-in')) {
      const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(at.page!, 'uid'), csrf: field(at.page!, 'csrf'), email: 'ada@example.com', password: 'correct horse battery' }).expect(303);
      const next = new URL(signedIn.headers.location, t.url);
      at = await browse(agent, next.pathname + next.search);
    }
    const consent = at.path.startsWith('/auth/consent') ? at.page : undefined;
    const decide = async (tick: string[], decision = 'approve') => {
      const form = new URLSearchParams({ uid: field(consent!, 'uid'), csrf: field(consent!, 'csrf'), decision, scopes_shown: '1' });
      for (const s of tick) form.append('scope', s);
      const res = await agent.post('/auth/authorize/decision').type('form').send(form.toString()).expect(303);
      const next = new URL(res.headers.location, t.url);
      return new URL((await browse(agent, next.pathname + next.search)).leftTo!);
    };
    return { consent, leftTo: at.leftTo ? new URL(at.leftTo) : undefined, decide, verifier, state };
  };
  const grantRows = (app: oidc.Configuration) => t.sql(`SELECT id FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [app.clientMetadata().client_id]);
  const consentAudits = (app: oidc.Configuration) =>
    t.sql<{ scope: string }>(`SELECT details->>'scope' AS scope FROM audit_events WHERE action = 'auth.grant.created' AND client_id = $1 ORDER BY created_at`, [app.clientMetadata().client_id]);

  it('grants openid with any approval, offering no box for it: the app gets its id_token now and at every later sign-in (OIDC Core 3.1.3.3)', async () => {
    const app = await registerApp('Sign-in app', 'openid core.note:read');
    const agent = request.agent(t.url);
    const nonce = oidc.randomNonce();
    const first = await askConsent(agent, app, 'openid core.note:read', { nonce });
    expect(first.consent).toContain('<code>openid</code>');
    expect(first.consent).not.toMatch(/<input[^>]*value="openid"/);
    // A form without openid among its ticked scopes (as a hand-made post could send) gives it all the same.
    const tokens = await oidc.authorizationCodeGrant(app, await first.decide(['core.note:read']), { pkceCodeVerifier: first.verifier, expectedState: first.state, expectedNonce: nonce });
    expect(tokens.scope!.split(' ').sort()).toEqual(['core.note:read', 'openid']);
    expect(tokens.claims()!.nonce).toBe(nonce);
    // The grant remembers no refusal of openid: the next sign-in skips the consent page and gets an id_token too.
    const laterNonce = oidc.randomNonce();
    const later = await askConsent(agent, app, 'openid core.note:read', { nonce: laterNonce });
    expect(later.consent).toBeUndefined();
    const again = await oidc.authorizationCodeGrant(app, later.leftTo!, { pkceCodeVerifier: later.verifier, expectedState: later.state, expectedNonce: laterNonce });
    expect(again.claims()!.nonce).toBe(laterNonce);
  });

  it('asks again for openid where a grant from before remembers it as refused, once migration 3100 has dropped the refusal', async () => {
    const app = await registerApp('Stuck app', 'openid core.note:read');
    const agent = request.agent(t.url);
    const first = await askConsent(agent, app, 'openid core.note:read');
    await oidc.authorizationCodeGrant(app, await first.decide(['core.note:read']), { pkceCodeVerifier: first.verifier, expectedState: first.state });
    // As the consent pages used to leave it when the user unticked openid.
    const [{ id }] = await grantRows(app);
    await t.sql(`UPDATE oidc_models SET payload = payload - 'openid' || '{"rejected":{"openid":{"scope":"openid"}}}' WHERE model = 'Grant' AND id = $1`, [id]);
    const stuck = await askConsent(agent, app, 'openid core.note:read');
    expect(stuck.consent).toBeUndefined();
    expect((await oidc.authorizationCodeGrant(app, stuck.leftTo!, { pkceCodeVerifier: stuck.verifier, expectedState: stuck.state })).id_token).toBeUndefined();

    const runner = t.app.get(DataSource).createQueryRunner();
    try {
      await new OpenidNeverRefused1732300003100().up(runner);
    } finally {
      await runner.release();
    }
    const nonce = oidc.randomNonce();
    const asked = await askConsent(agent, app, 'openid core.note:read', { nonce });
    expect(asked.consent).toContain('<code>openid</code>');
    const tokens = await oidc.authorizationCodeGrant(app, await asked.decide(['core.note:read']), { pkceCodeVerifier: asked.verifier, expectedState: asked.state, expectedNonce: nonce });
    expect(tokens.claims()!.nonce).toBe(nonce);
  });

  it('offers no box for offline_access, whose refresh token comes whether asked or not: it is shown as included and granted with the approval', async () => {
    const app = await registerApp('Offline app', 'openid offline_access core.note:read');
    const asked = await askConsent(request.agent(t.url), app, 'openid offline_access core.note:read', { prompt: 'consent' });
    expect(asked.consent).toContain('<code>offline_access</code>');
    expect(asked.consent).not.toMatch(/<input[^>]*value="offline_access"/);
    const tokens = await oidc.authorizationCodeGrant(app, await asked.decide(['core.note:read']), { pkceCodeVerifier: asked.verifier, expectedState: asked.state });
    expect(tokens.refresh_token).toMatch(/^svc_rt_/);
    expect(tokens.scope!.split(' ').sort()).toEqual(['core.note:read', 'openid']);
    expect((await consentAudits(app)).map((a) => a.scope.split(' ').sort())).toEqual([['core.note:read', 'offline_access', 'openid']]);
  });

  it('takes an Allow that grants nothing as a Deny: access_denied, no grant, no audit row, and the next authorization asks again; with openid asked, unticking every box gives openid alone', async () => {
    const app = await registerApp('Nothing app', 'openid core.note:read core.note:write');
    const agent = request.agent(t.url);
    const first = await askConsent(agent, app, 'core.note:read core.note:write');
    expect(first.consent).toContain('core.note:write');
    const back = await first.decide([]);
    expect([back.searchParams.get('error'), back.searchParams.get('state')]).toEqual(['access_denied', first.state]);
    expect(await grantRows(app)).toEqual([]);
    expect(await consentAudits(app)).toEqual([]);
    // Nothing was remembered as refused: the same request gets the consent page again.
    const next = await askConsent(agent, app, 'core.note:read core.note:write');
    expect(next.consent).toContain('core.note:write');
    expect((await next.decide([], 'deny')).searchParams.get('error')).toBe('access_denied');

    // openid comes with any approval, so an Allow with every box unticked signs the user in, and gives nothing more.
    const withOpenid = await askConsent(agent, app, 'openid core.note:read');
    const tokens = await oidc.authorizationCodeGrant(app, await withOpenid.decide([]), { pkceCodeVerifier: withOpenid.verifier, expectedState: withOpenid.state });
    expect([tokens.scope, typeof tokens.id_token]).toEqual(['openid', 'string']);
    expect(await consentAudits(app)).toEqual([{ scope: 'openid' }]);
  });

  it('refuses what an Allow with every box unticked leaves out on a grant given before, whether or not openid was asked: an earlier token loses it too', async () => {
    const app = await registerApp('Withdrawn app', 'openid metadata:read core.note:read core.note:write');
    const agent = request.agent(t.url);
    const before = (await connect(agent, app, { scope: 'openid metadata:read core.note:read core.note:write' })).access_token;
    const scopes = async () => {
      const res = (await t.http.post('/auth/oauth2/introspect').type('form').send({ token: before, client_id: app.clientMetadata().client_id }).expect(200)).body;
      return [res.active, (res.scope ?? '').split(' ').filter(Boolean).sort()];
    };
    expect(await scopes()).toEqual([true, ['core.note:read', 'core.note:write', 'metadata:read', 'openid']]);
    // Without openid: the app gets nothing (access_denied), and what the page let the user untick is no longer given.
    const plain = await askConsent(agent, app, 'metadata:read core.note:read', { prompt: 'consent' });
    const back = await plain.decide([]);
    expect([back.searchParams.get('error'), back.searchParams.get('error_description')]).toEqual(['access_denied', 'The user granted none of what the app asked for']);
    expect(await scopes()).toEqual([true, ['core.note:write', 'openid']]);
    expectError(await t.http.get('/items?tags=x').set(bearer(before)), 403, 'forbidden');
    // With openid: the same, and the app gets the sign-in it always comes with.
    const withOpenid = await askConsent(agent, app, 'openid core.note:write', { prompt: 'consent' });
    const tokens = await oidc.authorizationCodeGrant(app, await withOpenid.decide([]), { pkceCodeVerifier: withOpenid.verifier, expectedState: withOpenid.state });
    expect(tokens.scope).toBe('openid');
    expect(await scopes()).toEqual([true, ['openid']]);
    expect((await consentAudits(app)).map((a) => a.scope)).toEqual([expect.any(String), '', 'openid']);
  });

  it('says on the consent page when nothing asked can be given, offering no Allow; an Allow that still comes is access_denied saying nothing could be granted, not that the user denied', async () => {
    const app = await registerApp('Nothing to give app', 'openid offline_access core.note:read metadata.types:write');
    const agent = request.agent(t.url);
    const allowButton = /<button[^>]*value="approve"/;
    // offline_access alone, which gives nothing; what only an admin may give, to Ada, a member.
    for (const [scope, extra] of [['offline_access', { prompt: 'consent' }], ['metadata.types:write', {}]] as const) {
      const asked = await askConsent(agent, app, scope, extra);
      expect(asked.consent).toContain('This app asks for nothing you can give it');
      expect(asked.consent).not.toContain('Nothing beyond signing you in');
      expect(asked.consent).not.toMatch(allowButton);
      expect(asked.consent).toMatch(/<button[^>]*value="deny"/);
      const back = await asked.decide([]);
      expect([scope, back.searchParams.get('error'), back.searchParams.get('error_description')]).toEqual([scope, 'access_denied', 'Nothing the app asked for could be granted']);
    }
    expect(await grantRows(app)).toEqual([]);

    // Something could be given, and the user unticked it all: that is what the app is told.
    const unticked = await askConsent(agent, app, 'core.note:read');
    expect(unticked.consent).toMatch(allowButton);
    expect(unticked.consent).not.toContain('Nothing beyond signing you in');
    expect((await unticked.decide([])).searchParams.get('error_description')).toBe('The user granted none of what the app asked for');
    // A Deny is still the user's denial.
    expect((await (await askConsent(agent, app, 'core.note:read')).decide([], 'deny')).searchParams.get('error_description')).toBe('The user denied the request');

    // Only where openid is offered, and nothing else to choose, is it a sign-in alone.
    const signInOnly = await askConsent(agent, app, 'openid offline_access', { prompt: 'consent' });
    expect(signInOnly.consent).toContain('Nothing beyond signing you in.');
    expect(signInOnly.consent).toMatch(allowButton);
    const tokens = await oidc.authorizationCodeGrant(app, await signInOnly.decide([]), { pkceCodeVerifier: signInOnly.verifier, expectedState: signInOnly.state });
    expect(typeof tokens.id_token).toBe('string');
  });

  /** The link of a refusal page (HTML-escaped in its href), followed: where it sends the browser back to the app. */
  const followBack = async (agent: ReturnType<typeof request.agent>, html: string) => {
    const href = /<a href="([^"]*)">Go back to the application<\/a>/.exec(html)![1].replace(/&amp;/g, '&');
    const to = new URL(href, t.url);
    return new URL((await browse(agent, to.pathname + to.search)).leftTo!);
  };

  it('refuses a sign-in as another account than the id_token_hint names: the app gets login_required, no code (OIDC Core 3.1.2.1)', async () => {
    const hinted = (await t.http.post('/users').set(bearer(admin)).send({ email: 'hinted@example.com', password: 'correct horse battery', name: 'Hinted' }).expect(201)).body;
    const app = await registerApp('Hinting app', 'openid core.note:read');
    const { id_token: hint } = await connect(request.agent(t.url), app, { email: 'hinted@example.com' });
    // A fresh browser: the sign-in page, where Ada signs in rather than the account the app named.
    const agent = request.agent(t.url);
    const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, scope: 'openid core.note:read', code_challenge: 'x'.repeat(43), code_challenge_method: 'S256', state: 'hinted', id_token_hint: hint! });
    const signIn = await browse(agent, url.pathname + url.search);
    expect(signIn.path).toMatch(/^\/auth\/sign-in\?uid=/);
    const refused = await agent.post('/auth/sign-in').type('form').send({ uid: field(signIn.page!, 'uid'), csrf: field(signIn.page!, 'csrf'), email: 'ada@example.com', password: 'correct horse battery' });
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('Hinting app asked for another account than the one you chose');
    const back = await followBack(agent, refused.text);
    expect([back.searchParams.get('error'), back.searchParams.get('state'), back.searchParams.has('code')]).toEqual(['login_required', 'hinted', false]);
    // Signed in as Ada now, the browser is asked to sign in again for the hint, as the provider asks on the request itself.
    const again = await browse(agent, url.pathname + url.search);
    expect(again.path).toMatch(/^\/auth\/sign-in\?uid=/);
    // The account the hint names goes through.
    const tokens = await connect(request.agent(t.url), app, { email: 'hinted@example.com', params: { id_token_hint: hint! } });
    expect(tokens.claims()!.sub).toBe(hinted.id);
  });

  it('takes prompt=select_account: the sign-in page offers the account signed in, or signing in with another; discovery lists the prompts it takes (OIDC Core 3.1.2.1)', async () => {
    const doc = (await t.http.get('/.well-known/openid-configuration').expect(200)).body;
    expect([...doc.prompt_values_supported].sort()).toEqual(['consent', 'login', 'none', 'select_account']);
    expect(doc.claim_types_supported).toEqual(['normal']);
    const other = (await t.http.post('/users').set(bearer(admin)).send({ email: 'chooser@example.com', password: 'correct horse battery', name: 'Chooser' }).expect(201)).body;
    const ada = (await t.sql<{ id: string }>(`SELECT id::text FROM users WHERE email = 'ada@example.com'`))[0].id;
    const app = await registerApp('Account choosing app', 'openid core.note:read');
    const browser = request.agent(t.url);
    const { id_token: adaHint } = await connect(browser, app);
    const { id_token: otherHint } = await connect(request.agent(t.url), app, { email: 'chooser@example.com' });
    const choose = async (params: Record<string, string> = {}) => {
      const verifier = oidc.randomPKCECodeVerifier();
      const state = oidc.randomState();
      const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, scope: 'openid core.note:read', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state, prompt: 'select_account', ...params });
      const at = await browse(browser, url.pathname + url.search);
      expect(at.path).toMatch(/^\/auth\/sign-in\?uid=/);
      expect(at.page).toContain('Continue as ada@example.com');
      const kept = await browser.post('/auth/select-account').type('form').send({ uid: field(at.page!, 'uid'), csrf: field(at.page!, 'csrf') });
      return { kept, verifier, state };
    };
    // Going on as Ada: no password asked, and the app gets Ada.
    const asAda = await choose({ id_token_hint: adaHint! });
    expect(asAda.kept.status).toBe(303);
    const to = new URL(asAda.kept.headers.location, t.url);
    const back = new URL((await browse(browser, to.pathname + to.search)).leftTo!);
    const tokens = await oidc.authorizationCodeGrant(app, back, { pkceCodeVerifier: asAda.verifier, expectedState: asAda.state });
    expect(tokens.claims()!.sub).toBe(ada);
    // Going on as Ada where the app named another account is refused as a sign-in would be.
    const named = await choose({ id_token_hint: otherHint! });
    expect(named.kept.status).toBe(403);
    expect((await followBack(browser, named.kept.text)).searchParams.get('error')).toBe('login_required');
    // Another account: signed in on the same page (the browser's previous user signed out on the way).
    const chosen = await connect(browser, app, { prompt: 'select_account', email: 'chooser@example.com' });
    expect(chosen.claims()!.sub).toBe(other.id);
    // Without a sign-in in the browser, the page is the sign-in form alone.
    const fresh = request.agent(t.url);
    const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, scope: 'openid', code_challenge: 'x'.repeat(43), code_challenge_method: 'S256', prompt: 'select_account' });
    const alone = await browse(fresh, url.pathname + url.search);
    expect(alone.path).toMatch(/^\/auth\/sign-in\?uid=/);
    expect(alone.page).not.toContain('Continue as');
    expect((await fresh.post('/auth/select-account').type('form').send({ uid: field(alone.page!, 'uid'), csrf: field(alone.page!, 'csrf') })).status).toBe(400);
  });

  it('draws the provider\'s self-submitting forms (form_post, a logout without a session) as the service\'s pages: language, viewport, main, and its one script allowed by hash', async () => {
    const app = await registerApp('Form post app', 'openid core.note:read');
    const agent = request.agent(t.url);
    await connect(agent, app);
    const ownPage = (res: request.Response) => {
      expect(res.status).toBe(200);
      expect(res.text).toMatch(/^<!doctype html>\s*<html lang="en">/);
      expect(res.text).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
      expect(res.text).toMatch(/<main>[\s\S]*<form method="post"[\s\S]*<\/main>/);
      expect(res.text).not.toContain('Submitting Callback');
      expect(res.headers['content-security-policy']).toMatch(/^default-src 'none'; script-src 'sha256-[A-Za-z0-9+/]+=*'; style-src 'unsafe-inline'; frame-ancestors 'none'$/);
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['cache-control']).toContain('no-store');
    };
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, scope: 'openid core.note:read', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 'a "quoted" & <state>', response_mode: 'form_post' });
    const posted = await agent.get(url.pathname + url.search);
    ownPage(posted);
    expect(/<form method="post" action="([^"]*)"/.exec(posted.text)![1]).toBe(redirectUri);
    // The fields as the provider gave them, escaped once: the app gets them back as sent.
    expect(posted.text).toContain('name="state" value="a &quot;quoted&quot; &amp; &lt;state&gt;"');
    const params = new URLSearchParams({ code: field(posted.text, 'code'), state: 'a "quoted" & <state>', iss: field(posted.text, 'iss') });
    const tokens = await oidc.authorizationCodeGrant(app, new URL(`${redirectUri}?${params}`), { pkceCodeVerifier: verifier, expectedState: 'a "quoted" & <state>' });
    expect(tokens.access_token).toMatch(/^svc_at_/);

    const signedOut = request.agent(t.url);
    const logout = await signedOut.get('/auth/logout');
    ownPage(logout);
    expect(/<form method="post" action="([^"]*)"/.exec(logout.text)![1]).toBe(`${t.url}/auth/logout/confirm`);
    const confirmed = await signedOut.post('/auth/logout/confirm').type('form').send({ xsrf: field(logout.text, 'xsrf'), logout: field(logout.text, 'logout') });
    expect([confirmed.status, confirmed.headers.location]).toEqual([303, `${t.url}/auth/logout/success`]);
  });

  it('holds one authorization at a time per browser: a second one started replaces the first, whose page says so', async () => {
    const app = await registerApp('Two tabs app', 'openid core.note:read');
    const agent = request.agent(t.url);
    const open = async (state: string) => {
      const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, scope: 'openid core.note:read', code_challenge: 'x'.repeat(43), code_challenge_method: 'S256', state });
      return (await browse(agent, url.pathname + url.search)).page!;
    };
    const first = await open('first');
    const second = await open('second');
    const stale = await agent.post('/auth/sign-in').type('form').send({ uid: field(first, 'uid'), csrf: field(first, 'csrf'), email: 'ada@example.com', password: 'correct horse battery' });
    expect(stale.status).toBe(400);
    expect(stale.text).toContain('A sign-in started since in this browser (in another tab or window, say) replaces an earlier one.');
    await agent.post('/auth/sign-in').type('form').send({ uid: field(second, 'uid'), csrf: field(second, 'csrf'), email: 'ada@example.com', password: 'correct horse battery' }).expect(303);
  });

  it('says on the consent page that an edge write scope creates and deletes edges (SPEC 5.4)', async () => {
    const app = await registerApp('Linking app', 'openid edge.acme.links:write edge.acme.links:read');
    const asked = await askConsent(request.agent(t.url), app, 'edge.acme.links:write edge.acme.links:read');
    expect(asked.consent).toContain('Read, create and delete edges of type acme.links <code>edge.acme.links:write</code>');
    expect(asked.consent).toContain('Read edges of type acme.links <code>edge.acme.links:read</code>');
  });

  it('cautions on the consent page that an openly registered app names itself, saying where the answer goes; not for an app the tenant\'s admin registered', async () => {
    const own = await registerApp('Acme Notes', 'openid core.note:read');
    const copy = (await t.http.post('/auth/oauth2/register').send({ client_name: 'Acme Notes', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' }).expect(201)).body;
    const lookalike = await oidc.discovery(new URL(t.url), copy.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    const genuine = (await askConsent(request.agent(t.url), own, 'openid core.note:read')).consent!;
    const claimed = (await askConsent(request.agent(t.url), lookalike, 'openid core.note:read')).consent!;
    expect(genuine).toContain('Allow <strong>Acme Notes</strong>');
    expect(genuine).not.toContain('registered itself');
    expect(claimed).toContain('This app registered itself');
    expect(claimed).toContain(`Your answer goes to <strong>${new URL(redirectUri).host}</strong>`);
  });

  it('makes no grant for a user deleted while their consent was being recorded: the page says the account is gone', async () => {
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email: 'leaving@example.com', password: 'correct horse battery', name: 'Leaving' }).expect(201)).body;
    const app = await registerApp('Consent race', 'openid core.note:read');
    const agent = request.agent(t.url);
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, scope: 'openid core.note:read', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 's' });
    let at = await browse(agent, url.pathname + url.search);
    const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(at.page!, 'uid'), csrf: field(at.page!, 'csrf'), email: 'leaving@example.com', password: 'correct horse battery' }).expect(303);
    const next = new URL(signedIn.headers.location, t.url);
    at = await browse(agent, next.pathname + next.search);
    expect(at.path).toMatch(/^\/auth\/consent/);
    const decision = new URLSearchParams({ uid: field(at.page!, 'uid'), csrf: field(at.page!, 'csrf'), decision: 'approve' });
    const answer = await deletedWhileDeciding(t, user.id, () => agent.post('/auth/authorize/decision').type('form').send(decision.toString()));
    expect(answer.status).toBe(400);
    expect(answer.text).toContain('no longer exists');
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND payload->>'accountId' = $1`, [user.id])).toEqual([]);
  });

  it('answers a consent decision whose interaction is gone, before the post or while it is decided, with a 400 page: no grant, no audit row', async () => {
    const app = await registerApp('Vanishing consent', 'openid core.note:read');
    /** A fresh browser of Ada's at the app's consent page: the interaction, and a post of the page's form with `decision`. */
    const atConsent = async () => {
      const agent = request.agent(t.url);
      const { consent } = await askConsent(agent, app, 'openid core.note:read');
      const form = { uid: field(consent!, 'uid'), csrf: field(consent!, 'csrf') };
      return { uid: form.uid, decide: (decision: string) => agent.post('/auth/authorize/decision').type('form').send({ ...form, decision }) };
    };
    /** A refused decision's page: 400, HTML, not sent on to the app; its heading. */
    const refusal = (res: request.Response) => {
      expect([res.status, res.headers['content-type'], res.headers.location]).toEqual([400, 'text/html; charset=utf-8', undefined]);
      return /<h1>([^<]*)<\/h1>/.exec(res.text)?.[1];
    };
    /**
     * Sends a decision while the interaction's row is held: once the decision, past the provider's
     * look at the interaction, waits to claim it, `vanish` runs in the holding transaction, which then lets it go.
     */
    const vanishingWhileDeciding = async (uid: string, vanish: () => Promise<unknown>, send: () => request.Test) => {
      const waiting = async () => {
        await t.sql('SELECT pg_stat_clear_snapshot()');
        return (await t.sql(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%SET consumed_at = now() WHERE model = ''Interaction''%'`)).length > 0;
      };
      await t.sql('BEGIN');
      try {
        await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Interaction' AND id = $1 FOR UPDATE`, [uid]);
        const sent = send().then((r) => r);
        await waitFor(waiting, 'the decision to wait for the interaction\'s row');
        await vanish();
        await t.sql('COMMIT');
        return await sent;
      } catch (err) {
        await t.sql('ROLLBACK');
        throw err;
      }
    };

    // Gone before the Allow is posted (expired and swept): the page says so.
    const swept = await atConsent();
    await t.sql(`DELETE FROM oidc_models WHERE model = 'Interaction' AND id = $1`, [swept.uid]);
    expect(refusal(await swept.decide('approve'))).toBe('Sign-in expired');

    // Gone while the decision is made, after the provider found it: as the provider ends it,
    // it says (SessionNotFound) the interaction expired, or the sign-in it belongs to ended.
    const expired = await atConsent();
    const expire = () => t.sql(`UPDATE oidc_models SET payload = jsonb_set(payload, '{exp}', to_jsonb(extract(epoch from now())::int - 60)) WHERE model = 'Interaction' AND id = $1`, [expired.uid]);
    expect(refusal(await vanishingWhileDeciding(expired.uid, expire, () => expired.decide('deny')))).toBe('Sign-in ended');
    const signedOut = await atConsent();
    const endSession = () => t.sql(`DELETE FROM oidc_models WHERE model = 'Session' AND uid = (SELECT payload->'session'->>'uid' FROM oidc_models WHERE model = 'Interaction' AND id = $1)`, [signedOut.uid]);
    expect(refusal(await vanishingWhileDeciding(signedOut.uid, endSession, () => signedOut.decide('deny')))).toBe('Sign-in ended');

    expect(await grantRows(app)).toEqual([]);
    expect(await consentAudits(app)).toEqual([]);
  });

  it('holds a demotion for the user\'s tokens at once and ends their sign-ins; a new password ends them too, the grants stay', async () => {
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email: 'demoted@example.com', password: 'correct horse battery', name: 'Demoted', role: 'admin' }).expect(201)).body;
    // A types writer creates only types it may read (acme.*).
    const tool = await registerApp('Schema tool (demotion)', 'openid core.note:read acme.*:read metadata.types:write');
    const sessions = async () => (await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM oidc_models WHERE model = 'Session' AND payload->>'accountId' = $1`, [user.id]))[0].n;
    const browser = request.agent(t.url);
    const tokens = await connect(browser, tool, { scope: 'openid core.note:read acme.*:read metadata.types:write', email: 'demoted@example.com' });
    expect(tokens.scope!.split(' ')).toContain('metadata.types:write');
    // Used, so its resolution is cached, just before the demotion.
    await t.http.post('/types').set(bearer(tokens.access_token)).send({ name: 'acme.before_demotion', schema: { type: 'object' } }).expect(201);
    expect(await sessions()).toBeGreaterThan(0);

    await t.http.patch(`/users/${user.id}`).set(bearer(admin)).send({ role: 'member' }).expect(200);
    expectError(await t.http.post('/types').set(bearer(tokens.access_token)).send({ name: 'acme.after_demotion', schema: { type: 'object' } }), 403, 'forbidden');
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
    // Introspection agrees with the API.
    const introspected = (await t.http.post('/auth/oauth2/introspect').type('form').send({ token: tokens.access_token, client_id: tool.clientMetadata().client_id }).expect(200)).body;
    expect([introspected.active, introspected.scope.split(' ').sort()]).toEqual([true, ['acme.*:read', 'core.note:read', 'openid']]);
    // A refresh's response lists only what its new token may do.
    const refreshed = await oidc.refreshTokenGrant(tool, tokens.refresh_token!);
    expect(refreshed.scope!.split(' ').sort()).toEqual(['acme.*:read', 'core.note:read', 'openid']);
    expect(await sessions()).toBe(0);

    const again = await connect(browser, rp, { email: 'demoted@example.com' });
    expect(await sessions()).toBeGreaterThan(0);
    await t.http.patch(`/users/${user.id}`).set(bearer(admin)).send({ password: 'a brand new password' }).expect(200);
    expect(await sessions()).toBe(0);
    await t.http.get('/items').set(bearer(again.access_token)).expect(200);
    await t.http.delete(`/users/${user.id}`).set(bearer(admin)).expect(200);
  });

  it('ends the user\'s sign-ins, the provider\'s and the account pages\', on a new password alone, and not on a new name', async () => {
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email: 'rekeyed@example.com', password: 'correct horse battery', name: 'Rekeyed' }).expect(201)).body;
    const app = await registerApp('Silent sign-in app', 'openid core.note:read');
    const browser = request.agent(t.url);
    await connect(browser, app, { email: 'rekeyed@example.com' });
    const account = request.agent(t.url);
    const form = await account.get('/auth/sign-in?return_to=/auth/grants').expect(200);
    await account.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email: 'rekeyed@example.com', password: 'correct horse battery' }).expect(303);
    /** Where an authorization in the browser that may show no page (prompt=none) sends it back to the app. */
    const silently = async () => {
      const verifier = oidc.randomPKCECodeVerifier();
      const url = oidc.buildAuthorizationUrl(app, { redirect_uri: redirectUri, scope: 'openid core.note:read', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 'silent', prompt: 'none' });
      const back = new URL((await browse(browser, url.pathname + url.search)).leftTo!);
      return [back.searchParams.get('error'), back.searchParams.has('code')];
    };
    const accountPage = async () => {
      const res = await account.get('/auth/grants');
      return [res.status, res.headers.location];
    };
    expect([await silently(), await accountPage()]).toEqual([[null, true], [200, undefined]]);

    await t.http.patch(`/users/${user.id}`).set(bearer(admin)).send({ name: 'Renamed' }).expect(200);
    expect([await silently(), await accountPage()]).toEqual([[null, true], [200, undefined]]);

    await t.http.patch(`/users/${user.id}`).set(bearer(admin)).send({ password: 'a brand new password' }).expect(200);
    expect([await silently(), await accountPage()]).toEqual([['login_required', false], [303, '/auth/sign-in?return_to=%2Fauth%2Fgrants']]);
  });

  it('refuses a JSON body that is not an object on the account pages\' JSON routes (400 validation_error), ending nothing', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'json@example.com', password: 'correct horse battery', name: 'Json' }).expect(201);
    const agent = request.agent(t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/sessions').expect(200);
    await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/sessions', csrf: field(form.text, 'csrf'), email: 'json@example.com', password: 'correct horse battery' }).expect(303);
    for (const path of ['/auth/sessions/revoke', '/auth/grants/00000000-0000-4000-8000-000000000001/revoke']) {
      for (const body of ['[]', '[{"csrf":"x"}]']) {
        const res = await agent.post(path).set('Content-Type', 'application/json').send(body);
        expect(expectError(res, 400, 'validation_error').details).toEqual({ fields: [{ field: '(body)', message: 'must be a JSON object' }] });
      }
      // Not signed in: 401 first, as everywhere.
      expectError(await request(t.url).post(path).set('Content-Type', 'application/json').send('[]'), 401, 'unauthorized');
    }
    await agent.get('/auth/sessions').set('Accept', 'application/json').expect(200);
    expect((await agent.post('/auth/sessions/revoke').set('Content-Type', 'application/json').send('{}').expect(200)).body).toEqual({ ended: expect.any(Number) });
  });

  it('throttles failed sign-ins per account, counted alike by both sign-in forms, for unknown emails too; a success starts the count again', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'guessed@example.com', password: 'correct horse battery', name: 'Guessed' }).expect(201);
    const THROTTLED = /Too many failed sign-ins for this account; try again in \d+ minutes?\./;
    const WRONG = 'The email or the password is not right.';
    /** The account pages' sign-in form, in a fresh browser. */
    const accountForm = async (email: string, password: string) => {
      const agent = request.agent(t.url);
      const form = await agent.get('/auth/sign-in?return_to=/auth/grants').expect(200);
      return agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email, password });
    };
    /** An app's sign-in form (an authorization in progress), in a fresh browser. */
    const appForm = async (email: string, password: string) => {
      const agent = request.agent(t.url);
      const url = oidc.buildAuthorizationUrl(rp, { redirect_uri: redirectUri, scope: 'openid', code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()), code_challenge_method: 'S256', state: 'throttle' });
      const signIn = await browse(agent, url.pathname + url.search);
      return agent.post('/auth/sign-in').type('form').send({ uid: field(signIn.page!, 'uid'), csrf: field(signIn.page!, 'csrf'), email, password });
    };
    const refusedWith = (res: request.Response, message: string | RegExp) => {
      expect(res.status).toBe(401);
      expect(res.text).toMatch(message);
      expect(res.headers['set-cookie'] ?? []).not.toEqual(expect.arrayContaining([expect.stringMatching(/^svc_account=[^;]/)]));
    };

    // Nine failures, then the right password: signed in, and the count starts again.
    for (let n = 0; n < 9; n++) refusedWith(await accountForm('guessed@example.com', `guess ${n}`), WRONG);
    expect((await accountForm('guessed@example.com', 'correct horse battery')).status).toBe(303);
    // Ten failures, by either form, in any letter case: the account is refused, right password or not, by either form.
    for (let n = 0; n < 5; n++) refusedWith(await accountForm(' GUESSED@example.com', `guess ${n}`), WRONG);
    for (let n = 0; n < 5; n++) refusedWith(await appForm('guessed@Example.COM', `guess ${n}`), WRONG);
    refusedWith(await accountForm('guessed@example.com', 'correct horse battery'), THROTTLED);
    refusedWith(await appForm('guessed@example.com', 'correct horse battery'), THROTTLED);
    // Another account is not affected.
    expect((await accountForm('ada@example.com', 'correct horse battery')).status).toBe(303);
    // An address with no account answers exactly alike.
    for (let n = 0; n < 10; n++) refusedWith(await accountForm('nobody@example.com', `guess ${n}`), WRONG);
    refusedWith(await accountForm('nobody@example.com', 'correct horse battery'), THROTTLED);
  });
});

describe('OAuth provider: device authorization grant (RFC 8628)', () => {
  let t: TestApp;
  let admin: string;
  let rp: oidc.Configuration;
  let clientId: string;

  beforeAll(async () => {
    t = await startApp({ OAUTH_DEVICE_POLL_INTERVAL: '1' });
    admin = (await bootstrapAdmin(t)).key;
    await t.http.post('/users').set(bearer(admin)).send({ email: 'tv@example.com', password: 'a long tv password', name: 'TV Owner' }).expect(201);
    const client = await t.http
      .post('/auth/clients')
      .set(bearer(admin))
      .send({ client_name: 'Living-room TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'], token_endpoint_auth_method: 'none', scope: 'openid profile email core.note:read' })
      .expect(201);
    clientId = client.body.client_id;
    rp = await oidc.discovery(new URL(t.url), clientId, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
  });
  afterAll(async () => t?.close());

  const poll = (deviceCode: string) =>
    t.http.post('/auth/device/token').type('form').send({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: deviceCode, client_id: clientId });

  /** Opens the verification page as the user would and answers it. */
  async function answer(completeUri: string, form: Record<string, string | string[]>): Promise<number> {
    const agent = request.agent(t.url);
    const page = await agent.get(new URL(completeUri).pathname + new URL(completeUri).search);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Living-room TV');
    const csrf = /name="csrf" value="([^"]*)"/.exec(page.text)![1];
    const userCode = /name="user_code" value="([^"]*)"/.exec(page.text)![1];
    const body = new URLSearchParams({ user_code: userCode, csrf });
    for (const [k, v] of Object.entries(form)) for (const one of [v].flat()) body.append(k, one);
    return (await agent.post('/auth/device/consent').type('form').send(body.toString())).status;
  }

  it('answers with XXX-XXXX user codes, the verification URIs and an interval; pending, slow_down, then tokens with an id_token', async () => {
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid profile email core.note:read' });
    expect(device.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{3}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(device.verification_uri).toBe(`${t.url}/auth/device`);
    expect(device.verification_uri_complete).toBe(`${t.url}/auth/device?user_code=${device.user_code}`);
    expect(device.interval).toBe(1);

    const first = await poll(device.device_code);
    expect(first.status).toBe(400);
    expect(first.body.error).toBe('authorization_pending');
    const tooSoon = await poll(device.device_code);
    expect(tooSoon.status).toBe(400);
    expect(tooSoon.body.error).toBe('slow_down');

    expect(await answer(device.verification_uri_complete!, { email: 'tv@example.com', password: 'a long tv password', decision: 'approve', scope: ['openid', 'email', 'core.note:read'] })).toBe(200);
    const tokens = await oidc.pollDeviceAuthorizationGrant(rp, { ...device, interval: 6 });
    expect(tokens.access_token).toMatch(/^svc_at_/);
    expect(tokens.refresh_token).toMatch(/^svc_rt_/);
    expect(tokens.scope!.split(' ').sort()).toEqual(['core.note:read', 'email', 'openid']);
    // SPEC 5.6: iss, sub, aud, exp and iat always; with email, email and email_verified (sign-up does not verify).
    const claims = tokens.claims()!;
    expect(claims).toMatchObject({ iss: t.url, aud: clientId, email: 'tv@example.com', email_verified: false });
    expect(claims.exp).toBeGreaterThan(claims.iat);
    expect(typeof claims.sub).toBe('string');
    expect(claims).not.toHaveProperty('name');
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
    const [audit] = await t.sql<{ details: { source: string; created: boolean } }>(`SELECT details FROM audit_events WHERE action = 'auth.grant.created'`);
    expect(audit.details).toMatchObject({ source: 'device', created: true });
  }, 30_000);

  it('grows the interval with a slow_down (SPEC 5.5, RFC 8628 3.5)', async () => {
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid' });
    expect(device.interval).toBe(1);
    expect((await poll(device.device_code)).body.error).toBe('authorization_pending');
    expect((await poll(device.device_code)).body.error).toBe('slow_down');
    // 1.5 s on: past the first interval, on time had it not grown (by 5 s: to 6 s).
    await t.sql(`UPDATE oauth_device_polls SET last_poll = last_poll - interval '1.5 seconds' WHERE device_code = $1`, [storedTokenId(device.device_code)]);
    expect((await poll(device.device_code)).body.error).toBe('slow_down');
  });

  it('times the interval from the last poll, a refused one too: a client told to slow down waits the new interval from then', async () => {
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid' });
    /** Moves the code's last poll `seconds` back, as if that much time had passed since. */
    const later = (seconds: number) =>
      t.sql(`UPDATE oauth_device_polls SET last_poll = last_poll - make_interval(secs => $2) WHERE device_code = $1`, [storedTokenId(device.device_code), seconds]);
    expect((await poll(device.device_code)).body.error).toBe('authorization_pending');
    expect((await poll(device.device_code)).body.error).toBe('slow_down'); // the interval is 6 s now
    await later(4);
    expect((await poll(device.device_code)).body.error).toBe('slow_down'); // 4 s after the last poll: 11 s now
    await later(7);
    // 7 s after the last poll, 11 after the one accepted: still faster than the interval.
    expect((await poll(device.device_code)).body.error).toBe('slow_down');
    await later(16);
    expect((await poll(device.device_code)).body.error).toBe('authorization_pending');
  });

  it('finds a user code however it is typed: lower case, without its dash, with spaces, in full-width letters (an East Asian input method)', async () => {
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid' });
    const fullWidth = [...device.user_code].map((c) => (c === '-' ? '\u2010' : String.fromCodePoint(c.codePointAt(0)! + 0xfee0))).join('');
    for (const typed of [device.user_code.toLowerCase(), device.user_code.replace('-', ''), ` ${device.user_code} `, fullWidth]) {
      const page = await t.http.get(`/auth/device?user_code=${encodeURIComponent(typed)}`);
      expect([typed, page.status]).toEqual([typed, 200]);
      expect(page.text).toContain(`<strong>${device.user_code}</strong>`);
    }
  });

  it('counts only the code\'s own client\'s polls: another client\'s poll of the code, or a made-up code, neither slows the device down nor is recorded', async () => {
    const other = await t.http
      .post('/auth/clients')
      .set(bearer(admin))
      .send({ client_name: 'Another TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], token_endpoint_auth_method: 'none', scope: 'openid' })
      .expect(201);
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid' });
    const polls = async () => (await t.sql(`SELECT 1 FROM oauth_device_polls`)).length;
    const before = await polls();
    const theirs = await t.http
      .post('/auth/device/token')
      .type('form')
      .send({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: device.device_code, client_id: other.body.client_id });
    expect([theirs.status, theirs.body.error]).toEqual([400, 'invalid_grant']);
    const madeUp = await poll(randomBytes(32).toString('base64url'));
    expect([madeUp.status, madeUp.body.error]).toEqual([400, 'invalid_grant']);
    expect(await polls()).toBe(before);
    // The device's own first poll, right after, is on time.
    expect((await poll(device.device_code)).body.error).toBe('authorization_pending');
  });

  it('answers unauthorized_client to a client not registered for the device grant', async () => {
    const web = await t.http
      .post('/auth/clients')
      .set(bearer(admin))
      .send({ client_name: 'Web app', redirect_uris: ['https://app.example.com/cb'], token_endpoint_auth_method: 'none' })
      .expect(201);
    const res = await t.http.post('/auth/device').type('form').send({ client_id: web.body.client_id, scope: 'openid' });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('unauthorized_client');
  });

  it('refuses a device authorization naming no scope the client can be given with invalid_scope, issuing no user code', async () => {
    const ask = (scope?: string) => t.http.post('/auth/device').type('form').send({ client_id: clientId, ...(scope === undefined ? {} : { scope }) });
    const deviceCodes = async () => (await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'DeviceCode'`)).length;
    const before = await deviceCodes();
    for (const [scope, description] of [
      [undefined, 'scope is required: openid, profile, email, or API scopes such as core.note:read'],
      ['foo bar', 'none of the requested scopes can be granted: openid, profile, email, or API scopes such as core.note:read'],
      ['core.task:read', 'requested scope is not allowed'],
    ]) {
      const res = await ask(scope);
      expect([scope, res.status, res.body.error, res.body.error_description]).toEqual([scope, 400, 'invalid_scope', description]);
    }
    expect(await deviceCodes()).toBe(before);
    const partial = await ask('core.note:read foo');
    expect([partial.status, partial.body.user_code]).toEqual([200, expect.stringMatching(/^[A-Z]{3}-[A-Z]{4}$/)]);
  });

  it('connects no device for a user deleted while their consent was being recorded: the page says the account is gone, the device gets access_denied', async () => {
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email: 'gone-tv@example.com', password: 'a long tv password', name: 'Gone' }).expect(201)).body;
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid core.note:read' });
    const agent = request.agent(t.url);
    const page = await agent.get(new URL(device.verification_uri_complete!).pathname + new URL(device.verification_uri_complete!).search).expect(200);
    const body = new URLSearchParams({
      user_code: /name="user_code" value="([^"]*)"/.exec(page.text)![1],
      csrf: /name="csrf" value="([^"]*)"/.exec(page.text)![1],
      email: 'gone-tv@example.com',
      password: 'a long tv password',
      decision: 'approve',
    });
    const answered = await deletedWhileDeciding(t, user.id, () => agent.post('/auth/device/consent').type('form').send(body.toString()));
    expect(answered.status).toBe(400);
    expect(answered.text).toContain('no longer exists');
    expect((await poll(device.device_code)).body.error).toBe('access_denied');
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND payload->>'accountId' = $1`, [user.id])).toEqual([]);
  });

  it('refuses a wrong password on the page, and a denial reaches the device as access_denied', async () => {
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid' });
    expect(await answer(device.verification_uri_complete!, { email: 'tv@example.com', password: 'not the password', decision: 'approve' })).toBe(401);
    // A denial too needs the user's password (device.controller.ts): anyone who saw the code could deny it otherwise.
    expect(await answer(device.verification_uri_complete!, { email: 'tv@example.com', password: 'a long tv password', decision: 'deny' })).toBe(200);
    const res = await poll(device.device_code);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('access_denied');
  });

  it('lets one of two consent submissions at once decide, and the device gets what that one decided', async () => {
    const grants = async () => (await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [clientId]))[0].n;
    const audits = async () => (await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM audit_events WHERE action = 'auth.grant.created' AND client_id = $1`, [clientId]))[0].n;
    const approve = { email: 'tv@example.com', password: 'a long tv password', decision: 'approve' };
    /** Opens the page once and sends both forms at once with its cookie; answers the two pages and the device's next poll. */
    async function race(first: Record<string, string>, second: Record<string, string>) {
      const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid core.note:read' });
      const agent = request.agent(t.url);
      const page = await agent.get(new URL(device.verification_uri_complete!).pathname + new URL(device.verification_uri_complete!).search).expect(200);
      const form = (answer: Record<string, string>) => new URLSearchParams({ user_code: field(page.text, 'user_code'), csrf: field(page.text, 'csrf'), ...answer }).toString();
      const pages = await Promise.all([first, second].map((answer) => agent.post('/auth/device/consent').type('form').send(form(answer))));
      return { pages: pages.map((r) => `${r.status} ${/<h1>([^<]*)<\/h1>/.exec(r.text)?.[1]}`), poll: await poll(device.device_code) };
    }

    for (let round = 0; round < 5; round++) {
      const { pages, poll: res } = await race(approve, { ...approve, decision: 'deny' });
      const decided = pages.filter((p) => p.startsWith('200'));
      expect(decided).toHaveLength(1);
      expect(pages.filter((p) => !p.startsWith('200'))).toEqual(['400 Code expired']);
      if (decided[0] === '200 Device connected') expect(res.body.access_token).toMatch(/^svc_at_/);
      else {
        expect(decided[0]).toBe('200 Not connected');
        expect(res.body.error).toBe('access_denied');
      }
    }

    for (let round = 0; round < 3; round++) {
      const auditsBefore = await audits();
      const { pages, poll: res } = await race(approve, approve);
      expect(pages.sort()).toEqual(['200 Device connected', '400 Code expired']);
      expect(res.body.access_token).toMatch(/^svc_at_/);
      // One decision, recorded once, on the user's one grant for the app.
      expect(await grants()).toBe(1);
      expect(await audits()).toBe(auditsBefore + 1);
    }
  }, 30_000);

  it('records consents on several devices on the user\'s one grant for the app; revoking it ends every device\'s tokens', async () => {
    const grants = async () => t.sql<{ id: string }>(`SELECT id FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [clientId]);
    const connectDevice = async (scope: string[]) => {
      const device = await oidc.initiateDeviceAuthorization(rp, { scope: scope.join(' ') });
      expect(await answer(device.verification_uri_complete!, { email: 'tv@example.com', password: 'a long tv password', decision: 'approve', scope })).toBe(200);
      const res = await poll(device.device_code);
      expect(res.body.access_token).toMatch(/^svc_at_/);
      return res.body as { access_token: string; refresh_token: string; scope: string };
    };
    const kitchen = await connectDevice(['openid']);
    const bedroom = await connectDevice(['openid', 'core.note:read']);
    expect(bedroom.scope.split(' ').sort()).toEqual(['core.note:read', 'openid']);
    const [grant, ...more] = await grants();
    expect(more).toEqual([]);
    const consents = await t.sql<{ created: boolean }>(
      `SELECT (details->>'created')::boolean AS created FROM audit_events WHERE action = 'auth.grant.created' AND grant_id = $1`,
      [grant.id],
    );
    expect(consents.filter((c) => c.created)).toHaveLength(1);
    expect(consents.length).toBeGreaterThanOrEqual(2);

    const account = request.agent(t.url);
    const form = await account.get('/auth/sign-in?return_to=/auth/grants').expect(200);
    await account.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email: 'tv@example.com', password: 'a long tv password' }).expect(303);
    await account.post(`/auth/grants/${grant.id}/revoke`).send({}).expect(200);
    for (const tokens of [kitchen, bedroom]) expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
  }, 30_000);

  it('answers expired_token once the device code has expired, and an unknown user code gets an error page', async () => {
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid' });
    // Stored under its digest only (oidc-adapter.ts).
    expect(await rowsHolding(t, [device.device_code])).toEqual([]);
    await t.sql(`UPDATE oidc_models SET payload = jsonb_set(payload, '{exp}', to_jsonb(extract(epoch from now())::int - 5)) WHERE model = 'DeviceCode' AND id = $1`, [storedTokenId(device.device_code)]);
    const res = await poll(device.device_code);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('expired_token');
    const page = await t.http.get('/auth/device?user_code=BCD-FGHJ');
    expect(page.status).toBe(400);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
  });

  it('audits the revocation of a grant whose device code was used twice (SPEC 6.4)', async () => {
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid core.note:read' });
    expect(await answer(device.verification_uri_complete!, { email: 'tv@example.com', password: 'a long tv password', decision: 'approve' })).toBe(200);
    const tokens = await poll(device.device_code);
    expect(tokens.status).toBe(200);
    const [{ grant_id: grantId }] = await t.sql<{ grant_id: string }>(`SELECT grant_id FROM oidc_models WHERE id = $1`, [storedTokenId(device.device_code)]);
    await pollIntervalPassed(t, device.device_code);
    expect((await poll(device.device_code)).body.error).toBe('invalid_grant');
    expectError(await t.http.get('/items').set(bearer(tokens.body.access_token)), 401, 'unauthorized');
    const [{ id: owner }] = await t.sql<{ id: string }>(`SELECT id::text FROM users WHERE email = 'tv@example.com'`);
    const revoked = await t.sql(`SELECT user_id::text, details FROM audit_events WHERE action = 'auth.grant.revoked' AND grant_id = $1`, [grantId]);
    expect(revoked).toEqual([{ user_id: owner, details: { by: 'token_reuse' } }]);
  });

  it('saves no scope an update of the client took away while the consent was being recorded', async () => {
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email: 'narrowed@example.com', password: 'a long tv password', name: 'Narrowed' }).expect(201)).body;
    const tv = (
      await t.http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'Hall TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], token_endpoint_auth_method: 'none', scope: 'openid profile email' })
        .expect(201)
    ).body;
    const device = (await t.http.post('/auth/device').type('form').send({ client_id: tv.client_id, scope: 'openid profile email' }).expect(200)).body;
    const agent = request.agent(t.url);
    const page = await agent.get('/auth/device').query({ user_code: device.user_code }).expect(200);
    const form = { user_code: field(page.text, 'user_code'), csrf: field(page.text, 'csrf'), email: 'narrowed@example.com', password: 'a long tv password', decision: 'approve' };
    // The consent, past every check, waits for the connection's lock (held here) to save its grant while the update commits.
    const waiting = async () => {
      await t.sql('SELECT pg_stat_clear_snapshot()');
      return (await t.sql(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock%'`)).length > 0;
    };
    await t.sql('BEGIN');
    let answered: request.Response;
    try {
      await t.sql('SELECT pg_advisory_xact_lock(hashtext($1))', [`oauth-connection:${user.id}:${tv.client_id}`]);
      const sent = agent.post('/auth/device/consent').type('form').send(form).then((r) => r);
      await waitFor(waiting, 'the consent to wait for the connection\'s lock');
      await t.http.patch(`/auth/clients/${tv.client_id}`).set(bearer(admin)).send({ scope: 'openid' }).expect(200);
      await t.sql('COMMIT');
      answered = await sent;
    } catch (err) {
      await t.sql('ROLLBACK');
      throw err;
    }
    expect(answered.status).toBe(200);
    const [grant] = await t.sql<{ scope: string }>(`SELECT payload->'openid'->>'scope' AS scope FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [tv.client_id]);
    expect(grant.scope).toBe('openid');
    const tokens = await t.http.post('/auth/device/token').type('form').send({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: device.device_code, client_id: tv.client_id });
    expect(tokens.body.scope).toBe('openid');
  });

  it('offers no box for a scope an update of the client took away after the device code was issued', async () => {
    const tv = (
      await t.http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'Den TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], token_endpoint_auth_method: 'none', scope: 'openid profile email' })
        .expect(201)
    ).body;
    const device = (await t.http.post('/auth/device').type('form').send({ client_id: tv.client_id, scope: 'openid profile email' }).expect(200)).body;
    await t.http.patch(`/auth/clients/${tv.client_id}`).set(bearer(admin)).send({ scope: 'openid profile' }).expect(200);
    const page = await request.agent(t.url).get('/auth/device').query({ user_code: device.user_code }).expect(200);
    expect(page.text).toMatch(/<input[^>]*value="profile"/);
    expect(page.text).not.toMatch(/value="email"/);
  });

  /** The verification page of `device`, answered with `form` (email and password added) and the page's `scopes_shown`: the page shown, and the answer's status and heading. */
  const decideDevice = async (device: oidc.DeviceAuthorizationResponse, form: Record<string, string | string[]>, email = 'tv@example.com') => {
    const agent = request.agent(t.url);
    const page = await agent.get(new URL(device.verification_uri_complete!).pathname + new URL(device.verification_uri_complete!).search).expect(200);
    const body = new URLSearchParams({ user_code: field(page.text, 'user_code'), csrf: field(page.text, 'csrf'), email, password: 'a long tv password', scopes_shown: '1' });
    for (const [k, v] of Object.entries(form)) for (const one of [v].flat()) body.append(k, one);
    const res = await agent.post('/auth/device/consent').type('form').send(body.toString());
    return { page: page.text, answer: `${res.status} ${/<h1>([^<]*)<\/h1>/.exec(res.text)?.[1]}` };
  };

  it('grants openid with any device approval, offering no box for it: the device gets its id_token', async () => {
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid core.note:read' });
    const { page, answer: decided } = await decideDevice(device, { decision: 'approve', scope: 'core.note:read' });
    expect(page).toContain('<code>openid</code>');
    expect(page).not.toMatch(/<input[^>]*value="openid"/);
    expect(decided).toBe('200 Device connected');
    const res = await poll(device.device_code);
    expect(res.body.scope.split(' ').sort()).toEqual(['core.note:read', 'openid']);
    expect(typeof res.body.id_token).toBe('string');
  });

  it('takes a device Allow that grants nothing as what it says: access_denied, no grant where there was none; on a grant given before, the unticked scopes refused, whether or not openid was asked', async () => {
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email: 'unticked@example.com', password: 'a long tv password', name: 'Unticked' }).expect(201)).body;
    const grant = () => t.sql(`SELECT payload FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1 AND payload->>'accountId' = $2`, [clientId, user.id]);
    const audits = async () =>
      (await t.sql<{ scope: string }>(`SELECT details->>'scope' AS scope FROM audit_events WHERE action = 'auth.grant.created' AND client_id = $1 AND user_id = $2 ORDER BY created_at`, [clientId, user.id])).map((a) => a.scope);
    const decide = (device: oidc.DeviceAuthorizationResponse, form: Record<string, string | string[]>) => decideDevice(device, form, 'unticked@example.com');
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'core.note:read' });
    expect((await decide(device, { decision: 'approve' })).answer).toBe('200 Not connected');
    expect((await poll(device.device_code)).body.error).toBe('access_denied');
    expect([await grant(), await audits()]).toEqual([[], []]);

    const withOpenid = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid core.note:read' });
    expect((await decide(withOpenid, { decision: 'approve' })).answer).toBe('200 Device connected');
    const res = await poll(withOpenid.device_code);
    expect([res.body.scope, typeof res.body.id_token]).toEqual(['openid', 'string']);

    // Given now, then left unticked on another device without openid: refused on the grant, the earlier token loses it.
    const given = await oidc.initiateDeviceAuthorization(rp, { scope: 'core.note:read' });
    expect((await decide(given, { decision: 'approve', scope: 'core.note:read' })).answer).toBe('200 Device connected');
    const token = (await poll(given.device_code)).body.access_token;
    const introspected = async () => (await t.http.post('/auth/oauth2/introspect').type('form').send({ token, client_id: clientId }).expect(200)).body;
    expect(await introspected()).toMatchObject({ active: true, scope: 'core.note:read' });
    const unticked = await oidc.initiateDeviceAuthorization(rp, { scope: 'core.note:read' });
    expect((await decide(unticked, { decision: 'approve' })).answer).toBe('200 Not connected');
    expect((await poll(unticked.device_code)).body.error).toBe('access_denied');
    expect((await introspected()).scope).toBeUndefined();
    expect(await audits()).toEqual(['openid', 'core.note:read', '']);
  });

  it('says on the device page when nothing asked can be given, offering no Allow; an Allow that still comes reaches the device as access_denied saying nothing could be granted', async () => {
    const registered = (
      await t.http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'Nothing-to-give TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'], token_endpoint_auth_method: 'none', scope: 'openid offline_access core.note:read metadata.types:write' })
        .expect(201)
    ).body;
    const tv = await oidc.discovery(new URL(t.url), registered.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    const pollTv = async (deviceCode: string) =>
      (await t.http.post('/auth/device/token').type('form').send({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: deviceCode, client_id: registered.client_id })).body;
    const allowButton = /<button[^>]*value="approve"/;

    const nothing = await oidc.initiateDeviceAuthorization(tv, { scope: 'offline_access' });
    const { page, answer } = await decideDevice(nothing, { decision: 'approve' });
    expect(page).toContain('This app asks for nothing you can give it');
    expect(page).not.toContain('Nothing beyond signing you in');
    expect(page).not.toMatch(allowButton);
    expect(page).toMatch(/<button[^>]*value="deny"/);
    expect(answer).toBe('200 Not connected');
    expect(await pollTv(nothing.device_code)).toMatchObject({ error: 'access_denied', error_description: 'Nothing the app asked for could be granted' });

    // The page knows the user only from the form it sends: a member's Allow of what only an admin may give comes to nothing.
    const adminOnly = await oidc.initiateDeviceAuthorization(tv, { scope: 'metadata.types:write' });
    expect((await decideDevice(adminOnly, { decision: 'approve', scope: 'metadata.types:write' })).answer).toBe('200 Not connected');
    expect(await pollTv(adminOnly.device_code)).toMatchObject({ error: 'access_denied', error_description: 'Nothing the app asked for could be granted' });

    // Something could be given, and the user unticked it all; a Deny is the user's denial.
    const unticked = await oidc.initiateDeviceAuthorization(tv, { scope: 'core.note:read' });
    const offered = await decideDevice(unticked, { decision: 'approve' });
    expect(offered.page).toMatch(allowButton);
    expect(offered.page).not.toContain('Nothing beyond signing you in');
    expect((await pollTv(unticked.device_code)).error_description).toBe('The user granted none of what the app asked for');
    const denied = await oidc.initiateDeviceAuthorization(tv, { scope: 'core.note:read' });
    await decideDevice(denied, { decision: 'deny' });
    expect((await pollTv(denied.device_code)).error_description).toBe('The user denied the request');

    const signInOnly = await oidc.initiateDeviceAuthorization(tv, { scope: 'openid offline_access' });
    const signedIn = await decideDevice(signInOnly, { decision: 'approve' });
    expect(signedIn.page).toContain('Nothing beyond signing you in.');
    expect(signedIn.answer).toBe('200 Device connected');
  });

  it('draws the device page again after a refused sign-in with the boxes the user unticked still unticked, so an Allow then grants only what was left ticked', async () => {
    const registered = (
      await t.http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'Task TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], token_endpoint_auth_method: 'none', scope: 'openid core.note:read core.task:write metadata.types:write' })
        .expect(201)
    ).body;
    const tv = await oidc.discovery(new URL(t.url), registered.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    /** The scope boxes of a page, each with whether it is ticked. */
    const boxes = (html: string) => Object.fromEntries([...html.matchAll(/<input type="checkbox" name="scope" value="([^"]*)"[^>]*>/g)].map(([input, scope]) => [scope, / checked>$/.test(input)]));
    const device = await oidc.initiateDeviceAuthorization(tv, { scope: 'core.note:read core.task:write' });
    const agent = request.agent(t.url);
    const page = await agent.get(new URL(device.verification_uri_complete!).pathname + new URL(device.verification_uri_complete!).search).expect(200);
    expect(boxes(page.text)).toEqual({ 'core.note:read': true, 'core.task:write': true });
    const send = (form: Record<string, string | string[]>) => {
      const body = new URLSearchParams({ user_code: field(page.text, 'user_code'), csrf: field(page.text, 'csrf'), email: 'tv@example.com', decision: 'approve' });
      for (const [k, v] of Object.entries(form)) for (const one of [v].flat()) body.append(k, one);
      return agent.post('/auth/device/consent').type('form').send(body.toString());
    };
    // core.task:write unticked, a wrong password: the page comes back with it still unticked (and what was not asked for is never offered).
    const wrong = await send({ password: 'not the password', scopes_shown: '1', scope: ['core.note:read', 'metadata.types:write'] });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('The email or the password is not right.');
    expect(boxes(wrong.text)).toEqual({ 'core.note:read': true, 'core.task:write': false });
    // Every box unticked stays so; a form that carried no choice at all is drawn with all ticked, as it would grant all.
    expect(boxes((await send({ password: 'not the password', scopes_shown: '1' })).text)).toEqual({ 'core.note:read': false, 'core.task:write': false });
    expect(boxes((await send({ password: 'not the password' })).text)).toEqual({ 'core.note:read': true, 'core.task:write': true });

    // The user fixes the password only and clicks Allow: the form sends what the redrawn page has ticked.
    const ticked = Object.entries(boxes(wrong.text)).filter(([, on]) => on).map(([scope]) => scope);
    const decided = await send({ password: 'a long tv password', scopes_shown: '1', scope: ticked });
    expect([decided.status, /<h1>([^<]*)<\/h1>/.exec(decided.text)?.[1]]).toEqual([200, 'Device connected']);
    const res = await t.http.post('/auth/device/token').type('form').send({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: device.device_code, client_id: registered.client_id });
    expect([res.status, res.body.scope]).toEqual([200, 'core.note:read']);
  });

  it('counts a wrong password on the device page as a failed sign-in of the account, which the sign-in pages share', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'tv2@example.com', password: 'a long tv password', name: 'TV 2' }).expect(201);
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid' });
    const agent = request.agent(t.url);
    const page = await agent.get(new URL(device.verification_uri_complete!).pathname + new URL(device.verification_uri_complete!).search).expect(200);
    const form = { user_code: field(page.text, 'user_code'), csrf: field(page.text, 'csrf'), email: 'tv2@example.com', decision: 'approve' };
    for (let n = 0; n < 10; n++) expect((await agent.post('/auth/device/consent').type('form').send({ ...form, password: `guess ${n}` })).status).toBe(401);
    const refused = await agent.post('/auth/device/consent').type('form').send({ ...form, password: 'a long tv password' });
    expect(refused.status).toBe(401);
    expect(refused.text).toMatch(/Too many failed sign-ins for this account; try again in \d+ minutes?\./);
    const signIn = request.agent(t.url);
    const signInForm = await signIn.get('/auth/sign-in?return_to=/auth/grants').expect(200);
    const account = await signIn.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(signInForm.text, 'csrf'), email: 'tv2@example.com', password: 'a long tv password' });
    expect(account.status).toBe(401);
    expect(account.text).toContain('Too many failed sign-ins for this account');
    expect((await poll(device.device_code)).body.error).toBe('authorization_pending');
  });
});

describe('device polling under the rate limits (RFC 8628 3.5)', () => {
  const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
  const TIGHT = 30;
  let t: TestApp;
  let admin: string;
  let device: oidc.Configuration;
  let otherDevice: oidc.Configuration;

  beforeAll(async () => {
    // Behind a trusted proxy, each request names its client address (X-Forwarded-For): each test uses its own.
    t = await startApp({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '60', TRUST_PROXY: 'true', OAUTH_DEVICE_POLL_INTERVAL: '1' });
    admin = (await bootstrapAdmin(t)).key;
    const register = async (clientName: string) => {
      const body = { client_name: clientName, grant_types: [DEVICE_GRANT], token_endpoint_auth_method: 'none', scope: 'openid core.note:read' };
      const { client_id } = (await t.http.post('/auth/clients').set(bearer(admin)).send(body).expect(201)).body;
      return oidc.discovery(new URL(t.url), client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    };
    device = await register('Den TV');
    otherDevice = await register('Porch TV');
  });
  afterAll(async () => t?.close());

  const poll = (from: string, app: oidc.Configuration, deviceCode: string) =>
    t.http.post('/auth/oauth2/token').set('X-Forwarded-For', from).type('form').send({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: app.clientMetadata().client_id });
  const rfc8628 = (res: request.Response) => `${res.status} ${['authorization_pending', 'slow_down'].includes(res.body.error) ? 'pending' : res.body.error}`;

  it('answers devices polling from one address as RFC 8628 does, however many poll: their polls do not count against the address\'s token limit', async () => {
    const from = '203.0.113.51';
    const codes = await Promise.all([1, 2, 3].map(() => oidc.initiateDeviceAuthorization(device, { scope: 'openid core.note:read' })));
    // Three devices, twelve polls each: more than the address's tight limit, as a minute of polls every five seconds is.
    const answers: string[] = [];
    for (let round = 0; round < 12; round++) for (const code of codes) answers.push(rfc8628(await poll(from, device, code.device_code)));
    expect(new Set(answers)).toEqual(new Set(['400 pending']));
    // The address's other token requests still have the whole tight limit.
    const { client_id } = (await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'] }).expect(201)).body;
    const guess = await t.http.post('/auth/oauth2/token').set('X-Forwarded-For', from).auth(client_id, 'a wrong secret').type('form').send({ grant_type: 'client_credentials' });
    expect([guess.status, guess.body.error, guess.headers['x-ratelimit-limit'], guess.headers['x-ratelimit-remaining']]).toEqual([401, 'invalid_client', String(TIGHT), String(TIGHT - 1)]);
  });

  it('keeps the tight limit per address for every other token request, and a device\'s poll is still answered as RFC 8628 does once it is reached', async () => {
    const from = '203.0.113.52';
    const { client_id } = (await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'] }).expect(201)).body;
    const guess = () => t.http.post('/auth/oauth2/token').set('X-Forwarded-For', from).auth(client_id, 'a wrong secret').type('form').send({ grant_type: 'client_credentials' });
    for (let i = 0; i < TIGHT; i++) expect((await guess()).status).toBe(401);
    const refused = await guess();
    expect([refused.status, refused.body.error, refused.headers['x-ratelimit-remaining']]).toEqual([429, 'rate_limited', '0']);
    expect(refused.headers['retry-after']).toMatch(/^\d+$/);
    const code = await oidc.initiateDeviceAuthorization(device, { scope: 'openid core.note:read' });
    expect(rfc8628(await poll(from, device, code.device_code))).toBe('400 pending');
  });

  it('counts polls for unknown device codes, or for another client\'s, against the address\'s tight limit: that is guessing', async () => {
    const from = '203.0.113.53';
    const someoneElses = await oidc.initiateDeviceAuthorization(otherDevice, { scope: 'openid core.note:read' });
    for (let i = 0; i < TIGHT / 2; i++) expect((await poll(from, device, `not-a-device-code-${i}`)).body.error).toBe('invalid_grant');
    for (let i = 0; i < TIGHT / 2; i++) expect((await poll(from, device, someoneElses.device_code)).status).toBe(400);
    expect((await poll(from, device, 'one-guess-too-many')).status).toBe(429);
    // The device the code was issued to polls on from that address.
    expect(rfc8628(await poll(from, otherDevice, someoneElses.device_code))).toBe('400 pending');
  });
});

describe('the device page under the sign-in throttle per client address', () => {
  const PER_ADDRESS = 3;
  const THROTTLED = /Too many failed sign-ins for this account; try again in \d+ minutes?\./;
  const WRONG = 'The email or the password is not right.';
  let t: TestApp;
  let rp: oidc.Configuration;

  beforeAll(async () => {
    // Behind a trusted proxy, each request names its client address (X-Forwarded-For); the limit per address lowered.
    t = await startApp({ TRUST_PROXY: 'true', SIGN_IN_MAX_FAILURES_PER_ADDRESS: String(PER_ADDRESS), OAUTH_DEVICE_POLL_INTERVAL: '1' });
    const admin = (await bootstrapAdmin(t)).key;
    await t.http.post('/users').set(bearer(admin)).send({ email: 'tv@example.com', password: 'a long tv password', name: 'TV Owner' }).expect(201);
    const client = await t.http
      .post('/auth/clients')
      .set(bearer(admin))
      .send({ client_name: 'Hall TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], token_endpoint_auth_method: 'none', scope: 'openid core.note:read' })
      .expect(201);
    rp = await oidc.discovery(new URL(t.url), client.body.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
  });
  afterAll(async () => t?.close());

  it('refuses the right password from the address that failed, as the sign-in page does, leaving the device code undecided; from another address it decides', async () => {
    const device = await oidc.initiateDeviceAuthorization(rp, { scope: 'openid core.note:read' });
    const poll = () =>
      t.http.post('/auth/device/token').type('form').send({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: device.device_code, client_id: rp.clientMetadata().client_id });
    /** The device page opened from `address` in a fresh browser, answered Allow with `password`. */
    const answer = async (address: string, password: string) => {
      const agent = request.agent(t.url);
      const link = new URL(device.verification_uri_complete!);
      const page = await agent.get(link.pathname + link.search).set('X-Forwarded-For', address).expect(200);
      const form = { user_code: field(page.text, 'user_code'), csrf: field(page.text, 'csrf'), email: 'tv@example.com', password, decision: 'approve' };
      return agent.post('/auth/device/consent').set('X-Forwarded-For', address).type('form').send(form);
    };

    for (let n = 0; n < PER_ADDRESS; n++) {
      const res = await answer('203.0.113.1', `guess ${n}`);
      expect([res.status, res.text.includes(WRONG)]).toEqual([401, true]);
    }
    const refused = await answer('203.0.113.1', 'a long tv password');
    expect([refused.status, refused.text]).toEqual([401, expect.stringMatching(THROTTLED)]);
    const pending = await poll();
    expect([pending.status, pending.body.error, pending.body.access_token]).toEqual([400, 'authorization_pending', undefined]);

    // The owner, from elsewhere, still connects the device with the same code.
    const approved = await answer('203.0.113.2', 'a long tv password');
    expect([approved.status, /<h1>([^<]*)<\/h1>/.exec(approved.text)?.[1]]).toEqual([200, 'Device connected']);
    await pollIntervalPassed(t, device.device_code);
    expect((await poll()).body.access_token).toMatch(/^svc_at_/);
  });
});

describe('sign-in throttle per client address, with a ceiling per account', () => {
  const PER_ACCOUNT = 25;
  const THROTTLED = /Too many failed sign-ins for this account; try again in \d+ minutes?\./;
  const WRONG = 'The email or the password is not right.';
  let t: TestApp;

  beforeAll(async () => {
    // Behind a trusted proxy, each request names its client address (X-Forwarded-For). Ten failures
    // per address, as by default; the ceiling lowered so that a test reaches it in a few seconds.
    t = await startApp({ TRUST_PROXY: 'true', SIGN_IN_MAX_FAILURES_PER_ACCOUNT: String(PER_ACCOUNT) });
    const admin = (await bootstrapAdmin(t)).key;
    for (const email of ['owner@example.com', 'neighbour@example.com']) {
      await t.http.post('/users').set(bearer(admin)).send({ email, password: 'correct horse battery', name: 'Owner', role: 'admin' }).expect(201);
    }
  });
  afterAll(async () => t?.close());

  /** The account pages' sign-in form, from `address`, in a fresh browser. */
  const signIn = async (address: string, password: string, email = 'owner@example.com') => {
    const agent = request.agent(t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/grants').set('X-Forwarded-For', address).expect(200);
    return agent.post('/auth/sign-in').set('X-Forwarded-For', address).type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email, password });
  };
  /** `times` wrong passwords from `address`, each one checked (not refused unchecked). */
  const fail = async (address: string, times: number, email?: string) => {
    for (let n = 0; n < times; n++) {
      const res = await signIn(address, `guess ${n}`, email);
      expect([res.status, res.text.includes(WRONG)]).toEqual([401, true]);
    }
  };
  const refused = (res: request.Response) => expect([res.status, res.text]).toEqual([401, expect.stringMatching(THROTTLED)]);

  it('locks out the address that failed, not the account\'s owner elsewhere, until the failures from every address reach the account\'s ceiling', async () => {
    await fail('203.0.113.1', 10);
    refused(await signIn('203.0.113.1', 'correct horse battery'));
    // Whoever guesses cannot keep the owner out from another address.
    expect((await signIn('203.0.113.2', 'correct horse battery')).status).toBe(303);
    // Failures from every address add up to the ceiling (the refused attempt and the success above
    // do not count); then the account is refused from every address, right password or not.
    await fail('203.0.113.2', 10);
    await fail('203.0.113.3', PER_ACCOUNT - 20);
    refused(await signIn('203.0.113.4', 'correct horse battery'));
    refused(await signIn('203.0.113.2', 'correct horse battery'));
    // Another account, from the same addresses, is not affected.
    expect((await signIn('203.0.113.1', 'correct horse battery', 'neighbour@example.com')).status).toBe(303);
  });

  it('counts failures in rolling 15 minutes: failures spread across the edge of a window are refused once 10 fall within any 15 minutes', async () => {
    const address = '198.51.100.20';
    const email = 'edge@example.com'; // no account: counted alike
    const redis = new Redis(REDIS_URL);
    try {
      const pattern = `${t.config.REDIS_PREFIX}sign-in:*`;
      const before = new Set(await redis.keys(pattern));
      await fail(address, 1, email);
      const counts = (await redis.keys(pattern)).filter((key) => !before.has(key));
      expect(counts).toHaveLength(2); // the address's and the account's
      /** As if `ms` had passed: every failure in the counts that much older, by Redis's clock which they are scored by. */
      const age = async (ms: number) => {
        for (const key of counts) {
          const failures = await redis.zrange(key, 0, -1, 'WITHSCORES');
          for (let i = 0; i < failures.length; i += 2) await redis.zadd(key, Number(failures[i + 1]) - ms, failures[i]);
        }
      };
      await age(14 * 60_000);
      await fail(address, 9, email);
      refused(await signIn(address, 'correct horse battery', email));
      // The first failure is now 15:05 old, the nine others 65 s: one has left the 15 minutes, so one more is checked, not ten.
      await age(65_000);
      await fail(address, 1, email);
      refused(await signIn(address, 'correct horse battery', email));
    } finally {
      redis.disconnect();
    }
  });

  it('counts every spelling of an account\'s email the sign-in matches as that account (İ lowers to i in PostgreSQL, not in JavaScript)', async () => {
    await fail('192.0.2.9', 10, 'neighbour@example.com');
    // Spelt with U+0130, the email reaches the same account, and its failures: refused, not signed in.
    refused(await signIn('192.0.2.9', 'correct horse battery', 'ne\u0130ghbour@example.com'));
  });

  it('keeps in Redis neither the email nor the address, nor an unkeyed hash of either', async () => {
    await fail('198.51.100.7', 1, ' Hashed@Example.com ');
    const redis = new Redis(REDIS_URL);
    try {
      const keys = await redis.keys(`${t.config.REDIS_PREFIX}sign-in:*`);
      expect(keys.length).toBeGreaterThanOrEqual(2);
      const hashes = (v: string) => ['hex', 'base64', 'base64url'].map((e) => createHash('sha256').update(v).digest(e as 'hex'));
      const forbidden = ['hashed@example.com', '198.51.100.7', ...hashes('hashed@example.com'), ...hashes('198.51.100.7')];
      for (const key of keys) for (const value of forbidden) expect(key).not.toContain(value);
    } finally {
      redis.disconnect();
    }
  });
});

describe('sign-up (SVC_SIGNUP_ENABLED)', () => {
  let open: TestApp;
  let closed: TestApp;

  beforeAll(async () => {
    [open, closed] = await Promise.all([startApp({ SVC_SIGNUP_ENABLED: 'true' }), startApp()]);
  });
  afterAll(async () => {
    await open?.close();
    await closed?.close();
  });

  it('is closed unless enabled', async () => {
    expect((await closed.http.get('/auth/sign-up')).status).toBe(404);
  });

  it('no longer vouches for an admin\'s post-logout redirect URIs once anyone can be an admin: a logout without a session ends on the service', async () => {
    const admin = (await bootstrapAdmin(open)).key;
    const bye = 'https://app.example/bye';
    const client = (await open.http.post('/auth/clients').set(bearer(admin)).send({ token_endpoint_auth_method: 'none', redirect_uris: ['https://app.example/cb'], post_logout_redirect_uris: [bye] }).expect(201)).body;
    const browser = request.agent(open.url);
    const form = await browser.get('/auth/logout').query({ client_id: client.client_id, post_logout_redirect_uri: bye }).expect(200);
    const action = new URL(/<form[^>]*action="([^"]+)"/.exec(form.text)![1].replace(/&amp;/g, '&'), open.url);
    const out = await browser.post(action.pathname).type('form').send({ xsrf: field(form.text, 'xsrf'), logout: 'yes' });
    expect([out.status, out.headers.location]).toEqual([303, `${open.url}/auth/logout/success`]);
  });

  it('links an app\'s sign-in page to sign-up, which comes back to the authorization, for an app that serves anyone', async () => {
    const register = async (app: TestApp) =>
      oidc.discovery(
        new URL(app.url),
        (await app.http.post('/auth/oauth2/register').send({ client_name: 'Open app', redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'none', scope: 'openid' }).expect(201)).body.client_id,
        undefined,
        oidc.None(),
        { execute: [oidc.allowInsecureRequests] },
      );
    const verifier = oidc.randomPKCECodeVerifier();
    const authorize = async (rp: oidc.Configuration) =>
      oidc.buildAuthorizationUrl(rp, { redirect_uri: 'https://app.example/cb', scope: 'openid', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 'new' });
    // Closed: no link.
    const closedUrl = await authorize(await register(closed));
    expect((await browseOn(request.agent(closed.url), closed.url, closedUrl.pathname + closedUrl.search)).page).not.toContain('/auth/sign-up');

    const rp = await register(open);
    const agent = request.agent(open.url);
    const url = await authorize(rp);
    const signIn = await browseOn(agent, open.url, url.pathname + url.search);
    const link = /<a href="([^"]*)">Create one<\/a>/.exec(signIn.page!)![1].replace(/&amp;/g, '&');
    expect(link).toBe(`/auth/sign-up?return_to=${encodeURIComponent(`/auth/?interaction=${field(signIn.page!, 'uid')}`)}`);
    const form = await agent.get(link).expect(200);
    const created = await agent
      .post('/auth/sign-up')
      .type('form')
      .send({ csrf: field(form.text, 'csrf'), return_to: field(form.text, 'return_to'), name: 'Newcomer', email: 'newcomer@example.com', password: 'a long sign-up password' })
      .expect(303);
    expect(created.headers.location).toBe(`/auth/?interaction=${field(signIn.page!, 'uid')}&done=created`);
    // Back at the same authorization's sign-in page, which says the account is made and holds its
    // email; the new account signs in there and goes on to the app.
    const again = await browseOn(agent, open.url, created.headers.location);
    expect(field(again.page!, 'uid')).toBe(field(signIn.page!, 'uid'));
    expect(again.page).toContain('role="status"');
    expect(/id="email"[^>]* value="([^"]*)"/.exec(again.page!)![1]).toBe('newcomer@example.com');
    // Neither without the sign-up: another browser at the same step gets an empty form and no notice.
    const stranger = await browseOn(request.agent(open.url), open.url, url.pathname + url.search);
    expect(stranger.page).not.toContain('role="status"');
    expect(/id="email"[^>]* value="([^"]*)"/.exec(stranger.page!)![1]).toBe('');
    const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(again.page!, 'uid'), csrf: field(again.page!, 'csrf'), email: 'newcomer@example.com', password: 'a long sign-up password' }).expect(303);
    let at = await browseOn(agent, open.url, new URL(signedIn.headers.location, open.url).pathname);
    if (!at.leftTo) {
      const decided = await agent.post('/auth/authorize/decision').type('form').send({ uid: field(at.page!, 'uid'), csrf: field(at.page!, 'csrf'), decision: 'approve' }).expect(303);
      at = await browseOn(agent, open.url, new URL(decided.headers.location, open.url).pathname);
    }
    const tokens = await oidc.authorizationCodeGrant(rp, new URL(at.leftTo!), { pkceCodeVerifier: verifier, expectedState: 'new' });
    const [user] = await open.sql<{ id: string }>(`SELECT id::text FROM users WHERE email = 'newcomer@example.com'`);
    expect(tokens.claims()!.sub).toBe(user.id);
    // Nowhere else: another return_to is dropped.
    const elsewhere = await agent.get('/auth/sign-up?return_to=https://evil.example/').expect(200);
    expect(elsewhere.text).not.toContain('name="return_to"');
  });

  it('creates a tenant whose first user is its admin, and signs them in to the account pages', async () => {
    const agent = request.agent(open.url);
    const form = await agent.get('/auth/sign-up').expect(200);
    const csrf = /name="csrf" value="([^"]*)"/.exec(form.text)![1];
    const short = await agent.post('/auth/sign-up').type('form').send({ csrf, name: 'Lin', email: 'lin@example.com', password: 'short' });
    expect(short.status).toBe(400);
    // An address built to make a backtracking pattern take hours is refused at once, by its length.
    const hostile = await agent.post('/auth/sign-up').type('form').send({ csrf, name: 'Lin', email: `a@${'.'.repeat(300_000)}@`, password: 'a long sign-up password' });
    expect(hostile.status).toBe(400);
    // The same email rule as POST /users.
    expect((await agent.post('/auth/sign-up').type('form').send({ csrf, name: 'Lin', email: 'lin@b.c', password: 'a long sign-up password' })).status).toBe(400);
    const created = await agent.post('/auth/sign-up').type('form').send({ csrf, name: 'Lin', email: 'lin@example.com', password: 'a long sign-up password' });
    expect(created.status).toBe(303);
    expect(created.headers.location).toBe('/auth/security');
    expect((await agent.get('/auth/security')).text).toContain('lin@example.com');
    const [user] = await open.sql<{ role: string; tenant: string }>(`SELECT u.role, t.name AS tenant FROM users u JOIN tenants t ON t.id = u.tenant_id WHERE u.email = 'lin@example.com'`);
    expect(user).toEqual({ role: 'admin', tenant: 'Lin' });
    // In whole milliseconds, as GET /tenants' cursors carry them (so is the root tenant, made by the first key).
    expect(await open.sql(`SELECT name FROM tenants WHERE created_at <> date_trunc('milliseconds', created_at)`)).toEqual([]);
    // The new tenant's log says who made it and its first user: the person signing up, as that user.
    const audited = await open.sql<{ action: string; user_id: string; actor: { kind: string; id: string }; same: boolean }>(
      `SELECT a.action, a.user_id, a.details->'actor' AS actor, a.tenant_id = u.tenant_id AS same FROM audit_events a JOIN users u ON u.id = a.user_id
        WHERE u.email = 'lin@example.com' ORDER BY a.action`,
    );
    expect(audited.map((a) => [a.action, a.actor.kind, a.actor.id === a.user_id, a.same])).toEqual([
      ['tenant.created', 'user', true, true],
      ['user.created', 'user', true, true],
    ]);
    // Signing in renewed the forms' tokens (they are bound to the account cookie): the old one is stale.
    expect((await agent.post('/auth/sign-up').type('form').send({ csrf, name: 'Lin', email: 'LIN@example.com', password: 'a long sign-up password' })).status).toBe(403);
    const fresh = /name="csrf" value="([^"]*)"/.exec((await agent.get('/auth/sign-up').expect(200)).text)![1];
    expect((await agent.post('/auth/sign-up').type('form').send({ csrf: fresh, name: 'Lin', email: 'LIN@example.com', password: 'a long sign-up password' })).status).toBe(400);
    // A name's 200 characters are characters: 150 emoji are 300 UTF-16 units.
    const other = request.agent(open.url);
    const otherCsrf = /name="csrf" value="([^"]*)"/.exec((await other.get('/auth/sign-up').expect(200)).text)![1];
    expect((await other.post('/auth/sign-up').type('form').send({ csrf: otherCsrf, name: '\u{1F642}'.repeat(150), email: 'emoji@example.com', password: 'a long sign-up password' })).status).toBe(303);
    expect((await request(open.url).post('/auth/sign-up').type('form').send({ csrf: 'x', name: 'M', email: 'm@example.com', password: 'a long sign-up password' })).status).toBe(403);

    // The new tenant's admin user gets its first API key on the security page, shown once.
    const security = await agent.get('/auth/security').expect(200);
    const keyCsrf = field(security.text, 'csrf');
    const formNonce = field(security.text, 'form_nonce');
    expect((await agent.post('/auth/keys').type('form').send({ csrf: 'forged', form_nonce: formNonce, label: 'cli' })).status).toBe(403);
    const shown = await agent.post('/auth/keys').type('form').send({ csrf: keyCsrf, form_nonce: formNonce, label: 'cli' }).expect(200);
    expect(shown.headers['cache-control']).toBe('no-store');
    const key = /<code id="key">([^<]+)<\/code>/.exec(shown.text)![1];
    const keys = (await open.http.get('/keys').set(bearer(key)).expect(200)).body.keys;
    expect(keys.map((k: { label: string; role: string }) => [k.label, k.role])).toEqual([['cli', 'admin']]);
    await open.http.post('/users').set(bearer(key)).send({ email: 'member@lin.example', password: 'a long member password', name: 'Member' }).expect(201);
    // A member user has no such form, and its post is refused.
    const member = request.agent(open.url);
    const signInForm = await member.get('/auth/sign-in?return_to=/auth/security').expect(200);
    await member.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(signInForm.text, 'csrf'), email: 'member@lin.example', password: 'a long member password' }).expect(303);
    const memberPage = await member.get('/auth/security').expect(200);
    expect(memberPage.text).not.toContain('/auth/keys');
    const memberCsrf = field((await member.get('/auth/sessions').expect(200)).text, 'csrf');
    const memberPost = await member.post('/auth/keys').type('form').send({ csrf: memberCsrf, form_nonce: 'made-up-by-the-member-00' });
    expect([memberPost.status, memberPost.text.includes('Only an admin user may create API keys')]).toEqual([403, true]);
    expect((await open.http.get('/keys').set(bearer(key)).expect(200)).body.keys).toHaveLength(1);
  });
});

describe('OAuth tokens across two instances', () => {
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    a = await startApp();
    b = await startApp({ DATABASE_URL: a.databaseUrl, REDIS_PREFIX: a.config.REDIS_PREFIX, SVC_BASE_URL: a.url });
  });
  afterAll(async () => {
    await b?.app.close();
    await a?.close();
    await b?.close();
  });

  it('stop working on the other instance the moment they are revoked, though resolutions are cached', async () => {
    const admin = (await bootstrapAdmin(a)).key;
    const client = (await a.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)).body;
    const issue = async () =>
      (await a.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' })).body.access_token as string;
    const token = await issue();
    // Cached on b by use, then revoked through a: b refuses it on the very next request.
    await b.http.get('/items').set(bearer(token)).expect(200);
    await b.http.get('/items').set(bearer(token)).expect(200);
    await a.http.post('/auth/oauth2/revoke').auth(client.client_id, client.client_secret).type('form').send({ token }).expect(200);
    expectError(await b.http.get('/items').set(bearer(token)), 401, 'unauthorized');
  });
});

describe('cookies of a service served over https', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startApp({ SVC_BASE_URL: 'https://svc.example' });
  });
  afterAll(() => t?.close());

  it('are all Secure, and HttpOnly, the pages\' own and the provider\'s', async () => {
    const app = (await t.http.post('/auth/oauth2/register').send({ client_name: 'Secure app', redirect_uris: ['https://app.example.com/cb'], token_endpoint_auth_method: 'none' }).expect(201)).body;
    const authorize = { client_id: app.client_id, response_type: 'code', redirect_uri: 'https://app.example.com/cb', scope: 'openid', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' };
    const cookies = [
      ...((await t.http.get('/auth/sign-in')).headers['set-cookie'] ?? []),
      ...((await t.http.get(`/auth/authorize?${new URLSearchParams(authorize)}`)).headers['set-cookie'] ?? []),
    ];
    expect(cookies.length).toBeGreaterThanOrEqual(2);
    for (const cookie of cookies) expect([cookie, /;\s*Secure/i.test(cookie), /;\s*HttpOnly/i.test(cookie)]).toEqual([cookie, true, true]);
  });
});

/**
 * Sends a consent decision while the user's row is held by a deletion under way: it waits for the
 * decision to block on that row where the grant is recorded, then deletes the user and lets it go.
 */
async function deletedWhileDeciding(t: TestApp, userId: string, send: () => request.Test): Promise<request.Response> {
  const waiting = async () => {
    await t.sql('SELECT pg_stat_clear_snapshot()');
    return (await t.sql(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM users WHERE tenant_id = $1 AND id = $2 FOR SHARE%'`)).length > 0;
  };
  await t.sql('BEGIN');
  try {
    await t.sql(`SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, [userId]);
    const sent = send().then((r) => r);
    await waitFor(waiting, 'the decision to wait for the user\'s row');
    await t.sql(`DELETE FROM users WHERE id = $1`, [userId]);
    await t.sql('COMMIT');
    return await sent;
  } catch (err) {
    await t.sql('ROLLBACK');
    throw err;
  }
}
