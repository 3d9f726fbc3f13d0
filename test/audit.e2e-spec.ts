/**
 * The audit log of credential changes (`GET /audit`): API keys, OAuth clients, webhooks,
 * tenants and users made, changed and ended through the real API, each row naming who did it
 * (`details.actor`) and never a secret; filtered by `action`, kept to its tenant, and written in
 * the change's own transaction: a change refused leaves no row, and a row that cannot be written
 * undoes the change.
 */
import { bearer, bootstrapAdmin, TestApp, startApp } from './support/app';
import { hashSecret } from '../src/keys/key-secrets';
import { Client } from 'pg';
import { expectError } from './support/envelope';
import { waitFor } from './support/wait';

/** How long the export may wait for every transaction on the server begun before a row to end (see its test). */
const XMIN_WAIT_MS = 90_000;

interface AuditEvent {
  id: string;
  action: string;
  client_id: string | null;
  user_id: string | null;
  grant_id: string | null;
  details: Record<string, any>;
  created_at: string;
}

interface Tenant {
  tenantId: string;
  key: string;
  keyId: string;
}

describe('Audit of keys, OAuth clients, webhooks and tenants', () => {
  let t: TestApp;
  let root: { key: string; id: string; tenantId: string };
  let acme: Tenant;
  let other: Tenant;

  const newTenant = async (name: string): Promise<Tenant> => {
    const res = await t.http.post('/tenants').set(bearer(root.key)).send({ name }).expect(201);
    return { tenantId: res.body.tenant.id, key: res.body.admin_key.key, keyId: res.body.admin_key.id };
  };

  beforeAll(async () => {
    t = await startApp();
    root = await bootstrapAdmin(t);
    acme = await newTenant('acme');
    other = await newTenant('other');
  });
  afterAll(async () => t?.close());

  /** The caller's tenant's events, newest first; only `action`'s when given. */
  const events = async (key: string, action?: string): Promise<AuditEvent[]> =>
    (await t.http.get(`/audit?limit=100${action ? `&action=${action}` : ''}`).set(bearer(key)).expect(200)).body.events;

  /** `action`'s events for `key`'s tenant, checking that the filter holds. */
  const filtered = async (key: string, action: string): Promise<AuditEvent[]> => {
    const found = await events(key, action);
    expect(found.every((e) => e.action === action)).toBe(true);
    return found;
  };

  /** No audit row of any tenant holds any of `secrets`, nor their SHA-256 (how keys and token claims are stored). */
  const expectNoSecret = async (...secrets: string[]) => {
    const rows = JSON.stringify(await t.sql(`SELECT * FROM audit_events`));
    for (const secret of secrets) {
      expect(rows).not.toContain(secret);
      expect(rows).not.toContain(hashSecret(secret));
      expect(rows).not.toContain(hashSecret(secret).slice(0, 16));
    }
  };

  const keyActor = (tenant: Tenant) => ({ kind: 'api_key', id: tenant.keyId });

  /** Makes every insert of an `action` row fail while `work` runs: what `work` changes must then not hold either. */
  const refusingAudit = async (action: string, work: () => Promise<void>) => {
    await t.sql(`CREATE OR REPLACE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.action = TG_ARGV[0] THEN RAISE EXCEPTION 'audit refused by the test'; END IF; RETURN NEW; END $$`);
    await t.sql(`CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_audit('${action}')`);
    try {
      await work();
    } finally {
      await t.sql(`DROP TRIGGER refuse_audit ON audit_events`);
    }
  };

  it('records the bootstrap and each tenant made, in the root tenant\'s log and in the new tenant\'s, with the new tenant\'s first key', async () => {
    const rootTenants = await filtered(root.key, 'tenant.created');
    expect(rootTenants.map((e) => e.details)).toEqual(
      expect.arrayContaining([
        { actor: { kind: 'bootstrap', id: null }, tenant_id: root.tenantId, name: 'root', admin_key_id: root.id },
        { actor: { kind: 'api_key', id: root.id }, tenant_id: acme.tenantId, name: 'acme' },
        { actor: { kind: 'api_key', id: root.id }, tenant_id: other.tenantId, name: 'other' },
      ]),
    );
    expect((await filtered(root.key, 'key.created')).map((e) => e.details)).toEqual([
      { actor: { kind: 'bootstrap', id: null }, key_id: root.id, label: 'root admin', role: 'admin', source: expect.any(String) },
    ]);

    // The new tenant's own log: where it and its first admin key came from, by the root tenant's admin.
    const rootActor = { kind: 'api_key', id: root.id, tenant_id: root.tenantId };
    expect((await filtered(acme.key, 'tenant.created')).map((e) => e.details)).toEqual([
      { actor: rootActor, tenant_id: acme.tenantId, name: 'acme', admin_key_id: acme.keyId },
    ]);
    expect((await filtered(acme.key, 'key.created')).map((e) => e.details)).toEqual([
      { actor: rootActor, key_id: acme.keyId, label: 'acme admin', role: 'admin', source: expect.any(String) },
    ]);
    // Kept to their tenants: neither sees the other's creation.
    expect((await events(other.key)).some((e) => e.details.tenant_id === acme.tenantId || e.details.key_id === acme.keyId)).toBe(false);
    await expectNoSecret(root.key, acme.key, other.key);

    // A tenant whose audit row cannot be written is not made.
    await refusingAudit('tenant.created', async () => {
      await t.http.post('/tenants').set(bearer(root.key)).send({ name: 'never' }).expect(500);
    });
    const tenants = (await t.http.get('/tenants?limit=100').set(bearer(root.key)).expect(200)).body.tenants;
    expect(tenants.map((x: { name: string }) => x.name)).not.toContain('never');
    expect((await filtered(root.key, 'tenant.created')).some((e) => e.details.name === 'never')).toBe(false);
  });

  it('records a key created, updated (the fields that changed) and revoked, by the admin key that did it, never the key', async () => {
    const created = (await t.http.post('/keys').set(bearer(acme.key)).send({ label: 'ci', role: 'member', type_permissions: { 'core.note': 'read' } }).expect(201)).body;
    const [made] = (await filtered(acme.key, 'key.created')).filter((e) => e.details.key_id === created.id);
    expect(made).toMatchObject({ client_id: null, user_id: null, grant_id: null });
    expect(made.details).toEqual({ actor: keyActor(acme), key_id: created.id, label: 'ci', role: 'member', source: created.source });

    await t.http.patch(`/keys/${created.id}`).set(bearer(acme.key)).send({ label: 'ci 2', role: 'member', type_permissions: { 'core.note': 'write' } }).expect(200);
    // Nothing changed, or a body refused: no row.
    await t.http.patch(`/keys/${created.id}`).set(bearer(acme.key)).send({ label: 'ci 2', type_permissions: { 'core.note': 'write' } }).expect(200);
    await t.http.patch(`/keys/${created.id}`).set(bearer(acme.key)).send({ role: 'owner' }).expect(400);
    await t.http.patch(`/keys/${created.id}`).set(bearer(acme.key)).send({ role: 'admin' }).expect(200);
    const updates = (await filtered(acme.key, 'key.updated')).filter((e) => e.details.key_id === created.id).map((e) => e.details);
    expect(updates).toEqual([
      { actor: keyActor(acme), key_id: created.id, changed: ['role'], role: { from: 'member', to: 'admin' } },
      { actor: keyActor(acme), key_id: created.id, changed: ['label', 'type_permissions'] },
    ]);

    // A key of a duplicate source is refused: no row for it.
    await t.http.post('/keys').set(bearer(acme.key)).send({ label: 'dup', source: created.source }).expect(409);
    expect((await filtered(acme.key, 'key.created')).some((e) => e.details.label === 'dup')).toBe(false);

    // A revocation whose audit row cannot be written does not revoke.
    await refusingAudit('key.revoked', async () => {
      await t.http.delete(`/keys/${created.id}`).set(bearer(acme.key)).expect(500);
    });
    expect((await t.http.get(`/keys/${created.id}`).set(bearer(acme.key)).expect(200)).body.revoked_at).toBeNull();
    await t.http.get('/audit').set(bearer(created.key)).expect(200);

    await t.http.delete(`/keys/${created.id}`).set(bearer(acme.key)).expect(200);
    await t.http.delete(`/keys/${created.id}`).set(bearer(acme.key)).expect(200);
    const revoked = (await filtered(acme.key, 'key.revoked')).filter((e) => e.details.key_id === created.id);
    expect(revoked.map((e) => e.details)).toEqual([{ actor: keyActor(acme), key_id: created.id, by: 'caller' }]);

    expect((await events(other.key)).some((e) => e.details.key_id === created.id)).toBe(false);
    await expectNoSecret(created.key);
  });

  it('records an OAuth client registered, updated, its secret rotated and deleted, with its client_id; and a client token as an actor', async () => {
    const client = (
      await t.http.post('/auth/clients').set(bearer(acme.key)).send({ client_name: 'importer', grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)
    ).body;
    const ofClient = async (action: string) => (await filtered(acme.key, action)).filter((e) => e.client_id === client.client_id).map((e) => e.details);
    expect(await ofClient('auth.client.created')).toEqual([
      { actor: keyActor(acme), client_name: 'importer', grant_types: ['client_credentials'], token_endpoint_auth_method: 'client_secret_basic', scope: 'core.note:read' },
    ]);

    await t.http.patch(`/auth/clients/${client.client_id}`).set(bearer(acme.key)).send({ client_name: 'importer 2', contacts: ['ops@example.com'], scope: 'core.note:read' }).expect(200);
    // Refused by the client rules: no row.
    await t.http.patch(`/auth/clients/${client.client_id}`).set(bearer(acme.key)).send({ client_uri: 'not a uri' }).expect(400);
    const [updated] = await ofClient('auth.client.updated');
    expect((await ofClient('auth.client.updated')).length).toBe(1);
    expect(updated.actor).toEqual(keyActor(acme));
    expect([...updated.changed].sort()).toEqual(['client_name', 'contacts']);

    // A client-credentials token is named by its client, not by its credential (which carries its secret's hash).
    const token = (
      await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' }).expect(200)
    ).body.access_token as string;
    const hook = (await t.http.post('/webhooks').set(bearer(token)).send({ url: 'http://127.0.0.1:9/client-hook', events: ['item.created'] }).expect(201)).body;
    const [byToken] = (await filtered(acme.key, 'webhook.created')).filter((e) => e.details.webhook_id === hook.id);
    expect(byToken.details.actor).toEqual({ kind: 'oauth_client', id: client.client_id });

    const rotated = (await t.http.post(`/auth/clients/${client.client_id}/secret`).set(bearer(acme.key)).expect(200)).body;
    expect(await ofClient('auth.client.secret_rotated')).toEqual([{ actor: keyActor(acme), expire_previous_in: 0 }]);
    // A public client has no secret to rotate: no row.
    const pub = (
      await t.http.post('/auth/clients').set(bearer(acme.key)).send({ token_endpoint_auth_method: 'none', redirect_uris: ['https://app.example.com/cb'] }).expect(201)
    ).body;
    await t.http.post(`/auth/clients/${pub.client_id}/secret`).set(bearer(acme.key)).expect(409);
    expect((await filtered(acme.key, 'auth.client.secret_rotated')).some((e) => e.client_id === pub.client_id)).toBe(false);

    // A deletion whose audit row cannot be written does not delete.
    await refusingAudit('auth.client.deleted', async () => {
      await t.http.delete(`/auth/clients/${client.client_id}`).set(bearer(acme.key)).expect(500);
    });
    await t.http.get(`/auth/clients/${client.client_id}`).set(bearer(acme.key)).expect(200);
    await t.http.delete(`/auth/clients/${client.client_id}`).set(bearer(acme.key)).expect(200);
    expect(await ofClient('auth.client.deleted')).toEqual([{ actor: keyActor(acme), client_name: 'importer 2', grants_revoked: 0 }]);

    const others = await events(other.key);
    expect(others.some((e) => e.client_id === client.client_id || e.details.webhook_id === hook.id)).toBe(false);
    await expectNoSecret(client.client_secret, rotated.client_secret, token, hook.secret);
  });

  it('records a client made by open registration in the root tenant\'s log, by open_registration, in the transaction that stores it', async () => {
    const body = { client_name: 'Open app', redirect_uris: ['https://open.example.com/cb'], token_endpoint_auth_method: 'none', scope: 'openid core.note:read' };
    const open = (await t.http.post('/auth/oauth2/register').send(body).expect(201)).body;
    const [made] = (await filtered(root.key, 'auth.client.created')).filter((e) => e.client_id === open.client_id);
    expect(made.details).toEqual({
      actor: { kind: 'open_registration', id: null },
      address: expect.stringMatching(/^(::ffff:)?127\.0\.0\.1$/),
      client_name: 'Open app',
      grant_types: open.grant_types,
      token_endpoint_auth_method: 'none',
      scope: 'openid core.note:read',
    });
    expect((await events(acme.key)).some((e) => e.client_id === open.client_id)).toBe(false);
    // Refused metadata: no client, no row.
    await t.http.post('/auth/oauth2/register').send({ ...body, client_name: 'Refused', redirect_uris: ['not a uri'] }).expect(400);
    expect((await filtered(root.key, 'auth.client.created')).some((e) => e.details.client_name === 'Refused')).toBe(false);
    // A registration whose row cannot be written stores no client.
    await refusingAudit('auth.client.created', async () => {
      expect((await t.http.post('/auth/oauth2/register').send({ ...body, client_name: 'Unrecorded' })).status).toBeGreaterThanOrEqual(500);
    });
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Client' AND payload->>'client_name' = 'Unrecorded'`)).toEqual([]);
    await expectNoSecret(open.registration_access_token);
  });

  it('records a webhook created, its secret rotated and deleted, naming its URL by host alone and never its secret', async () => {
    const secret = 'audit-test-signing-secret-0123';
    const url = 'http://127.0.0.1:9/hooks/receiver-token-abc?sig=query-token-xyz';
    // Refused by the URL rules: no row.
    await t.http.post('/webhooks').set(bearer(acme.key)).send({ url: 'ftp://127.0.0.1/x', events: ['item.created'] }).expect(400);
    const hook = (await t.http.post('/webhooks').set(bearer(acme.key)).send({ url, events: ['item.created'], secret }).expect(201)).body;
    const ofHook = async (action: string) => (await filtered(acme.key, action)).filter((e) => e.details.webhook_id === hook.id).map((e) => e.details);
    expect(await ofHook('webhook.created')).toEqual([{ actor: keyActor(acme), webhook_id: hook.id, host: '127.0.0.1:9', events: ['item.created'] }]);
    expect((await filtered(acme.key, 'webhook.created')).some((e) => JSON.stringify(e).includes('ftp:'))).toBe(false);

    // A change names the fields that changed, the new host when the URL did; one that changes nothing, or is refused, writes none.
    await t.http.patch(`/webhooks/${hook.id}`).set(bearer(acme.key)).send({ disabled: true, events: ['item.created'] }).expect(200);
    await t.http.patch(`/webhooks/${hook.id}`).set(bearer(acme.key)).send({ disabled: true }).expect(200);
    await t.http.patch(`/webhooks/${hook.id}`).set(bearer(acme.key)).send({ url: 'ftp://127.0.0.1/x' }).expect(400);
    await t.http.patch(`/webhooks/${hook.id}`).set(bearer(acme.key)).send({ url: 'http://localhost:9/moved?sig=query-token-xyz', disabled: false }).expect(200);
    expect(await ofHook('webhook.updated')).toEqual([
      { actor: keyActor(acme), webhook_id: hook.id, changed: ['url', 'disabled'], host: 'localhost:9' },
      { actor: keyActor(acme), webhook_id: hook.id, changed: ['disabled'] },
    ]);

    await t.http.post(`/webhooks/${hook.id}/secret`).set(bearer(acme.key)).send({ expire_previous_in: -1 }).expect(400);
    const rotated = (await t.http.post(`/webhooks/${hook.id}/secret`).set(bearer(acme.key)).send({ expire_previous_in: 0 }).expect(200)).body;
    expect(await ofHook('webhook.secret_rotated')).toEqual([{ actor: keyActor(acme), webhook_id: hook.id, expire_previous_in: 0 }]);

    await refusingAudit('webhook.deleted', async () => {
      await t.http.delete(`/webhooks/${hook.id}`).set(bearer(acme.key)).expect(500);
    });
    await t.http.get(`/webhooks/${hook.id}`).set(bearer(acme.key)).expect(200);
    await t.http.delete(`/webhooks/${hook.id}`).set(bearer(acme.key)).expect(200);
    expect(await ofHook('webhook.deleted')).toEqual([{ actor: keyActor(acme), webhook_id: hook.id, host: 'localhost:9' }]);

    expect((await events(other.key)).some((e) => e.details.webhook_id === hook.id)).toBe(false);
    await expectNoSecret(secret, rotated.secret, 'receiver-token-abc', 'query-token-xyz');
  });

  it('records a user created, changed (the fields that changed, a promotion with its roles) and deleted, never the password', async () => {
    const password = 'a long enough password 1';
    const user = (await t.http.post('/users').set(bearer(acme.key)).send({ email: 'audited@example.com', password, name: 'Ann' }).expect(201)).body;
    expect(user.updated_at).toBe(user.created_at);
    const [made] = (await filtered(acme.key, 'user.created')).filter((e) => e.user_id === user.id);
    expect(made.details).toEqual({ actor: keyActor(acme), email: 'audited@example.com', role: 'member', email_verified: false });

    // Nothing changed, or a body refused: no row, and updated_at stays.
    expect((await t.http.patch(`/users/${user.id}`).set(bearer(acme.key)).send({ name: 'Ann' }).expect(200)).body.updated_at).toBe(user.updated_at);
    await t.http.patch(`/users/${user.id}`).set(bearer(acme.key)).send({ role: 'owner' }).expect(400);
    const renamed = (await t.http.patch(`/users/${user.id}`).set(bearer(acme.key)).send({ name: 'Anne', password: 'another long password 2' }).expect(200)).body;
    expect(renamed.updated_at > user.updated_at).toBe(true);
    await refusingAudit('user.updated', async () => {
      await t.http.patch(`/users/${user.id}`).set(bearer(acme.key)).send({ role: 'admin' }).expect(500);
    });
    expect((await t.http.get(`/users/${user.id}`).set(bearer(acme.key)).expect(200)).body.role).toBe('member');
    await t.http.patch(`/users/${user.id}`).set(bearer(acme.key)).send({ role: 'admin' }).expect(200);
    const updates = (await filtered(acme.key, 'user.updated')).filter((e) => e.user_id === user.id).map((e) => e.details);
    expect(updates).toEqual([
      { actor: keyActor(acme), changed: ['role'], role: { from: 'member', to: 'admin' } },
      { actor: keyActor(acme), changed: ['name', 'password'] },
    ]);

    await refusingAudit('user.deleted', async () => {
      await t.http.delete(`/users/${user.id}`).set(bearer(acme.key)).expect(500);
    });
    await t.http.get(`/users/${user.id}`).set(bearer(acme.key)).expect(200);
    await t.http.delete(`/users/${user.id}`).set(bearer(acme.key)).expect(200);
    const [deleted] = (await filtered(acme.key, 'user.deleted')).filter((e) => e.user_id === user.id);
    expect(deleted.details).toEqual({ actor: keyActor(acme), email: 'audited@example.com', grants_revoked: 0, keys_revoked: 0 });

    expect((await events(other.key)).some((e) => e.user_id === user.id)).toBe(false);
    await expectNoSecret(password, 'another long password 2');
  });

  it('is read by admin credentials only: a member key gets 403 and no events', async () => {
    const member = (await t.http.post('/keys').set(bearer(acme.key)).send({ label: 'auditor?', role: 'member', type_permissions: { '*': 'write' } }).expect(201)).body.key;
    for (const path of ['/audit', '/audit?action=key.created']) {
      const res = await t.http.get(path).set(bearer(member));
      expectError(res, 403, 'forbidden');
      expect(res.body).not.toHaveProperty('events');
    }
  });

  it('accepts every new action as a filter, and still refuses an unknown one', async () => {
    for (const action of ['key.created', 'key.updated', 'key.revoked', 'auth.client.created', 'auth.client.updated', 'auth.client.deleted',
      'auth.client.secret_rotated', 'webhook.created', 'webhook.updated', 'webhook.deleted', 'webhook.secret_rotated', 'tenant.created',
      'user.created', 'user.updated', 'user.deleted']) {
      await t.http.get(`/audit?action=${action}`).set(bearer(other.key)).expect(200);
    }
    await t.http.get('/audit?action=key.exploded').set(bearer(other.key)).expect(400);
  });

  it('exports oldest first in transaction order: a row waits for every transaction begun before it, and the cursor goes on from the last', async () => {
    const exporter = await newTenant('exporter');
    const page = async (query: Record<string, string | number>) =>
      (await t.http.get('/audit').query({ order: 'asc', ...query }).set(bearer(exporter.key)).expect(200)).body as { events: AuditEvent[]; next_cursor: string | null };
    const keyIds = (events: AuditEvent[]) => events.filter((e) => e.action === 'key.created').map((e) => e.details.key_id);

    // The tenant's creation and its first key (one transaction), listed once every transaction on the server begun before it has ended:
    // other test files' too, which may hold one open until PostgreSQL ends it (idle_in_transaction_session_timeout, 60 s). Then paged
    // one at a time to the same rows.
    const first = await waitFor(async () => {
      const p = await page({ limit: 100 });
      return p.events.length > 0 && p;
    }, 'the first rows in the export', XMIN_WAIT_MS);
    expect(first.events.map((e) => e.action).sort()).toEqual(['key.created', 'tenant.created']);
    const one = await page({ limit: 1 });
    expect(one.events).toEqual([first.events[0]]);
    expect((await page({ limit: 1, cursor: one.next_cursor! })).events).toEqual([first.events[1]]);
    // The last page has a cursor too: where the log goes on.
    expect(first.next_cursor).toEqual(expect.any(String));
    expect(await page({ cursor: first.next_cursor! })).toEqual({ events: [], next_cursor: first.next_cursor });

    // A transaction that took its id first and commits last: the row committed meanwhile waits for it.
    const late = new Client({ connectionString: t.databaseUrl });
    await late.connect();
    try {
      await late.query('BEGIN');
      await late.query(`INSERT INTO audit_events (tenant_id, id, action, details) VALUES ($1, gen_random_uuid(), 'key.created', '{"key_id": "late"}')`, [exporter.tenantId]);
      const made = (await t.http.post('/keys').set(bearer(exporter.key)).send({ label: 'meanwhile', type_permissions: { '*': 'read' } }).expect(201)).body.id;
      // Listed newest first at once, but not yet in the export, which would have passed the late row's place.
      expect(keyIds(await events(exporter.key))).toContain(made);
      expect(await page({ cursor: first.next_cursor! })).toEqual({ events: [], next_cursor: first.next_cursor });
      await late.query('COMMIT');
      const rest = await waitFor(async () => {
        const p = await page({ cursor: first.next_cursor! });
        return p.events.length === 2 && p;
      }, 'both rows in the export', XMIN_WAIT_MS);
      expect(keyIds(rest.events)).toEqual(['late', made]);
      expect(await page({ cursor: rest.next_cursor! })).toEqual({ events: [], next_cursor: rest.next_cursor });
    } finally {
      await late.end();
    }

    // Each order's cursors are its own; and the filter holds in transaction order too.
    const newest = (await t.http.get('/audit?limit=1').set(bearer(exporter.key)).expect(200)).body.next_cursor;
    expectError(await t.http.get('/audit').query({ order: 'asc', cursor: newest }).set(bearer(exporter.key)), 400, 'validation_error');
    expectError(await t.http.get('/audit').query({ cursor: first.next_cursor }).set(bearer(exporter.key)), 400, 'validation_error');
    expectError(await t.http.get('/audit').query({ order: 'up' }).set(bearer(exporter.key)), 400, 'validation_error');
    const forged = Buffer.from(JSON.stringify(['99999999999999999999999', '1', 'audit_export'])).toString('base64url');
    expectError(await t.http.get('/audit').query({ order: 'asc', cursor: forged }).set(bearer(exporter.key)), 400, 'validation_error');
    expect((await page({ action: 'tenant.created' })).events).toEqual(first.events.filter((e) => e.action === 'tenant.created'));
    // Another tenant's export holds none of these.
    const others = (await t.http.get('/audit?order=asc&limit=100').set(bearer(other.key)).expect(200)).body.events as AuditEvent[];
    expect(others.some((e) => e.details.key_id === 'late' || e.details.tenant_id === exporter.tenantId)).toBe(false);
  }, 3 * XMIN_WAIT_MS);
});
