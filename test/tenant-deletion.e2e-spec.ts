/**
 * DELETE /tenants/{id}: the tenant ends at once (its keys, OAuth clients and their tokens are
 * refused, its users gone, its event streams closed), leaves the tenant listings, and its rows
 * in every table and its blobs' content are purged in the background; other tenants keep
 * everything. Only the root tenant's admins delete, and never the root tenant.
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { TenantPurge } from '../src/tenants/tenant-purge';
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';
import { DEVICE_GRANT, deviceTokens } from './support/device-flow';
import { SseClient } from './support/sse';
import { field } from './support/browse';
import request from 'supertest';
import { waitFor } from './support/wait';

/** Every table with a tenant_id column, read from the catalogue: one added later is checked too. */
const tenantTables = (t: TestApp) =>
  t.sql<{ table_name: string }>(
    `SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'tenant_id' ORDER BY table_name`,
  );

async function rowsLeft(t: TestApp, tenantId: string): Promise<Record<string, number>> {
  const left: Record<string, number> = {};
  for (const { table_name } of await tenantTables(t)) {
    const [{ n }] = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${table_name} WHERE tenant_id = $1`, [tenantId]);
    if (n) left[table_name] = n;
  }
  const [{ n: oauth }] = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM oidc_models WHERE payload->>'tenant_id' = $1`, [tenantId]);
  if (oauth) left.oidc_models = oauth;
  return left;
}

