/**
 * Admins managing OAuth clients (/auth/clients): listing and reading without secrets, updating
 * (what is taken away leaves the grants and tokens at once), deletion
 * that ends every token and grant of the client at once (audited), secret rotation, and who
 * manages which client (the tenant's admins; a root-tenant admin for openly registered ones).
 * Tokens are real: client credentials with HTTP Basic, and an authorization code a user approves
 * in the sign-in and consent pages.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Client as PgClient } from 'pg';
import request from 'supertest';
import { browse, field } from './support/browse';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';
import { Receiver } from './support/receiver';
import { SseClient } from './support/sse';
import { waitFor } from './support/wait';

const redirectUri = 'https://app.example.com/callback';
const password = 'correct horse battery';

interface Client {
  client_id: string;
  client_secret?: string;
}

describe('OAuth clients: admin listing, updates, deletion and secret rotation', () => {
  let t: TestApp;
  let root: string;
  let admin: string;
  let otherAdmin: string;

  beforeAll(async () => {
    t = await startApp();
    root = (await bootstrapAdmin(t)).key;
    admin = (await createTenant(t, root, 'acme')).key;
    otherAdmin = (await createTenant(t, root, 'other')).key;
  });
  afterAll(async () => t?.close());

  const register = async (body: Record<string, unknown>, key = admin): Promise<Client> =>
    (await t.http.post('/auth/clients').set(bearer(key)).send(body).expect(201)).body;
  const serviceAccount = () => register({ client_name: 'importer', grant_types: ['client_credentials'], scope: 'core.note:read' });
  const clientCredentials = (c: Client, secret = c.client_secret!) =>
    t.http.post('/auth/token').auth(c.client_id, secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' });
  const tokenOf = async (c: Client) => {
    const res = await clientCredentials(c);
    if (res.status !== 200) throw new Error(`client_credentials: ${res.status} ${res.text}`);
    return res.body.access_token as string;
  };
  const introspect = (c: Client, token: string, secret = c.client_secret!) => t.http.post('/auth/oauth2/introspect').auth(c.client_id, secret).type('form').send({ token });

  /** An authorization request of `c` for `scope`, and the PKCE verifier of its code. */
  const authorization = (c: Client, scope: string, redirect = redirectUri) => {
    const verifier = randomBytes(32).toString('base64url');
    const query = new URLSearchParams({
      client_id: c.client_id,
      redirect_uri: redirect,
      response_type: 'code',
      scope,
      state: 'st',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
    });
    return { path: `/auth/authorize?${query}`, verifier };
  };

  /** `email` signs in and approves `client`'s request for `scope`; the tokens the client gets for the code. */
  const approve = async (c: Client, email: string, scope = 'openid core.note:read', agent = request.agent(t.url)) => {
    const { path, verifier } = authorization(c, scope);
    const signIn = await browse(agent, t.url, path);
    const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(signIn.page!, 'uid'), csrf: field(signIn.page!, 'csrf'), email, password });
    const consent = await browse(agent, t.url, new URL(signedIn.headers.location, t.url).pathname);
    const decision = await agent.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' });
    const back = await browse(agent, t.url, new URL(decision.headers.location, t.url).pathname);
    const code = new URL(back.leftTo!).searchParams.get('code')!;
    const tokens = await t.http.post('/auth/token').auth(c.client_id, c.client_secret!).type('form').send({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier });
    if (tokens.status !== 200) throw new Error(`code exchange: ${tokens.status} ${tokens.text}`);
    return tokens.body as { access_token: string; refresh_token: string; scope: string };
  };
  const webApp = () =>
    register({ client_name: 'Notes app', redirect_uris: [redirectUri], grant_types: ['authorization_code', 'refresh_token', 'client_credentials'], scope: 'openid core.note:read' });

  it('lists the tenant\'s clients newest first, a page at a time, and reads one, never with a secret', async () => {
    const made = [await serviceAccount(), await register({ client_name: 'spa', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' }), await serviceAccount()];
    await register({ grant_types: ['client_credentials'] }, otherAdmin);
    const seen: Array<Record<string, unknown>> = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: request.Response = await t.http.get('/auth/clients').query({ limit: 2, ...(cursor ? { cursor } : {}) }).set(bearer(admin)).expect(200);
      expect(res.body.clients.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.clients);
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(2);
    // Only this tenant's, each once, in the order of one long page.
    expect(seen.map((c) => c.client_id).sort()).toEqual(made.map((c) => c.client_id).sort());
    const whole = (await t.http.get('/auth/clients').set(bearer(admin)).expect(200)).body;
    expect([whole.clients.map((c: Client) => c.client_id), whole.next_cursor]).toEqual([seen.map((c) => c.client_id), null]);
    expect(seen.filter((c) => 'client_secret' in c)).toEqual([]);
    // Cursors this service did not make are 400, a fraction of a second included (registration times are whole seconds).
    const forged = (position: unknown[]) => Buffer.from(JSON.stringify(position)).toString('base64url');
    for (const cursor of ['nonsense', forged(['2026-01-01T00:00:00.500Z', 'abc']), forged(['2026-01-01T00:00:00.000Z', 'a b'])]) {
      expectError(await t.http.get('/auth/clients').query({ cursor }).set(bearer(admin)), 400, 'validation_error');
    }
    const text = JSON.stringify(seen);
    for (const c of made) if (c.client_secret) expect(text).not.toContain(c.client_secret);
    expect(seen.find((c) => c.client_name === 'spa')).toMatchObject({ token_endpoint_auth_method: 'none', tenant_id: expect.any(String), extension_permissions: {} });

    const one = (await t.http.get(`/auth/clients/${made[0].client_id}`).set(bearer(admin)).expect(200)).body;
    expect(one).toMatchObject({ client_id: made[0].client_id, client_name: 'importer', grant_types: ['client_credentials'], scope: 'core.note:read' });
    expect(one).not.toHaveProperty('client_secret');
    expectError(await t.http.get(`/auth/clients/${made[0].client_id}`).set(bearer(otherAdmin)), 404, 'not_found');
    expectError(await t.http.get(`/auth/clients/${made[0].client_id}`).set(bearer(root)), 404, 'not_found');
    expectError(await t.http.get('/auth/clients/no-such-client').set(bearer(admin)), 404, 'not_found');
    expectError(await t.http.get('/auth/clients?cursor=bogus').set(bearer(admin)), 400, 'validation_error');
    expectError(await t.http.get('/auth/clients?limit=0').set(bearer(admin)), 400, 'validation_error');
  });

  it('registers once per Idempotency-Key: a retry, even concurrent, gets the same client and secret', async () => {
    const key = randomBytes(16).toString('hex');
    const body = { client_name: 'retried', redirect_uris: [redirectUri] };
    const send = (b: Record<string, unknown> = body) => t.http.post('/auth/clients').set(bearer(admin)).set('Idempotency-Key', key).send(b);
    const answers = await Promise.all(Array.from({ length: 8 }, () => send()));
    expect(new Set(answers.map((r) => r.status))).toEqual(new Set([201]));
    expect(new Set(answers.map((r) => `${r.body.client_id} ${r.body.client_secret}`)).size).toBe(1);
    expect(answers.filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(7);
    // Every answer, the replays too, names where the client is read.
    expect(new Set(answers.map((r) => r.headers.location))).toEqual(new Set([`/auth/clients/${answers[0].body.client_id}`]));
    await t.http.get(answers[0].headers.location).set(bearer(admin)).expect(200);
    const made = await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Client' AND payload->>'client_name' = 'retried'`);
    expect(made).toHaveLength(1);
    expectError(await send({ ...body, client_name: 'another' }), 409, 'conflict');
  });

  it('refuses a malformed client id (400 invalid_id) and callers that are not admins (403)', async () => {
    const c = await serviceAccount();
    for (const res of [
      await t.http.get('/auth/clients/a%20b').set(bearer(admin)),
      await t.http.delete('/auth/clients/a%2Cb').set(bearer(admin)),
      await t.http.post(`/auth/clients/${'x'.repeat(101)}/secret`).set(bearer(admin)),
    ]) {
      expect(expectError(res, 400, 'invalid_id').details).toEqual({ field: 'client_id' });
    }
    const member = (await createKey(t, admin, { label: 'member' })).key;
    expectError(await t.http.get('/auth/clients').set(bearer(member)), 403, 'forbidden');
    expectError(await t.http.delete(`/auth/clients/${c.client_id}`).set(bearer(member)), 403, 'forbidden');
    expectError(await t.http.post(`/auth/clients/${c.client_id}/secret`).set(bearer(member)), 403, 'forbidden');
    // Nor may the client's own token manage it.
    expectError(await t.http.delete(`/auth/clients/${c.client_id}`).set(bearer(await tokenOf(c))), 403, 'forbidden');
    await t.http.get(`/auth/clients/${c.client_id}`).set(bearer(admin)).expect(200);
    // Registration still has the provider check the metadata.
    expectError(await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'], token_endpoint_auth_method: 'none' }), 400, 'validation_error');
  });

  it('holds a client\'s name, which the pages show users, to the service\'s name rule (400 validation_error naming client_name)', async () => {
    const send = (client_name: string) => t.http.post('/auth/clients').set(bearer(admin)).send({ client_name, redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' });
    // A bidirectional override makes "Notes \u202Eppa yliad" read "Notes daily app"; a line break or control character is no name either.
    for (const client_name of ['x'.repeat(201), 'Notes \u202Eppa yliad', 'Notes \u2067app', 'Notes\napp', 'Notes\u0085', '   ', '']) {
      expect([client_name.slice(0, 20), badFields(await send(client_name))]).toEqual([client_name.slice(0, 20), ['client_name']]);
    }
    // Counted as code points, as the OpenAPI document's maxLength counts them.
    expect((await send('😀'.repeat(200)).expect(201)).body.client_name).toBe('😀'.repeat(200));
    await send('Ünïcödé notes ❤️').expect(201);
  });

  it('holds a name of only invisible characters (zero-width, fillers, tags) blank, on POST /auth/clients and open registration alike', async () => {
    // The consent page would ask "Allow <strong>\u200b</strong> to:", naming no app.
    const registered = async () => Number((await t.sql<{ n: string }>(`SELECT count(*) AS n FROM oidc_models WHERE model = 'Client'`))[0].n);
    const before = await registered();
    for (const client_name of ['\u200b', '\u3164', '\u2800', '\u00ad\u034f', '\u2060', '\u115f\u1160', '\u{E0041}\u{E0042}']) {
      const body = { client_name, redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' };
      expect([client_name, badFields(await t.http.post('/auth/clients').set(bearer(admin)).send(body))]).toEqual([client_name, ['client_name']]);
      const open = await t.http.post('/auth/oauth2/register').send(body);
      expect([client_name, open.status, open.body.error]).toEqual([client_name, 400, 'invalid_client_metadata']);
    }
    expect(await registered()).toBe(before);
  });

  it('cuts a refused redirect URI quoted in open registration\'s error between characters, never inside an emoji', async () => {
    // The quote stops at 100 UTF-16 units, here the first half of the emoji.
    const uri = `https://user@example.com/${'b'.repeat(74)}😀/x`;
    const res = await t.http.post('/auth/oauth2/register').send({ client_name: 'cut', redirect_uris: [uri], token_endpoint_auth_method: 'none' }).expect(400);
    expect(res.body.error).toBe('invalid_redirect_uri');
    expect(res.body.error_description).toBe(`https://user@example.com/${'b'.repeat(74)}…: must not carry a user name or password`);
    expect(res.text).not.toMatch(/\\ud83d/i);
  });

  it('changes a client in part (PATCH): absent fields stay, null removes a description, the result checked as registration checks it', async () => {
    const app = await register({
      client_name: 'Notes app',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
      scope: 'openid core.note:read',
      logo_uri: 'https://app.example.com/logo.png',
      contacts: ['ops@example.com'],
    });
    const patch = (body: Record<string, unknown>, key = admin, id = app.client_id) => t.http.patch(`/auth/clients/${id}`).set(bearer(key)).send(body);
    const changed = (await patch({ client_name: 'Notes', logo_uri: null, redirect_uris: [redirectUri, 'http://127.0.0.1/cb'] }).expect(200)).body;
    expect(changed).toMatchObject({ client_id: app.client_id, client_name: 'Notes', redirect_uris: [redirectUri, 'http://127.0.0.1/cb'], scope: 'openid core.note:read', contacts: ['ops@example.com'] });
    expect(changed).not.toHaveProperty('logo_uri');
    expect(changed).not.toHaveProperty('client_secret');
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body).toEqual(changed);
    // The secret is the one registration gave, and still authenticates.
    await t.http.get('/items').set(bearer(await tokenOf(app))).expect(200);

    // Plain http away from a loopback host is refused as at registration, in the same form, and nothing changes.
    const plain = await patch({ redirect_uris: ['http://app.example.com/cb'] });
    expectError(plain, 400, 'validation_error');
    expect(badFields(plain)).toEqual(['redirect_uris']);
    expect(badFields(await t.http.post('/auth/clients').set(bearer(admin)).send({ redirect_uris: ['http://app.example.com/cb'] }))).toEqual(['redirect_uris']);
    expect(badFields(await patch({ post_logout_redirect_uris: ['http://app.example.com/bye'] }))).toEqual(['post_logout_redirect_uris']);
    expect(badFields(await patch({ client_name: 'Notes \u202Eppa' }))).toEqual(['client_name']);
    // Not changeable here: the id, the secret (its own route), the kind of client; nor may the scope go (that would allow every scope).
    for (const body of [{ client_secret: 'x' }, { client_id: 'x' }, { grant_types: ['client_credentials'] }, { token_endpoint_auth_method: 'none' }, { scope: null }, { redirect_uris: null }]) {
      expectError(await patch(body), 400, 'validation_error');
    }
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body).toEqual(changed);

    // Who may: the tenant's admins, as for the neighbouring routes.
    expectError(await patch({ client_name: 'taken' }, otherAdmin), 404, 'not_found');
    expectError(await patch({ client_name: 'taken' }, root), 404, 'not_found');
    expectError(await patch({ client_name: 'x' }, admin, 'no-such-client'), 404, 'not_found');
    expectError(await patch({ client_name: 'x' }, admin, 'a%20b'), 400, 'invalid_id');
    expectError(await patch({ client_name: 'taken' }, (await createKey(t, admin, { label: 'member' })).key), 403, 'forbidden');
    expectError(await patch({ client_name: 'taken' }, await tokenOf(app)), 403, 'forbidden');
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body.client_name).toBe('Notes');
  });

  it('refuses a redirect or logout URI, grant type or response type listed twice (400 validation_error naming the list), on POST and PATCH, compared exactly as sent', async () => {
    const other = 'http://127.0.0.1/cb';
    const post = (body: Record<string, unknown>) => t.http.post('/auth/clients').set(bearer(admin)).send({ token_endpoint_auth_method: 'none', ...body });
    expect(badFields(await post({ redirect_uris: [redirectUri], grant_types: ['authorization_code', 'authorization_code', 'refresh_token'] }))).toEqual(['grant_types']);
    expect(badFields(await post({ redirect_uris: [redirectUri], response_types: ['code', 'code'] }))).toEqual(['response_types']);
    expect(badFields(await post({ redirect_uris: [redirectUri, other, redirectUri] }))).toEqual(['redirect_uris']);
    expect(badFields(await post({ redirect_uris: [redirectUri], post_logout_redirect_uris: [other, other] }))).toEqual(['post_logout_redirect_uris']);
    expect(badFields(await post({ redirect_uris: [other, other], post_logout_redirect_uris: [other, other] }))).toEqual(['redirect_uris', 'post_logout_redirect_uris']);
    // Not the same string, so not the same URI here (the provider matches redirects exactly).
    const app = await register({ redirect_uris: [redirectUri, `${redirectUri}/`], post_logout_redirect_uris: [other], token_endpoint_auth_method: 'none' });
    const patch = (body: Record<string, unknown>) => t.http.patch(`/auth/clients/${app.client_id}`).set(bearer(admin)).send(body);
    expect(badFields(await patch({ redirect_uris: [redirectUri, redirectUri] }))).toEqual(['redirect_uris']);
    expect(badFields(await patch({ client_name: 'Twice', post_logout_redirect_uris: [other, 'http://127.0.0.1/bye', other] }))).toEqual(['post_logout_redirect_uris']);
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body).toMatchObject({ redirect_uris: [redirectUri, `${redirectUri}/`], post_logout_redirect_uris: [other] });
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body).not.toHaveProperty('client_name');
    // A client stored with a repeat before the rule can still be changed otherwise, and its list mended.
    await t.sql(`UPDATE oidc_models SET payload = jsonb_set(payload, '{redirect_uris}', $2::jsonb) WHERE model = 'Client' AND id = $1`, [app.client_id, JSON.stringify([redirectUri, redirectUri])]);
    expect((await patch({ client_name: 'Older app' })).status).toBe(200);
    expect((await patch({ redirect_uris: [redirectUri] })).body).toMatchObject({ client_name: 'Older app', redirect_uris: [redirectUri] });
    // Open registration refuses them alike, in RFC 7591's form (the provider names redirect URI problems invalid_redirect_uri).
    for (const body of [
      { redirect_uris: [redirectUri, redirectUri] },
      { redirect_uris: [redirectUri], post_logout_redirect_uris: ['https://app.example.com/bye', 'https://app.example.com/bye'] },
      { redirect_uris: [redirectUri], grant_types: ['authorization_code', 'refresh_token', 'refresh_token'] },
    ]) {
      const open = await t.http.post('/auth/oauth2/register').send({ client_name: 'Open twice', token_endpoint_auth_method: 'none', ...body });
      expect(open.status).toBe(400);
      expect(['invalid_redirect_uri', 'invalid_client_metadata']).toContain(open.body.error);
    }
  });

  it('records no change for a PATCH that only reorders the client\'s scope, URI lists or contacts (they are sets)', async () => {
    const app = await register({
      redirect_uris: [redirectUri, 'http://127.0.0.1/cb'],
      post_logout_redirect_uris: ['https://app.example.com/bye', 'http://127.0.0.1/bye'],
      contacts: ['ops@example.com', 'dev@example.com'],
      scope: 'openid core.note:read core.note:write',
      token_endpoint_auth_method: 'none',
    });
    const patch = (body: Record<string, unknown>) => t.http.patch(`/auth/clients/${app.client_id}`).set(bearer(admin)).send(body).expect(200);
    const changes = async () =>
      (await t.sql<{ details: { changed: string[] } }>(`SELECT details FROM audit_events WHERE action = 'auth.client.updated' AND client_id = $1 ORDER BY id`, [app.client_id])).map((r) => r.details.changed);
    const reordered = {
      redirect_uris: ['http://127.0.0.1/cb', redirectUri],
      post_logout_redirect_uris: ['http://127.0.0.1/bye', 'https://app.example.com/bye'],
      contacts: ['dev@example.com', 'ops@example.com'],
      scope: 'core.note:write openid core.note:read',
    };
    await patch(reordered);
    expect(await changes()).toEqual([]);
    await patch({ ...reordered, client_name: 'Renamed', scope: 'openid core.note:read' });
    expect(await changes()).toEqual([['client_name', 'scope']]);
  });

  it('refuses, after a PATCH took it away, an authorization to a redirect URI and a code issued for it; the grant stays', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'dan@example.com', password, name: 'Dan' }).expect(201);
    const app = await webApp();
    const browser = request.agent(t.url);
    const dan = await approve(app, 'dan@example.com', 'openid core.note:read', browser);
    // A code issued for the old URI, not yet exchanged when the URI goes.
    const pending = authorization(app, 'openid core.note:read');
    const code = new URL((await browse(browser, t.url, pending.path)).leftTo!).searchParams.get('code')!;
    await t.http.patch(`/auth/clients/${app.client_id}`).set(bearer(admin)).send({ redirect_uris: ['https://app.example.com/new-callback'] }).expect(200);
    const late = await t.http.post('/auth/token').auth(app.client_id, app.client_secret!).type('form').send({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: pending.verifier });
    expect([late.status, late.body.error]).toEqual([400, 'invalid_grant']);

    const refused = await t.http.get(authorization(app, 'openid core.note:read').path);
    expect([refused.status, refused.headers.location]).toEqual([400, undefined]);
    expect(refused.text).toContain('redirect_uri');
    const moved = await t.http.get(authorization(app, 'openid core.note:read', 'https://app.example.com/new-callback').path);
    expect(moved.status).toBe(303);
    // Not a revocation: the user's tokens keep working.
    await t.http.get('/items').set(bearer(dan.access_token)).expect(200);
    await t.http.post('/auth/token').auth(app.client_id, app.client_secret!).type('form').send({ grant_type: 'refresh_token', refresh_token: dan.refresh_token }).expect(200);
  });

  it('holds a narrowed scope at once: the token in hand, its refresh and the next authorization get no scope taken away', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'eve@example.com', password, name: 'Eve' }).expect(201);
    const app = await register({ client_name: 'Writer', redirect_uris: [redirectUri], scope: 'openid core.note:read core.note:write' });
    const browser = request.agent(t.url);
    const eve = await approve(app, 'eve@example.com', 'openid core.note:read core.note:write', browser);
    const note = (token: string) => t.http.post('/items').set(bearer(token)).send({ type: 'core.note', properties: { title: 'n' } });
    await note(eve.access_token).expect(201);

    await t.http.patch(`/auth/clients/${app.client_id}`).set(bearer(admin)).send({ scope: 'openid core.note:read' }).expect(200);
    // The token in hand (resolved and cached before) lost the write.
    expectError(await note(eve.access_token), 403, 'type_not_permitted');
    await t.http.get('/items').set(bearer(eve.access_token)).expect(200);
    // Its grant holds no more than the client may ask for; it was narrowed, not revoked.
    const [grant] = await t.sql<{ payload: { resources: Record<string, string> } }>(`SELECT payload FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [app.client_id]);
    expect(Object.values(grant.payload.resources)).toEqual(['core.note:read']);
    // A refresh, even asking for the write by name, gets none.
    const refreshed = await t.http.post('/auth/token').auth(app.client_id, app.client_secret!).type('form').send({ grant_type: 'refresh_token', refresh_token: eve.refresh_token }).expect(200);
    expect(refreshed.body.scope.split(' ')).not.toContain('core.note:write');
    expectError(await note(refreshed.body.access_token), 403, 'type_not_permitted');
    await t.http.get('/items').set(bearer(refreshed.body.access_token)).expect(200);
    // The next authorization, in the browser already signed in, gets the read alone.
    const { path, verifier } = authorization(app, 'openid core.note:read core.note:write');
    const back = await browse(browser, t.url, path);
    const code = new URL(back.leftTo!).searchParams.get('code')!;
    const again = await t.http.post('/auth/token').auth(app.client_id, app.client_secret!).type('form').send({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier }).expect(200);
    expect(again.body.scope.split(' ').sort()).toEqual(['core.note:read', 'openid']);
    expectError(await note(again.body.access_token), 403, 'type_not_permitted');
  });

  it("holds a client-credentials token in hand to the client's narrowed scope, at the API and at introspection", async () => {
    const app = await register({ client_name: 'Importer', grant_types: ['client_credentials'], scope: 'core.note:read core.note:write' });
    const issued = await t.http.post('/auth/token').auth(app.client_id, app.client_secret!).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read core.note:write' }).expect(200);
    const token = issued.body.access_token as string;
    const note = () => t.http.post('/items').set(bearer(token)).send({ type: 'core.note', properties: { title: 'n' } });
    await note().expect(201);

    await t.http.patch(`/auth/clients/${app.client_id}`).set(bearer(admin)).send({ scope: 'core.note:read' }).expect(200);
    expectError(await note(), 403, 'type_not_permitted');
    await t.http.get('/items').set(bearer(token)).expect(200);
    const seen = await introspect(app, token).expect(200);
    expect([seen.body.active, seen.body.scope]).toEqual([true, 'core.note:read']);
  });

  it('ends a consent in progress that asks for a scope a PATCH took away: the grant never gets it', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'fay@example.com', password, name: 'Fay' }).expect(201);
    const app = await register({ client_name: 'Writer', redirect_uris: [redirectUri], scope: 'openid core.note:read core.note:write' });
    const browser = request.agent(t.url);
    const signIn = await browse(browser, t.url, authorization(app, 'openid core.note:read core.note:write').path);
    const signedIn = await browser.post('/auth/sign-in').type('form').send({ uid: field(signIn.page!, 'uid'), csrf: field(signIn.page!, 'csrf'), email: 'fay@example.com', password });
    const consent = await browse(browser, t.url, new URL(signedIn.headers.location, t.url).pathname);
    expect(consent.page).toContain('core.note:write');

    await t.http.patch(`/auth/clients/${app.client_id}`).set(bearer(admin)).send({ scope: 'openid core.note:read' }).expect(200);
    const decision = await browser.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' });
    expect(decision.status).toBeGreaterThanOrEqual(400);
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [app.client_id])).toEqual([]);
  });

  it('documents the routes in /openapi.json, errors in the envelope, the rotated secret as required', async () => {
    const doc = (await t.http.get('/openapi.json').expect(200)).body;
    const op = (path: string, method: string) => doc.paths[path]?.[method];
    const schema = (ref: string) => doc.components.schemas[ref.split('/').pop()!];
    expect(Object.keys(op('/auth/clients', 'get').responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '429']));
    expect(Object.keys(op('/auth/clients/{client_id}', 'get').responses)).toEqual(expect.arrayContaining(['200', '400', '404']));
    expect(Object.keys(op('/auth/clients/{client_id}', 'delete').responses)).toEqual(expect.arrayContaining(['200', '400', '404']));
    const update = op('/auth/clients/{client_id}', 'patch');
    expect(Object.keys(update.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '404', '429']));
    expect(Object.keys(schema(update.requestBody.content['application/json'].schema.$ref).properties).sort()).toEqual(
      ['client_name', 'client_uri', 'contacts', 'jwks_uri', 'logo_uri', 'policy_uri', 'post_logout_redirect_uris', 'redirect_uris', 'scope', 'tos_uri'],
    );
    expect(op('/auth/clients', 'post').responses['201'].headers).toHaveProperty('Location');
    const rotate = op('/auth/clients/{client_id}/secret', 'post');
    expect(Object.keys(rotate.responses)).toEqual(expect.arrayContaining(['200', '400', '404', '409']));
    expect(JSON.stringify(rotate.responses['409'])).toContain('ErrorEnvelope');
    expect(rotate.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(['client_id', 'Idempotency-Key']));
    for (const [path, method] of [['/auth/clients', 'get'], ['/auth/clients/{client_id}', 'get'], ['/auth/clients/{client_id}', 'patch'], ['/auth/clients/{client_id}', 'delete'], ['/auth/clients/{client_id}/secret', 'post']]) {
      const responses = Object.entries<{ description?: string }>(op(path, method).responses);
      expect(responses.filter(([, r]) => !r.description)).toEqual([]);
      if (method !== 'get') expect(Object.keys(op(path, method).responses)).toEqual(expect.arrayContaining(['413', '415']));
      expect(op(path, method).security).toEqual([{ bearer: [] }]);
    }
    expect(schema(rotate.responses['200'].content['application/json'].schema.$ref).required).toContain('client_secret');
    const listed = schema(op('/auth/clients', 'get').responses['200'].content['application/json'].schema.$ref);
    expect(Object.keys(listed.properties)).toEqual(['clients', 'next_cursor']);
    expect(schema(listed.properties.clients.items.$ref).properties).not.toHaveProperty('client_secret');
  });

  it('deletes a client: its tokens are 401 at once, its secret gets nothing, each grant is ended and audited (by client_deleted)', async () => {
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email: 'ada@example.com', password, name: 'Ada' }).expect(201)).body;
    const app = await webApp();
    const sibling = await serviceAccount();
    const machine = await tokenOf(app);
    const ada = await approve(app, 'ada@example.com');
    for (const token of [machine, ada.access_token]) {
      await t.http.get('/items').set(bearer(token)).expect(200);
      expect((await introspect(app, token)).body.active).toBe(true);
    }
    const [{ id: grantId }] = await t.sql<{ id: string }>(`SELECT id FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [app.client_id]);
    expect((await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Session' AND payload->'authorizations' ? $1`, [app.client_id])).length).toBe(1);

    expectError(await t.http.delete(`/auth/clients/${app.client_id}`).set(bearer(otherAdmin)), 404, 'not_found');
    expectError(await t.http.delete(`/auth/clients/${app.client_id}`).set(bearer(root)), 404, 'not_found');
    await t.http.get('/items').set(bearer(machine)).expect(200);

    const deleted = await t.http.delete(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200);
    expect(deleted.body).toMatchObject({ client_id: app.client_id, client_name: 'Notes app' });
    expect(deleted.body).not.toHaveProperty('client_secret');

    for (const token of [machine, ada.access_token]) {
      expectError(await t.http.get('/items').set(bearer(token)), 401, 'unauthorized');
      // The client cannot ask about it any more, and another client learns nothing.
      expect([(await introspect(app, token)).status, (await introspect(app, token)).body.error]).toEqual([401, 'invalid_client']);
      expect((await introspect(sibling, token)).body).toEqual({ active: false });
    }
    const again = await clientCredentials(app);
    expect([again.status, again.body.error]).toEqual([401, 'invalid_client']);
    const refresh = await t.http.post('/auth/token').auth(app.client_id, app.client_secret!).type('form').send({ grant_type: 'refresh_token', refresh_token: ada.refresh_token });
    expect([refresh.status, refresh.body.error]).toEqual([401, 'invalid_client']);
    // Nothing of the client is left: tokens, grant, codes, the browser session's reference to it.
    const left = await t.sql<{ model: string }>(`SELECT model FROM oidc_models WHERE id = $1 OR payload::text LIKE '%' || $1 || '%' OR grant_id = $2`, [app.client_id, grantId]);
    expect(left).toEqual([]);

    const revoked = (await t.http.get('/audit?action=auth.grant.revoked').set(bearer(admin)).expect(200)).body.events;
    expect(revoked).toEqual([expect.objectContaining({ client_id: app.client_id, user_id: user.id, grant_id: grantId, details: { by: 'client_deleted' } })]);
    expect((await t.http.get('/audit?action=auth.grant.revoked').set(bearer(otherAdmin)).expect(200)).body.events).toEqual([]);

    expectError(await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)), 404, 'not_found');
    expectError(await t.http.delete(`/auth/clients/${app.client_id}`).set(bearer(admin)), 404, 'not_found');
    expectError(await t.http.post(`/auth/clients/${app.client_id}/secret`).set(bearer(admin)), 404, 'not_found');
    // Another client of the tenant is untouched.
    await t.http.get('/items').set(bearer(await tokenOf(sibling))).expect(200);
  });

  it('rotates a confidential client\'s secret: shown once and stored sealed, the old one refused at once with its tokens; user grants stay', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'bob@example.com', password, name: 'Bob' }).expect(201);
    const app = await webApp();
    const machine = await tokenOf(app);
    const bob = await approve(app, 'bob@example.com');
    expectError(await t.http.post(`/auth/clients/${app.client_id}/secret`).set(bearer(otherAdmin)), 404, 'not_found');
    expectError(await t.http.post(`/auth/clients/${app.client_id}/secret`).set(bearer(root)), 404, 'not_found');

    const res = await t.http.post(`/auth/clients/${app.client_id}/secret`).set(bearer(admin)).expect(200);
    const secret = res.body.client_secret as string;
    expect(res.body).toMatchObject({ client_id: app.client_id, client_name: 'Notes app', client_secret: expect.stringMatching(/^svc_cs_/) });
    expect(secret).not.toBe(app.client_secret);
    const [{ payload }] = await t.sql<{ payload: string }>(`SELECT payload::text FROM oidc_models WHERE model = 'Client' AND id = $1`, [app.client_id]);
    expect(payload).not.toContain(secret);
    expect(JSON.parse(payload)).toMatchObject({ client_secret_sealed: true });

    const old = await clientCredentials(app);
    expect([old.status, old.body.error]).toEqual([401, 'invalid_client']);
    expect((await introspect(app, bob.access_token)).status).toBe(401);
    // The token the old secret got ends with it; the user's grant lives on, its refresh token now with the new secret.
    expectError(await t.http.get('/items').set(bearer(machine)), 401, 'unauthorized');
    await t.http.get('/items').set(bearer(bob.access_token)).expect(200);
    const refreshed = await t.http.post('/auth/token').auth(app.client_id, secret).type('form').send({ grant_type: 'refresh_token', refresh_token: bob.refresh_token }).expect(200);
    await t.http.get('/items').set(bearer(refreshed.body.access_token)).expect(200);
    await t.http.get('/items').set(bearer(await tokenOf({ ...app, client_secret: secret }))).expect(200);
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body).not.toHaveProperty('client_secret');

    // A retry with the same Idempotency-Key gets the first answer, and does not rotate again.
    const key = randomBytes(16).toString('hex');
    const first = await t.http.post(`/auth/clients/${app.client_id}/secret`).set(bearer(admin)).set('Idempotency-Key', key).expect(200);
    const retry = await t.http.post(`/auth/clients/${app.client_id}/secret`).set(bearer(admin)).set('Idempotency-Key', key).expect(200);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body.client_secret).toBe(first.body.client_secret);
    await tokenOf({ ...app, client_secret: first.body.client_secret });

    const spa = await register({ client_name: 'spa', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' });
    expectError(await t.http.post(`/auth/clients/${spa.client_id}/secret`).set(bearer(admin)), 409, 'conflict');
  });

  it('a client-credentials token saved after its secret was rotated (a request in flight at the rotation) is refused and introspects inactive', async () => {
    const app = await webApp();
    const late = await tokenOf(app);
    await t.http.get('/items').set(bearer(late)).expect(200);
    expect((await introspect(app, late)).body).toMatchObject({ active: true, client_id: app.client_id });
    // The token request authenticated with the old secret, and saves its token only after the rotation deleted the client's tokens.
    const [{ row }] = await t.sql<{ row: unknown }>(`SELECT to_jsonb(m) AS row FROM oidc_models m WHERE model = 'ClientCredentials' AND payload->>'clientId' = $1`, [app.client_id]);
    const { client_secret: secret } = (await t.http.post(`/auth/clients/${app.client_id}/secret`).set(bearer(admin)).expect(200)).body;
    await t.sql(`INSERT INTO oidc_models SELECT * FROM jsonb_populate_record(NULL::oidc_models, $1)`, [row]);

    expectError(await t.http.get('/items').set(bearer(late)), 401, 'unauthorized');
    expect((await introspect(app, late, secret)).body).toEqual({ active: false });
    // A token under the new secret is good, and so is the claim it carries.
    const fresh = await tokenOf({ ...app, client_secret: secret });
    await t.http.get('/items').set(bearer(fresh)).expect(200);
    const answer = (await introspect(app, fresh, secret)).body;
    expect(answer).toMatchObject({ active: true });
    expect(Object.keys(answer).filter((claim) => claim.includes('secret'))).toEqual([]);
  });

  it('ends with a secret rotation what the old secret\'s tokens started: their webhooks get nothing more, their event streams close', async () => {
    const app = await register({ client_name: 'leaky', grant_types: ['client_credentials'], scope: 'core.note:read core.note:write' });
    const receiver = new Receiver();
    const base = await receiver.start();
    try {
      const token = await tokenOf(app);
      const hook = (await t.http.post('/webhooks').set(bearer(token)).send({ url: `${base}/leaked`, events: ['item.created'] }).expect(201)).body;
      expect(hook.credential_id).toMatch(new RegExp(`^client:${app.client_id}:[0-9a-f]{16}$`));
      // One as a token registered it before credentials named their secret.
      const legacy = (await t.http.post('/webhooks').set(bearer(token)).send({ url: `${base}/legacy`, events: ['item.created'] }).expect(201)).body;
      await t.sql(`UPDATE webhooks SET credential_id = $2 WHERE id = $1`, [legacy.id, `client:${app.client_id}`]);
      // The admin's own webhook says when the fan-out of an event is done.
      await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/admin`, events: ['item.created'] }).expect(201);
      const stream = await SseClient.open(`${t.url}/events`, { authorization: `Bearer ${token}` });
      const note = () => t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'n' } }).expect(201);
      await note();
      await waitFor(() => receiver.at('/leaked').length === 1 && receiver.at('/legacy').length === 1 && stream.named().length === 1, 'the deliveries and the streamed event');

      const { client_secret } = (await t.http.post(`/auth/clients/${app.client_id}/secret`).set(bearer(admin)).expect(200)).body;
      const after = (await note()).body;
      await waitFor(() => receiver.at('/admin').some((r) => JSON.parse(r.body).item.id === after.id), 'the admin webhook\'s delivery');
      await waitFor(() => stream.closed, 'the stream closing');
      expect(receiver.at('/leaked')).toHaveLength(1);
      expect(receiver.at('/legacy')).toHaveLength(1);
      expect(stream.named()).toHaveLength(1);
      expect((await t.http.get(`/webhooks/${hook.id}/deliveries`).set(bearer(admin)).expect(200)).body.deliveries).toHaveLength(1);
      // The client still owns them: a token under the new secret sees them, to delete them.
      const fresh = await tokenOf({ ...app, client_secret });
      const listed = (await t.http.get('/webhooks').set(bearer(fresh)).expect(200)).body.webhooks.map((w: { id: string }) => w.id);
      expect(listed.sort()).toEqual([hook.id, legacy.id].sort());
      await t.http.delete(`/webhooks/${legacy.id}`).set(bearer(fresh)).expect(200);
    } finally {
      await receiver.stop();
    }
  });

  it('lets the root tenant\'s admins, and no one else, manage a client made by open registration', async () => {
    const open = (await t.http.post('/auth/oauth2/register').send({ client_name: 'stranger', redirect_uris: [redirectUri] }).expect(201)).body;
    const { pathname } = new URL(open.registration_client_uri);
    for (const [method, path] of [['get', ''], ['delete', ''], ['post', '/secret']] as const) {
      expectError(await t.http[method](`/auth/clients/${open.client_id}${path}`).set(bearer(admin)), 404, 'not_found');
    }
    expect((await t.http.get('/auth/clients').set(bearer(admin)).expect(200)).body.clients.map((c: Client) => c.client_id)).not.toContain(open.client_id);

    const listed = (await t.http.get('/auth/clients').set(bearer(root)).expect(200)).body.clients;
    expect(listed.find((c: Client) => c.client_id === open.client_id)).toMatchObject({ client_name: 'stranger', tenant_id: null });
    // What the provider would fetch for a client is in the admins' view.
    const keyed = (await t.http.post('/auth/oauth2/register').send({ redirect_uris: [redirectUri], token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'https://keys.example/jwks' }).expect(201)).body;
    expect((await t.http.get(`/auth/clients/${keyed.client_id}`).set(bearer(root)).expect(200)).body).toMatchObject({ token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'https://keys.example/jwks' });
    expect(JSON.stringify(listed)).not.toContain(open.client_secret);

    // RFC 7592 read: the registrant's own view, its secret included.
    expect((await t.http.get(pathname).set(bearer(open.registration_access_token)).expect(200)).body.client_secret).toBe(open.client_secret);
    const rotated = (await t.http.post(`/auth/clients/${open.client_id}/secret`).set(bearer(root)).expect(200)).body;
    expect((await introspect(open, 'svc_at_x')).status).toBe(401);
    expect((await introspect(open, 'svc_at_x', rotated.client_secret)).body).toEqual({ active: false });
    // The rotation takes the client from whoever held the old secret, and its registration
    // access token (issued with it) would read out the new one: it ends too.
    const read = await t.http.get(pathname).set(bearer(open.registration_access_token));
    expect([read.status, JSON.stringify(read.body).includes(rotated.client_secret)]).toEqual([401, false]);

    await t.http.delete(`/auth/clients/${open.client_id}`).set(bearer(root)).expect(200);
    expect((await introspect(open, 'svc_at_x', rotated.client_secret)).status).toBe(401);
  });

  it('filters the listing by how a client was registered (?registration=open|admin), in the order of the unfiltered listing', async () => {
    const opened: string[] = [];
    for (let i = 0; i < 3; i++) opened.push((await t.http.post('/auth/oauth2/register').send({ client_name: `open ${i}`, redirect_uris: [redirectUri] }).expect(201)).body.client_id);
    const mine = (await register({ client_name: 'root app', redirect_uris: [redirectUri] }, root)).client_id;
    const everyPage = async (key: string, query: string) => {
      const ids: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { clients: Array<Client & { tenant_id: string | null }>; next_cursor: string | null } = (
          await t.http.get(`/auth/clients?limit=2${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`).set(bearer(key)).expect(200)
        ).body;
        ids.push(...page.clients.map((c) => c.client_id));
        cursor = page.next_cursor;
      } while (cursor);
      return ids;
    };
    const all = await everyPage(root, '');
    const open = await everyPage(root, '&registration=open');
    const admins = await everyPage(root, '&registration=admin');
    expect(open).toEqual(all.filter((id) => !admins.includes(id)));
    expect(open).toEqual(expect.arrayContaining(opened));
    expect(open).not.toContain(mine);
    expect(admins).toContain(mine);
    expect(admins.some((id) => opened.includes(id))).toBe(false);
    // A tenant's admin manages no open client: the filter finds none, and the tenant's own as before.
    expect(await everyPage(admin, '&registration=open')).toEqual([]);
    expect(await everyPage(admin, '&registration=admin')).toEqual(await everyPage(admin, ''));
    expectError(await t.http.get('/auth/clients?registration=mine').set(bearer(root)), 400, 'validation_error');
  });
});

describe('OAuth clients: the first OAuth request of an instance', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startApp({ DATABASE_STATEMENT_TIMEOUT_MS: '1000' });
  });
  afterAll(() => t?.close());

  it('a registration that failed, in the request that built the provider, leaves its Idempotency-Key free for the retry', async () => {
    const admin = (await bootstrapAdmin(t)).key;
    const held = new PgClient({ connectionString: t.databaseUrl });
    await held.connect();
    const send = () => t.http.post('/auth/clients').set(bearer(admin)).set('Idempotency-Key', 'first-use').send({ client_name: 'first', redirect_uris: ['https://app.example/cb'] });
    try {
      // The provider's signing keys load and commit; the client's row then waits past the statement timeout.
      await held.query('BEGIN');
      await held.query('LOCK TABLE oidc_models IN ACCESS EXCLUSIVE MODE');
      expectError(await send(), 503, 'service_unavailable');
      await held.query('COMMIT');
    } finally {
      await held.end();
    }
    const retried = await send();
    expect(retried.status).toBe(201);
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Client' AND payload->>'client_name' = 'first'`)).toHaveLength(1);
  });
});
