/**
 * /auth/blocked-clients: a tenant's admins block an openly registered app for the tenant's users.
 * The grants it holds from them end at once (tokens refused), their consents to it are refused
 * from then on, other tenants' users are unaffected, and unblocking lets them connect it again.
 */
import { createHash, randomBytes } from 'node:crypto';
import request from 'supertest';
import { browse, field } from './support/browse';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { DEVICE_GRANT, deviceTokens } from './support/device-flow';
import { expectError } from './support/envelope';
import { waitFor } from './support/wait';

describe('apps blocked by a tenant\'s admins (/auth/blocked-clients)', () => {
  let t: TestApp;
  let root: string;
  let acme: string;
  let openApp: { client_id: string };
  const alice = { email: 'alice@acme.example', password: 'a long password for alice' };
  const rooty = { email: 'ops@root.example', password: 'a long password for ops' };
  const SCOPES = ['openid', 'offline_access', 'core.note:read'];

  /** A device-flow attempt answered Allow: the page's status and what the device is told. */
  async function tryToConnect(user: { email: string; password: string }) {
    const device = (await t.http.post('/auth/device').type('form').send({ client_id: openApp.client_id, scope: SCOPES.join(' ') }).expect(200)).body;
    const agent = request.agent(t.url);
    const complete = new URL(device.verification_uri_complete);
    const page = await agent.get(complete.pathname + complete.search).expect(200);
    const field = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(page.text)![1];
    const form = new URLSearchParams({ user_code: field('user_code'), csrf: field('csrf'), ...user, decision: 'approve' });
    for (const scope of SCOPES) form.append('scope', scope);
    const answered = await agent.post('/auth/device/consent').type('form').send(form.toString());
    const poll = await t.http.post('/auth/device/token').type('form').send({ grant_type: DEVICE_GRANT, device_code: device.device_code, client_id: openApp.client_id });
    return { status: answered.status, page: answered.text, error: poll.body.error as string | undefined };
  }

  beforeAll(async () => {
    t = await startApp({ OAUTH_DEVICE_POLL_INTERVAL: '1' });
    root = (await bootstrapAdmin(t)).key;
    acme = (await createTenant(t, root, 'acme')).key;
    await t.http.post('/users').set(bearer(acme)).send({ ...alice, name: 'Alice' }).expect(201);
    await t.http.post('/users').set(bearer(root)).send({ ...rooty, name: 'Ops' }).expect(201);
    openApp = (
      await t.http
        .post('/auth/oauth2/register')
        .send({ client_name: 'Sketchy TV', grant_types: [DEVICE_GRANT, 'refresh_token'], response_types: [], token_endpoint_auth_method: 'none', scope: SCOPES.join(' ') })
        .expect(201)
    ).body;
  });
  afterAll(() => t?.close());

  it('ends the grants the app holds from the tenant\'s users and refuses their consents; other tenants\' users keep theirs', async () => {
    const aliceTokens = await deviceTokens(t, openApp.client_id, alice, SCOPES);
    const opsTokens = await deviceTokens(t, openApp.client_id, rooty, SCOPES);

    const blocked = await t.http.put(`/auth/blocked-clients/${openApp.client_id}`).set(bearer(acme)).expect(200);
    expect(blocked.body).toEqual({ client_id: openApp.client_id, client_name: 'Sketchy TV', created_at: expect.any(String) });
    expectError(await t.http.get('/items').set(bearer(aliceTokens.access_token)), 401, 'unauthorized');
    const refreshed = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: aliceTokens.refresh_token, client_id: openApp.client_id });
    expect([refreshed.status, refreshed.body.error]).toEqual([400, 'invalid_grant']);
    await t.http.get('/items').set(bearer(opsTokens.access_token)).expect(200);

    const refused = await tryToConnect(alice);
    expect([refused.status, refused.error]).toEqual([403, 'access_denied']);
    expect(refused.page).toContain('blocked by your workspace');

    // Blocking again changes nothing and records nothing more.
    expect((await t.http.put(`/auth/blocked-clients/${openApp.client_id}`).set(bearer(acme)).expect(200)).body).toEqual(blocked.body);
    expect((await t.http.get('/auth/blocked-clients').set(bearer(acme)).expect(200)).body).toEqual({ blocked_clients: [blocked.body], next_cursor: null });
    expect((await t.http.get('/auth/blocked-clients').set(bearer(root)).expect(200)).body.blocked_clients).toEqual([]);
    const audit = (await t.http.get('/audit').set(bearer(acme)).expect(200)).body.events.filter((e: { action: string }) => e.action.startsWith('auth.client') || e.action === 'auth.grant.revoked');
    // One transaction, one timestamp: the two rows in either order.
    expect(audit.map((e: { action: string; details: { by?: string } }) => `${e.action} ${e.details.by ?? ''}`).sort()).toEqual(['auth.client.blocked ', 'auth.grant.revoked client_blocked']);
    expect(audit.find((e: { action: string }) => e.action === 'auth.client.blocked')).toMatchObject({ client_id: openApp.client_id, details: { client_name: 'Sketchy TV', grants_revoked: 1, actor: expect.objectContaining({ kind: 'api_key' }) } });
  });

  it('refuses the blocked app\'s authorization requests at the sign-in, for the tenant\'s users only', async () => {
    const web = (await t.http.post('/auth/oauth2/register').send({ client_name: 'Sketchy web', redirect_uris: ['https://sketchy.example/cb'] }).expect(201)).body;
    await t.http.put(`/auth/blocked-clients/${web.client_id}`).set(bearer(acme)).expect(200);
    const signIn = async (user: { email: string; password: string }) => {
      const query = new URLSearchParams({
        client_id: web.client_id,
        redirect_uri: 'https://sketchy.example/cb',
        response_type: 'code',
        scope: 'openid',
        state: 'st',
        code_challenge: createHash('sha256').update(randomBytes(32).toString('base64url')).digest('base64url'),
        code_challenge_method: 'S256',
      });
      const agent = request.agent(t.url);
      const form = await browse(agent, t.url, `/auth/authorize?${query}`);
      return agent.post('/auth/sign-in').type('form').send({ uid: field(form.page!, 'uid'), csrf: field(form.page!, 'csrf'), ...user });
    };
    const refused = await signIn(alice);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('blocked by your workspace');
    // Someone of another tenant goes on to the consent page.
    expect((await signIn(rooty)).status).toBe(303);
  });

  it('lets the tenant\'s users connect it again once unblocked', async () => {
    const unblocked = await t.http.delete(`/auth/blocked-clients/${openApp.client_id}`).set(bearer(acme)).expect(200);
    expect(unblocked.body.client_id).toBe(openApp.client_id);
    expectError(await t.http.delete(`/auth/blocked-clients/${openApp.client_id}`).set(bearer(acme)), 404, 'not_found');
    const tokens = await deviceTokens(t, openApp.client_id, alice, SCOPES);
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
    const audit = (await t.http.get('/audit?action=auth.client.unblocked').set(bearer(acme)).expect(200)).body.events;
    expect(audit).toEqual([expect.objectContaining({ client_id: openApp.client_id, details: expect.objectContaining({ client_name: 'Sketchy TV' }) })]);
  });

  it('blocks only openly registered apps, for admins only', async () => {
    const member = (await createKey(t, acme, { label: 'member', type_permissions: { '*': 'read' } })).key;
    const own = (await t.http.post('/auth/clients').set(bearer(acme)).send({ client_name: 'Acme app', grant_types: ['client_credentials'] }).expect(201)).body;
    const theirs = (await t.http.post('/auth/clients').set(bearer(root)).send({ client_name: 'Root app', grant_types: ['client_credentials'] }).expect(201)).body;
    expectError(await t.http.put(`/auth/blocked-clients/${openApp.client_id}`).set(bearer(member)), 403, 'forbidden');
    expectError(await t.http.get('/auth/blocked-clients').set(bearer(member)), 403, 'forbidden');
    expectError(await t.http.put(`/auth/blocked-clients/${openApp.client_id}`), 401, 'unauthorized');
    expectError(await t.http.put(`/auth/blocked-clients/${own.client_id}`).set(bearer(acme)), 409, 'conflict');
    expectError(await t.http.put(`/auth/blocked-clients/${theirs.client_id}`).set(bearer(acme)), 404, 'not_found');
    expectError(await t.http.put('/auth/blocked-clients/no-such-client').set(bearer(acme)), 404, 'not_found');
    expectError(await t.http.put('/auth/blocked-clients/not%20an%20id').set(bearer(acme)), 400, 'invalid_id');
    expect((await t.http.get('/auth/blocked-clients').set(bearer(acme)).expect(200)).body.blocked_clients.map((b: { client_name: string }) => b.client_name)).toEqual(['Sketchy web']);
  });

  it('counts the grants the block ended, not one a revocation at the same moment ended first', async () => {
    // Alice's grant, from connecting the app again above.
    const [grant, ...more] = await t.sql<{ id: string }>(
      `SELECT g.id FROM oidc_models g JOIN users u ON u.id::text = g.payload->>'accountId' WHERE g.model = 'Grant' AND g.payload->>'clientId' = $1 AND u.email = $2`,
      [openApp.client_id, alice.email],
    );
    expect([grant, more]).toEqual([expect.anything(), []]);
    // The revocation holds the grant's row deleted, uncommitted, until the block waits to delete it.
    const waiting = async () => {
      await t.sql('SELECT pg_stat_clear_snapshot()');
      return (await t.sql(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%OR (model = ''Grant'' AND id = $1)%'`)).length > 0;
    };
    await t.sql('BEGIN');
    let blocked: request.Response;
    try {
      await t.sql(`DELETE FROM oidc_models WHERE model = 'Grant' AND id = $1`, [grant.id]);
      const sent = t.http.put(`/auth/blocked-clients/${openApp.client_id}`).set(bearer(acme)).then((r) => r);
      await waitFor(waiting, 'the block to wait for the grant');
      await t.sql('COMMIT');
      blocked = await sent;
    } catch (err) {
      await t.sql('ROLLBACK');
      throw err;
    }
    expect(blocked.status).toBe(200);
    const audit = (await t.http.get(`/audit?action=auth.client.blocked`).set(bearer(acme)).expect(200)).body.events;
    expect(audit[0].details.grants_revoked).toBe(0);
    const revoked = (await t.http.get(`/audit?action=auth.grant.revoked`).set(bearer(acme)).expect(200)).body.events;
    expect(revoked.filter((e: { grant_id: string }) => e.grant_id === grant.id)).toEqual([]);
  });

  it('forgets a block when the blocked app is deleted: its id is never given again', async () => {
    const gone = (
      await t.http.post('/auth/oauth2/register').send({ client_name: 'Gone TV', grant_types: [DEVICE_GRANT], response_types: [], token_endpoint_auth_method: 'none' }).expect(201)
    ).body;
    await t.http.put(`/auth/blocked-clients/${gone.client_id}`).set(bearer(acme)).expect(200);
    await t.http.delete(`/auth/clients/${gone.client_id}`).set(bearer(root)).expect(200);
    const listed = (await t.http.get('/auth/blocked-clients?limit=100').set(bearer(acme)).expect(200)).body.blocked_clients;
    expect(listed.map((b: { client_id: string }) => b.client_id)).not.toContain(gone.client_id);
    expect(await t.sql(`SELECT 1 FROM blocked_clients WHERE client_id = $1`, [gone.client_id])).toEqual([]);
  });
});
