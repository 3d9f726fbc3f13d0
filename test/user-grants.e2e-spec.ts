/**
 * /users/{id}/grants: a tenant's admins see which apps each of its users connected and revoke
 * one, whose tokens then stop at once; the revocation is audited `auth.grant.revoked` by `admin`
 * with the actor, and the user's security page says an admin did it. Other tenants' admins and
 * members get nothing.
 */
import request from 'supertest';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';
import { DEVICE_GRANT, deviceTokens } from './support/device-flow';

describe('admins over their users\' grants (/users/{id}/grants)', () => {
  let t: TestApp;
  let admin: string;
  let userId: string;
  let grantId: string;
  let tokens: { access_token: string; refresh_token: string };
  let clientId: string;

  beforeAll(async () => {
    t = await startApp({ OAUTH_DEVICE_POLL_INTERVAL: '1' });
    admin = (await bootstrapAdmin(t)).key;
    userId = (await t.http.post('/users').set(bearer(admin)).send({ email: 'tv@example.com', password: 'a long tv password', name: 'TV Owner' }).expect(201)).body.id;
    clientId = (
      await t.http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'Living-room TV', grant_types: [DEVICE_GRANT, 'refresh_token'], token_endpoint_auth_method: 'none', scope: 'openid offline_access core.note:read' })
        .expect(201)
    ).body.client_id;

    // The user connects the TV through the device flow.
    tokens = await deviceTokens(t, clientId, { email: 'tv@example.com', password: 'a long tv password' }, ['openid', 'offline_access', 'core.note:read']);
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
  });
  afterAll(() => t?.close());

  it('lists the apps a user connected, with the scopes each holds, and reads one', async () => {
    const { grants } = (await t.http.get(`/users/${userId}/grants`).set(bearer(admin)).expect(200)).body;
    expect(grants).toEqual([
      { id: expect.any(String), client_id: clientId, client_name: 'Living-room TV', scope: expect.any(String), created_at: expect.any(String), expires_at: expect.any(String) },
    ]);
    expect(grants[0].scope.split(' ').sort()).toEqual(['core.note:read', 'offline_access', 'openid']);
    grantId = grants[0].id;
    expect((await t.http.get(`/users/${userId}/grants/${grantId}`).set(bearer(admin)).expect(200)).body).toEqual(grants[0]);
  });

  it('refuses members, other tenants\' admins, unknown users and grants, and malformed ids', async () => {
    const member = (await createKey(t, admin, { label: 'member', type_permissions: { '*': 'read' } })).key;
    const other = (await createTenant(t, admin, 'other')).key;
    expectError(await t.http.get(`/users/${userId}/grants`), 401, 'unauthorized');
    expectError(await t.http.get(`/users/${userId}/grants`).set(bearer(member)), 403, 'forbidden');
    expectError(await t.http.delete(`/users/${userId}/grants/${grantId}`).set(bearer(member)), 403, 'forbidden');
    expectError(await t.http.get(`/users/${userId}/grants`).set(bearer(other)), 404, 'not_found');
    expectError(await t.http.delete(`/users/${userId}/grants/${grantId}`).set(bearer(other)), 404, 'not_found');
    expectError(await t.http.get(`/users/00000000-0000-4000-8000-000000000000/grants`).set(bearer(admin)), 404, 'not_found');
    expectError(await t.http.get(`/users/${userId}/grants/nosuchgrant`).set(bearer(admin)), 404, 'not_found');
    expectError(await t.http.get(`/users/not-an-id/grants`).set(bearer(admin)), 400, 'invalid_id');
    expectError(await t.http.get(`/users/${userId}/grants/${'%20'.repeat(3)}`).set(bearer(admin)), 400, 'invalid_id');
    // Nothing above touched the grant.
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
  });

  it('does not revoke a grant whose audit row cannot be written: a 500, and the grant and its tokens as they were', async () => {
    await t.sql(`CREATE FUNCTION refuse_grant_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$`);
    await t.sql(`CREATE TRIGGER refuse_grant_audit BEFORE INSERT ON audit_events FOR EACH ROW WHEN (NEW.action = 'auth.grant.revoked') EXECUTE FUNCTION refuse_grant_audit()`);
    try {
      expectError(await t.http.delete(`/users/${userId}/grants/${grantId}`).set(bearer(admin)), 500, 'internal_error');
    } finally {
      await t.sql('DROP TRIGGER refuse_grant_audit ON audit_events');
      await t.sql('DROP FUNCTION refuse_grant_audit()');
    }
    await t.http.get(`/users/${userId}/grants/${grantId}`).set(bearer(admin)).expect(200);
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
  });

  it('revokes one: its access and refresh tokens stop at once, audited by the admin, shown to the user', async () => {
    const revoked = await t.http.delete(`/users/${userId}/grants/${grantId}`).set(bearer(admin)).expect(200);
    expect(revoked.body).toMatchObject({ id: grantId, client_id: clientId });
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    const refreshed = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId });
    expect([refreshed.status, refreshed.body.error]).toEqual([400, 'invalid_grant']);
    expect((await t.http.get(`/users/${userId}/grants`).set(bearer(admin)).expect(200)).body.grants).toEqual([]);
    expectError(await t.http.delete(`/users/${userId}/grants/${grantId}`).set(bearer(admin)), 404, 'not_found');

    const audit = (await t.http.get('/audit?action=auth.grant.revoked').set(bearer(admin)).expect(200)).body.events;
    expect(audit).toEqual([
      expect.objectContaining({ grant_id: grantId, user_id: userId, client_id: clientId, details: { by: 'admin', actor: expect.objectContaining({ kind: 'api_key' }) } }),
    ]);

    const agent = request.agent(t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
    const csrf = /name="csrf" value="([^"]*)"/.exec(form.text)![1];
    await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf, email: 'tv@example.com', password: 'a long tv password' }).expect(303);
    const lines = (await agent.get('/auth/security').expect(200)).text.match(/access (given to|revoked from) .*?<\/li>/g);
    expect(lines).toEqual([expect.stringMatching(/^access revoked from .*Living-room TV.* by an admin<\/li>$/), expect.stringMatching(/^access given to .*Living-room TV/)]);
  });

  it('the account pages: no cache keeps their JSON, a malformed grant id is 400 invalid_id, and an email longer than any account\'s is not shown back', async () => {
    const agent = request.agent(t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/grants').expect(200);
    const csrf = /name="csrf" value="([^"]*)"/.exec(form.text)![1];
    const long = `${'x'.repeat(300)}@example.com`;
    const refused = await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf, email: long, password: 'a long tv password' });
    expect(refused.status).toBe(401);
    expect(refused.text).not.toContain('x'.repeat(300));
    const again = /name="csrf" value="([^"]*)"/.exec(refused.text)![1];
    await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: again, email: 'tv@example.com', password: 'a long tv password' }).expect(303);
    for (const path of ['/auth/grants', '/auth/sessions']) {
      const res = await agent.get(path).set('Accept', 'application/json').expect(200);
      expect([path, res.headers['cache-control']]).toEqual([path, 'no-store']);
    }
    const bad = 'not%20an%20id';
    for (const res of [
      await agent.get(`/auth/grants/${bad}`),
      await agent.delete(`/auth/grants/${'a'.repeat(101)}`).set('Accept', 'application/json'),
      await agent.post(`/auth/grants/${bad}/revoke`).send({}),
    ]) {
      expect(expectError(res, 400, 'invalid_id').details).toEqual({ field: 'id' });
    }
    // The page's form, sent for no grant there could be, gets the page any unknown grant gets.
    const page = await agent.get('/auth/sessions').expect(200); // any account form's token serves
    const formCsrf = /name="csrf" value="([^"]*)"/.exec(page.text)![1];
    const posted = await agent.post(`/auth/grants/${bad}/revoke`).type('form').send({ csrf: formCsrf });
    expect([posted.status, posted.type, posted.text.includes('Already revoked')]).toEqual([404, 'text/html', true]);
  });

  it('pages a user\'s grants newest first, with cursors of this list only', async () => {
    const pager = (await t.http.post('/users').set(bearer(admin)).send({ email: 'pager@example.com', password: 'a long pager password', name: 'Pager' }).expect(201)).body.id;
    const connected: string[] = [];
    for (const name of ['Watch', 'Car', 'Fridge']) {
      const app = (
        await t.http
          .post('/auth/clients')
          .set(bearer(admin))
          .send({ client_name: name, grant_types: [DEVICE_GRANT], token_endpoint_auth_method: 'none', scope: 'core.note:read' })
          .expect(201)
      ).body.client_id;
      await deviceTokens(t, app, { email: 'pager@example.com', password: 'a long pager password' }, ['core.note:read']);
      connected.push(app);
    }
    const all = (await t.http.get(`/users/${pager}/grants`).set(bearer(admin)).expect(200)).body;
    expect(all.next_cursor).toBeNull();
    expect(all.grants.map((g: { client_id: string }) => g.client_id).sort()).toEqual([...connected].sort());

    const paged: unknown[] = [];
    let cursor: string | null = null;
    do {
      const page: { grants: unknown[]; next_cursor: string | null } = (
        await t.http.get(`/users/${pager}/grants`).query({ limit: 1, ...(cursor && { cursor }) }).set(bearer(admin)).expect(200)
      ).body;
      expect(page.grants).toHaveLength(1);
      paged.push(...page.grants);
      cursor = page.next_cursor;
    } while (cursor && paged.length <= connected.length);
    expect(paged).toEqual(all.grants);

    const first = (await t.http.get(`/users/${pager}/grants?limit=1`).set(bearer(admin)).expect(200)).body.next_cursor;
    const clientsCursor = (await t.http.get('/auth/clients?limit=1').set(bearer(admin)).expect(200)).body.next_cursor;
    for (const bad of ['nonsense', clientsCursor]) {
      expectError(await t.http.get(`/users/${pager}/grants`).query({ cursor: bad }).set(bearer(admin)), 400, 'validation_error');
    }
    expectError(await t.http.get(`/users/${pager}/grants?limit=0`).set(bearer(admin)), 400, 'validation_error');
    // A cursor names a position in a list, not a user: another user's list from it is that user's.
    expect((await t.http.get(`/users/${userId}/grants`).query({ cursor: first }).set(bearer(admin)).expect(200)).body.grants).toEqual([]);
  });

  it('makes no grant when its first consent\'s audit row cannot be written: the consent fails, the device gets no token', async () => {
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email: 'untraced@example.com', password: 'a long untraced password', name: 'Untraced' }).expect(201)).body.id;
    const device = (await t.http.post('/auth/device').type('form').send({ client_id: clientId, scope: 'core.note:read' }).expect(200)).body;
    const agent = request.agent(t.url);
    const complete = new URL(device.verification_uri_complete);
    const page = await agent.get(complete.pathname + complete.search).expect(200);
    const field = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(page.text)![1];
    const form = new URLSearchParams({ user_code: field('user_code'), csrf: field('csrf'), email: 'untraced@example.com', password: 'a long untraced password', decision: 'approve', scope: 'core.note:read' });
    await t.sql(`CREATE FUNCTION refuse_consent_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$`);
    await t.sql(`CREATE TRIGGER refuse_consent_audit BEFORE INSERT ON audit_events FOR EACH ROW WHEN (NEW.action = 'auth.grant.created') EXECUTE FUNCTION refuse_consent_audit()`);
    try {
      expect((await agent.post('/auth/device/consent').type('form').send(form.toString())).status).toBe(500);
    } finally {
      await t.sql('DROP TRIGGER refuse_consent_audit ON audit_events');
      await t.sql('DROP FUNCTION refuse_consent_audit()');
    }
    expect((await t.http.get(`/users/${user}/grants`).set(bearer(admin)).expect(200)).body.grants).toEqual([]);
    expect(await t.sql(`SELECT id FROM oidc_models WHERE model = 'Grant' AND payload->>'accountId' = $1`, [user])).toEqual([]);
    const poll = await t.http.post('/auth/device/token').type('form').send({ grant_type: DEVICE_GRANT, device_code: device.device_code, client_id: clientId });
    expect([poll.status, poll.body.error]).toEqual([400, 'authorization_pending']);
  });
});