describe.each(['disk', 'postgres'])('tenant deletion (blobs stored on %s)', (storage) => {
  let t: TestApp;
  let blobDir: string;
  let root: { key: string; tenantId: string };
  let doomed: { key: string; tenantId: string };
  let kept: { key: string; tenantId: string };
  let keptItem: string;
  let clientToken: string;
  let client: { client_id: string; client_secret: string };
  let device: { client_id: string };
  let userTokens: { access_token: string; refresh_token: string };

  beforeAll(async () => {
    blobDir = await mkdtemp(join(tmpdir(), 'svc-tenant-deletion-'));
    t = await startApp({ BLOB_STORAGE: storage, BLOB_DIR: blobDir, OAUTH_DEVICE_POLL_INTERVAL: '1' });
    root = await bootstrapAdmin(t);
    doomed = await createTenant(t, root.key, 'doomed');
    kept = await createTenant(t, root.key, 'kept');
    const as = bearer(doomed.key);

    // Something in every kind of table: types, items with versions, edges, tags, a blob, a webhook, a user, an OAuth client.
    await t.http.post('/types').set(as).send({ name: 'acme.task', schema: { type: 'object', properties: { title: { type: 'string' } } } }).expect(201);
    await t.http.post('/edge-types').set(as).send({ name: 'acme.blocks', source_types: ['*'], target_types: ['*'] }).expect(201);
    const first = (await t.http.post('/items').set(as).send({ type: 'acme.task', properties: { title: 'first' } }).expect(201)).body;
    const second = (await t.http.post('/items').set(as).send({ type: 'core.note', properties: { title: 'second' }, edges: { 'acme.blocks': [first.id] } }).expect(201)).body;
    await t.http.patch(`/items/${first.id}`).set(as).send({ version: first.version, properties: { title: 'first, again' } }).expect(200);
    await t.http.patch(`/items/${second.id}/metadata`).set(as).send({ tags: ['urgent'] }).expect(200);
    const bytes = Buffer.from('the doomed tenant\'s file');
    await t.http.post('/blobs').set(as).set('Content-Type', 'text/plain').send(bytes).expect(201);
    const hash = createHash('sha256').update(bytes).digest('hex');
    if (storage === 'disk') await stat(join(blobDir, doomed.tenantId, hash.slice(0, 2), hash));
    else expect(await rowsLeft(t, doomed.tenantId)).toMatchObject({ blob_chunks: 1 });
    await t.http.post('/webhooks').set(as).send({ url: 'https://93.184.216.34/hooks', events: ['*'] }).expect(201);
    await t.http.post('/users').set(as).send({ email: 'someone@doomed.example', password: 'a long enough password', name: 'Someone' }).expect(201);
    client = (
      await t.http.post('/auth/clients').set(as).send({ client_name: 'importer', grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)
    ).body;
    clientToken = (await t.http.post('/auth/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' }).expect(200))
      .body.access_token;
    await t.http.get('/items').set(bearer(clientToken)).expect(200);
    // The user connects a device app of the tenant: their own access and refresh tokens.
    device = (
      await t.http.post('/auth/clients').set(as).send({ client_name: 'TV', grant_types: [DEVICE_GRANT, 'refresh_token'], token_endpoint_auth_method: 'none', scope: 'openid offline_access core.note:read' }).expect(201)
    ).body;
    userTokens = await deviceTokens(t, device.client_id, { email: 'someone@doomed.example', password: 'a long enough password' }, ['openid', 'offline_access', 'core.note:read']);
    await t.http.get('/auth/userinfo').set(bearer(userTokens.access_token)).expect(200);

    keptItem = (await t.http.post('/items').set(bearer(kept.key)).send({ type: 'core.note', properties: { title: 'kept' } }).expect(201)).body.id;
    await t.http.post('/users').set(bearer(kept.key)).send({ email: 'someone@kept.example', password: 'kept user password', name: 'Kept' }).expect(201);
  });
  afterAll(async () => {
    await t?.close();
    await rm(blobDir, { recursive: true, force: true });
  });

  it('refuses callers other than the root tenant\'s admins, the root tenant itself, and ids of no tenant', async () => {
    expectError(await t.http.delete(`/tenants/${doomed.tenantId}`), 401, 'unauthorized');
    expectError(await t.http.delete(`/tenants/${doomed.tenantId}`).set(bearer(doomed.key)), 403, 'forbidden');
    expectError(await t.http.delete(`/tenants/${kept.tenantId}`).set(bearer(doomed.key)), 403, 'forbidden');
    expectError(await t.http.delete(`/tenants/${root.tenantId}`).set(bearer(root.key)), 409, 'conflict');
    expectError(await t.http.delete('/tenants/00000000-0000-4000-8000-000000000000').set(bearer(root.key)), 404, 'not_found');
    expectError(await t.http.delete('/tenants/not-an-id').set(bearer(root.key)), 400, 'invalid_id');
    await t.http.get('/items').set(bearer(doomed.key)).expect(200);
  });

  it('ends the tenant at once: its key, its client and the client\'s token are refused, its event stream closes', async () => {
    const stream = await SseClient.open(`${t.url}/events`, bearer(doomed.key));
    const res = await t.http.delete(`/tenants/${doomed.tenantId}`).set(bearer(root.key)).expect(202);
    expect(res.body).toEqual({ id: doomed.tenantId, name: 'doomed', created_at: expect.any(String), deleted_at: expect.any(String) });

    expectError(await t.http.get('/items').set(bearer(doomed.key)), 401, 'unauthorized');
    expectError(await t.http.get('/items').set(bearer(clientToken)), 401, 'unauthorized');
    const token = await t.http.post('/auth/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' });
    expect([token.status, token.body.error]).toEqual([401, 'invalid_client']);
    expectError(await t.http.get('/items').set(bearer(userTokens.access_token)), 401, 'unauthorized');
    expect((await t.http.get('/auth/userinfo').set(bearer(userTokens.access_token))).status).toBe(401);
    const refreshed = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: userTokens.refresh_token, client_id: device.client_id });
    // The app is gone with the tenant, and its refresh token with it.
    expect([refreshed.status, refreshed.body.error]).toEqual([400, 'invalid_client']);
    await waitFor(() => stream.closed, 'the deleted tenant\'s event stream to close');

    expectError(await t.http.get(`/tenants/${doomed.tenantId}`).set(bearer(root.key)), 404, 'not_found');
    expectError(await t.http.delete(`/tenants/${doomed.tenantId}`).set(bearer(root.key)), 404, 'not_found');
    const listed = (await t.http.get('/tenants?limit=100').set(bearer(root.key)).expect(200)).body.tenants.map((x: { id: string }) => x.id);
    expect(listed).toEqual(expect.arrayContaining([root.tenantId, kept.tenantId]));
    expect(listed).not.toContain(doomed.tenantId);

    const audit = (await t.http.get('/audit?action=tenant.deleted').set(bearer(root.key)).expect(200)).body.events;
    expect(audit).toEqual([
      expect.objectContaining({
        action: 'tenant.deleted',
        details: { actor: expect.objectContaining({ kind: 'api_key' }), tenant_id: doomed.tenantId, name: 'doomed', users_deleted: 1, clients_deleted: 2 },
      }),
    ]);
  });

  it('lets no user of the deleted tenant sign in, also one a request in flight wrote after the deletion', async () => {
    // The row a POST /users authorised before the deletion commits after it, put back as it would be.
    const [row] = await t.sql<Record<string, unknown>>(`SELECT * FROM users WHERE tenant_id = $1`, [kept.tenantId]);
    const lateId = '00000000-0000-4000-8000-00000000000a';
    await t.sql(`INSERT INTO users SELECT (json_populate_record(NULL::users, $1::json)).*`, [
      JSON.stringify({ ...row, id: lateId, tenant_id: doomed.tenantId, email: 'late@doomed.example' }),
    ]);
    const agent = request.agent(t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
    const signIn = await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(form.text, 'csrf'), email: 'late@doomed.example', password: 'kept user password' });
    expect(signIn.status).toBe(401);
    await t.sql(`DELETE FROM users WHERE id = $1`, [lateId]);
  });

  it('purges every row of the tenant and its blobs\' content, and nothing of any other tenant', async () => {
    const left = await waitFor(async () => {
      const rows = await rowsLeft(t, doomed.tenantId);
      return Object.keys(rows).length === 0 && rows;
    }, 'the deleted tenant\'s rows to be purged');
    expect(left).toEqual({});
    // Nothing of it on disk either, not even the directories its files were in.
    await expect(stat(join(blobDir, doomed.tenantId))).rejects.toMatchObject({ code: 'ENOENT' });

    await t.http.get(`/items/${keptItem}`).set(bearer(kept.key)).expect(200);
    expect(await rowsLeft(t, kept.tenantId)).toMatchObject({ items: 1, api_keys: 1, users: 1 });
  });

  it('marks the tenant purged once no request begun before its deletion can still write; its row stays, a tombstone', async () => {
    const [before] = await t.sql<{ purged_at: Date | null }>(`SELECT purged_at FROM tenants WHERE id = $1`, [doomed.tenantId]);
    expect(before.purged_at).toBeNull();
    // Deleted long enough ago (REQUEST_TIMEOUT_MS and a minute): the next pass is its last.
    await t.sql(`UPDATE tenants SET deleted_at = now() - interval '1 day' WHERE id = $1`, [doomed.tenantId]);
    await t.app.get(TenantPurge).sweep();
    const [after] = await t.sql<{ purged_at: Date | null; name: string }>(`SELECT purged_at, name FROM tenants WHERE id = $1`, [doomed.tenantId]);
    expect(after).toEqual({ purged_at: expect.any(Date), name: 'doomed' });
  });
});
