/** SPEC 2.7 and 4.5, CONTRACT "Tenants and keys": the /keys surface within one tenant. */
import { createHash } from 'node:crypto';
import Redis from 'ioredis';
import { Client } from 'pg';
import request from 'supertest';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { field } from './support/browse';
import { expectLocation } from './support/created';
import { badFields, expectError } from './support/envelope';
import { expectKeyBody } from './support/keys';
import { appBehindProxy } from './support/behind-proxy';
import { waitFor } from './support/wait';

describe('keys', () => {
  let t: TestApp;
  let admin: { key: string; id: string; tenantId: string };

  beforeAll(async () => {
    t = await startApp();
    admin = await bootstrapAdmin(t);
  });
  afterAll(() => t.close());

  describe('creation', () => {
    it('returns 201 with every SPEC 2.7 field and the plaintext key once', async () => {
      const body = {
        label: 'ingest bot',
        role: 'member',
        source: 'ingest.bot-1',
        default_tier: 'feed',
        type_permissions: { 'core.note': 'write', 'core.*': 'read' },
        extension_permissions: { 'acme.*': 'write' },
        edge_permissions: { links_to: 'read' },
      };
      const res = await t.http.post('/keys').set(bearer(admin.key)).send(body).expect(201);
      expectKeyBody(res.body, true);
      expect(res.body).toMatchObject({ ...body, tenant_id: admin.tenantId, revoked_at: null });
      await t.http.get('/health').set(bearer(res.body.key)).expect(200);
    });

    it('answers Location: /keys/{id}, which GET reads (never with the plaintext), and a replay carries it too', async () => {
      const post = () => t.http.post('/keys').set(bearer(admin.key)).set('Idempotency-Key', `located-${admin.id}`).send({ label: 'located' });
      const res = await post();
      const got = await expectLocation(t, res, `/keys/${res.body.id}`, admin.key);
      expect(got.body.id).toBe(res.body.id);
      expect(got.body).not.toHaveProperty('key');
      const retry = await post().expect(201);
      expect([retry.headers['idempotent-replayed'], retry.headers.location]).toEqual(['true', `/keys/${res.body.id}`]);
    });

    it('applies defaults: member, library tier, empty maps, a generated unique source', async () => {
      const a = await createKey(t, admin.key, {});
      const b = await createKey(t, admin.key, {});
      expect(a).toMatchObject({ role: 'member', default_tier: 'library', type_permissions: {}, extension_permissions: {}, edge_permissions: {} });
      expect(a.source).toEqual(expect.any(String));
      expect(a.source.length).toBeGreaterThan(0);
      expect(a.source).not.toBe(b.source);
      expect(a.id).not.toBe(b.id);
      expect(a.key).not.toBe(b.key);
    });

    it('validates permission maps and labels', async () => {
      for (const [field, value] of [
        ['label', 'a\nb'],
        ['label', '\u0001x'],
        ['label', 'x\u202ey'],
        ['label', '\u2028'],
        ['label', '   '],
        ['label', '\u200b'],
        ['type_permissions', { '*': 'admin' }],
        ['type_permissions', { 'Core.Note': 'read' }],
        ['type_permissions', { 'core.*.x': 'read' }],
        ['type_permissions', 'core.note'],
        ['type_permissions', ['core.note']],
        ['extension_permissions', { acme: true }],
        ['edge_permissions', { 'links to': 'write' }],
      ] as const) {
        expect(badFields(await t.http.post('/keys').set(bearer(admin.key)).send({ [field]: value }))).toEqual([field]);
      }
      const anyKey = (await t.http.get('/keys').set(bearer(admin.key))).body.keys[0];
      // null is not "absent": it is refused rather than stored (or failing as a 500).
      for (const field of ['label', 'role', 'default_tier', 'type_permissions', 'extension_permissions', 'edge_permissions']) {
        expect(badFields(await t.http.patch(`/keys/${anyKey.id}`).set(bearer(admin.key)).send({ [field]: null }))).toEqual([field]);
      }
      expect(badFields(await t.http.post('/keys').set(bearer(admin.key)).send({ source: null, label: null })).sort()).toEqual(['label', 'source']);
      // What OAuth apps' items carry: a key with it could upsert over an app's items.
      expect(badFields(await t.http.post('/keys').set(bearer(admin.key)).send({ source: 'app:some-client' }))).toEqual(['source']);
      expect((await t.http.post('/keys').set(bearer(admin.key)).send({ source: 'apps:ours' }).expect(201)).body.source).toBe('apps:ours');
      expect(badFields(await t.http.patch(`/keys/${anyKey.id}`).set(bearer(admin.key)).send({ edge_permissions: { x: 'delete' } }))).toEqual([
        'edge_permissions',
      ]);
    });
  });

  describe('secrecy', () => {
    it('the plaintext appears only in the creation response', async () => {
      const created = await createKey(t, admin.key, { label: 'secret holder' });
      const secret = created.key as string;
      const responses = [
        await t.http.get('/keys').set(bearer(admin.key)).expect(200),
        await t.http.get(`/keys/${created.id}`).set(bearer(admin.key)).expect(200),
        await t.http.patch(`/keys/${created.id}`).set(bearer(admin.key)).send({ label: 'renamed' }).expect(200),
        await t.http.delete(`/keys/${created.id}`).set(bearer(admin.key)).expect(200),
      ];
      for (const res of responses) expect(res.text).not.toContain(secret.slice('svc_k1_'.length));
      for (const k of responses[0].body.keys) expectKeyBody(k, false);
      for (const res of responses.slice(1)) expectKeyBody(res.body, false);
      expect(responses[0].body.keys.map((k: { id: string }) => k.id)).toContain(created.id);
    });

    it('the database holds a SHA-256 hash of the key, never the plaintext', async () => {
      const created = await createKey(t, admin.key, { label: 'hashed' });
      const secret = created.key as string;
      const rows = await t.sql<Record<string, unknown>>('SELECT * FROM api_keys WHERE id = $1', [created.id]);
      expect(rows).toHaveLength(1);
      const stored = JSON.stringify(rows[0]);
      expect(stored).not.toContain(secret.slice('svc_k1_'.length, 'svc_k1_'.length + 12));
      expect(Object.values(rows[0])).toContain(createHash('sha256').update(secret).digest('hex'));
      // Nothing else in the database holds it either.
      const dump = await t.sql<{ t: string }>(
        `SELECT string_agg(row_to_json(x)::text, '') AS t FROM (SELECT * FROM api_keys) x`,
      );
      expect(dump[0].t).not.toContain(secret);
    });
  });

  describe('members', () => {
    let member: Record<string, any>;
    beforeAll(async () => {
      member = await createKey(t, admin.key, { label: 'member', type_permissions: { '*': 'write' } });
    });

    it('cannot manage keys: 403 forbidden on every /keys route', async () => {
      const m = bearer(member.key);
      expectError(await t.http.get('/keys').set(m), 403, 'forbidden');
      expectError(await t.http.get(`/keys/${admin.id}`).set(m), 403, 'forbidden');
      expectError(await t.http.get(`/keys/${member.id}`).set(m), 403, 'forbidden');
      expectError(await t.http.post('/keys').set(m).send({ label: 'escalate', role: 'admin' }), 403, 'forbidden');
      // 403 before the body is looked at: a member learns nothing from validation.
      expectError(await t.http.post('/keys').set(m).send({ role: 'boss' }), 403, 'forbidden');
      expectError(await t.http.patch(`/keys/${member.id}`).set(m).send({ role: 'admin' }), 403, 'forbidden');
      expectError(await t.http.delete(`/keys/${admin.id}`).set(m), 403, 'forbidden');
      const rows = await t.sql<{ role: string; revoked_at: Date | null }>('SELECT role, revoked_at FROM api_keys WHERE id = ANY($1)', [
        [admin.id, member.id],
      ]);
      expect(rows).toEqual(expect.arrayContaining([{ role: 'admin', revoked_at: null }, { role: 'member', revoked_at: null }]));
    });

    it('read their own key at /keys/current (as admins do, never the plaintext); an OAuth token gets 403, no token 401', async () => {
      const own = (await t.http.get('/keys/current').set(bearer(member.key)).expect(200)).body;
      expect(own).toEqual((await t.http.get(`/keys/${member.id}`).set(bearer(admin.key)).expect(200)).body);
      expect(own).toMatchObject({ id: member.id, role: 'member', type_permissions: { '*': 'write' } });
      expect(own).not.toHaveProperty('key');
      expect((await t.http.get('/keys/current').set(bearer(admin.key)).expect(200)).body.id).toBe(admin.id);
      expectError(await t.http.get('/keys/current'), 401, 'unauthorized');
      const client = (
        await t.http.post('/auth/clients').set(bearer(admin.key)).send({ client_name: 'whoami', grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)
      ).body;
      const token = (
        await t.http.post('/auth/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' }).expect(200)
      ).body.access_token;
      expectError(await t.http.get('/keys/current').set(bearer(token)), 403, 'forbidden');
      // Revoked, it is no one.
      const gone = await createKey(t, admin.key, { label: 'gone' });
      await t.http.delete(`/keys/${gone.id}`).set(bearer(admin.key)).expect(200);
      expectError(await t.http.get('/keys/current').set(bearer(gone.key)), 401, 'unauthorized');
    });
  });

  describe('update', () => {
    it('changes label, role, tier and maps, effective on the next request', async () => {
      const k = await createKey(t, admin.key, { label: 'before' });
      expectError(await t.http.get('/keys').set(bearer(k.key)), 403, 'forbidden'); // resolved and cached as member
      const patch = {
        label: 'after',
        role: 'admin',
        default_tier: 'feed',
        type_permissions: { 'acme.*': 'write' },
        extension_permissions: { geo: 'read' },
        edge_permissions: { '*': 'read' },
      };
      const res = await t.http.patch(`/keys/${k.id}`).set(bearer(admin.key)).send(patch).expect(200);
      expectKeyBody(res.body, false);
      expect(res.body).toMatchObject({ ...patch, id: k.id, source: k.source });
      expect(Date.parse(res.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(k.updated_at));
      await t.http.get('/keys').set(bearer(k.key)).expect(200); // now an admin
      expect((await t.http.get(`/keys/${k.id}`).set(bearer(admin.key)).expect(200)).body).toMatchObject(patch);

      await t.http.patch(`/keys/${k.id}`).set(bearer(admin.key)).send({ role: 'member' }).expect(200);
      expectError(await t.http.get('/keys').set(bearer(k.key)), 403, 'forbidden'); // demoted at once
      // A partial update leaves the other fields alone.
      const after = (await t.http.patch(`/keys/${k.id}`).set(bearer(admin.key)).send({ label: 'only label' }).expect(200)).body;
      expect(after).toMatchObject({ ...patch, label: 'only label', role: 'member' });
    });

    it('a PATCH that changes nothing writes nothing: no updated_at, no audit entry, no cache generation for every instance to drop', async () => {
      const k = await createKey(t, admin.key, { label: 'same', type_permissions: { 'core.note': 'read' } });
      const redis = new Redis(t.config.REDIS_URL);
      try {
        const generation = () => redis.get(`${t.config.REDIS_PREFIX}keys:generation`);
        const before = await generation();
        for (const body of [{}, { label: 'same' }, { type_permissions: { 'core.note': 'read' }, role: 'member' }]) {
          const res = await t.http.patch(`/keys/${k.id}`).set(bearer(admin.key)).send(body).expect(200);
          expect(res.body.updated_at).toBe(k.updated_at);
        }
        expect(await generation()).toBe(before);
        expect(await t.sql(`SELECT 1 FROM audit_events WHERE action = 'key.updated' AND details->>'key_id' = $1`, [k.id])).toEqual([]);
      } finally {
        redis.disconnect();
      }
    });

    it('a request that passed the guard as its key was revoked or demoted changes no key: it waits for the revocation, then is refused', async () => {
      const caller = await createKey(t, admin.key, { role: 'admin' });
      const target = await createKey(t, admin.key, {});
      for (const [change, status, code] of [
        ['revoked_at = now()', 401, 'unauthorized'],
        [`role = 'member'`, 403, 'forbidden'],
      ] as const) {
        // The caller's key is resolved (and cached) first, as a request that passed the guard had it.
        await t.http.get('/keys').set(bearer(caller.key)).expect(200);
        // A revocation holding the tenant's key lock, as DELETE /keys/{id} does until it commits.
        const held = new Client({ connectionString: t.databaseUrl });
        await held.connect();
        await held.query('BEGIN');
        await held.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`keys:${admin.tenantId}`]);
        const requests = [
          t.http.post('/keys').set(bearer(caller.key)).send({ label: 'minted' }),
          t.http.patch(`/keys/${target.id}`).set(bearer(caller.key)).send({ role: 'admin' }),
          t.http.delete(`/keys/${target.id}`).set(bearer(caller.key)),
        ].map((r) => r.then((res) => res));
        await waitFor(async () => (await t.sql(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)).length === 3, 'the requests to wait for the lock');
        await held.query(`UPDATE api_keys SET ${change} WHERE id = $1`, [caller.id]);
        await held.query('COMMIT');
        await held.end();
        for (const res of await Promise.all(requests)) expectError(res, status, code);
        await t.sql(`UPDATE api_keys SET revoked_at = NULL, role = 'admin' WHERE id = $1`, [caller.id]);
        await t.http.patch(`/keys/${caller.id}`).set(bearer(admin.key)).send({ label: `reset ${status}` }).expect(200); // drops the cached entry
      }
      expect((await t.http.get(`/keys/${target.id}`).set(bearer(admin.key))).body).toMatchObject({ role: 'member', revoked_at: null });
      expect(await t.sql(`SELECT 1 FROM api_keys WHERE label = 'minted'`)).toEqual([]);
    });

    it('refuses to change the source (400 validation_error) or a revoked key (409 conflict)', async () => {
      const k = await createKey(t, admin.key, { source: 'fixed-source' });
      expect(badFields(await t.http.patch(`/keys/${k.id}`).set(bearer(admin.key)).send({ source: 'other' }))).toEqual(['source']);
      expect(badFields(await t.http.patch(`/keys/${k.id}`).set(bearer(admin.key)).send({ key: 'svc_k1_x', id: k.id })).sort()).toEqual([
        'id',
        'key',
      ]);
      await t.http.delete(`/keys/${k.id}`).set(bearer(admin.key)).expect(200);
      expectError(await t.http.patch(`/keys/${k.id}`).set(bearer(admin.key)).send({ label: 'zombie' }), 409, 'conflict');
    });
  });

  describe('revocation', () => {
    it('returns the revoked key, takes effect on the next request and is idempotent', async () => {
      const k = await createKey(t, admin.key, { role: 'admin' });
      await t.http.get('/keys').set(bearer(k.key)).expect(200);
      const revoked = (await t.http.delete(`/keys/${k.id}`).set(bearer(admin.key)).expect(200)).body;
      expectKeyBody(revoked, false);
      expect(revoked.id).toBe(k.id);
      expect(revoked.revoked_at).toMatch(/^\d{4}-\d{2}-\d{2}T/);
      expectError(await t.http.get('/keys').set(bearer(k.key)), 401, 'unauthorized');
      const again = (await t.http.delete(`/keys/${k.id}`).set(bearer(admin.key)).expect(200)).body;
      expect(again.revoked_at).toBe(revoked.revoked_at);
      expect((await t.http.get(`/keys/${k.id}`).set(bearer(admin.key)).expect(200)).body.revoked_at).toBe(revoked.revoked_at);
    });

    it('a key can revoke itself when another admin remains', async () => {
      const k = await createKey(t, admin.key, { role: 'admin' });
      await t.http.delete(`/keys/${k.id}`).set(bearer(k.key)).expect(200);
      expectError(await t.http.get('/keys').set(bearer(k.key)), 401, 'unauthorized');
    });
  });

  describe('source uniqueness', () => {
    it('a taken source in the tenant is 409 duplicate_source; free again after the holder is revoked', async () => {
      const holder = await createKey(t, admin.key, { source: 'crm-sync' });
      const dup = await t.http.post('/keys').set(bearer(admin.key)).send({ source: 'crm-sync' });
      expectError(dup, 409, 'duplicate_source');
      // Rotation: revoke, then create a replacement with the same source.
      await t.http.delete(`/keys/${holder.id}`).set(bearer(admin.key)).expect(200);
      const replacement = await createKey(t, admin.key, { source: 'crm-sync' });
      expect(replacement.source).toBe('crm-sync');
      expectError(await t.http.post('/keys').set(bearer(admin.key)).send({ source: 'crm-sync' }), 409, 'duplicate_source');
    });

    it('the same source is fine in another tenant', async () => {
      await createKey(t, admin.key, { source: 'shared-name' });
      const other = await createTenant(t, admin.key, 'source-tenant');
      const there = await createKey(t, other.key, { source: 'shared-name' });
      expect(there).toMatchObject({ source: 'shared-name', tenant_id: other.tenantId });
    });
  });

  describe('last admin', () => {
    it('revoking or demoting the tenant\'s last active admin is 409 conflict', async () => {
      const tenant = await createTenant(t, admin.key, 'lonely');
      const first = (await t.http.get('/keys').set(bearer(tenant.key)).expect(200)).body.keys[0];
      expectError(await t.http.delete(`/keys/${first.id}`).set(bearer(tenant.key)), 409, 'conflict');
      expectError(await t.http.patch(`/keys/${first.id}`).set(bearer(tenant.key)).send({ role: 'member' }), 409, 'conflict');
      // A member key does not count as an admin.
      await createKey(t, tenant.key, { role: 'member' });
      expectError(await t.http.delete(`/keys/${first.id}`).set(bearer(tenant.key)), 409, 'conflict');
      // Nor does a revoked admin.
      const second = await createKey(t, tenant.key, { role: 'admin' });
      await t.http.delete(`/keys/${second.id}`).set(bearer(tenant.key)).expect(200);
      expectError(await t.http.patch(`/keys/${first.id}`).set(bearer(tenant.key)).send({ role: 'member' }), 409, 'conflict');
      // With another active admin it is allowed, and the key still works.
      const third = await createKey(t, tenant.key, { role: 'admin' });
      await t.http.patch(`/keys/${first.id}`).set(bearer(tenant.key)).send({ role: 'member' }).expect(200);
      expectError(await t.http.delete(`/keys/${third.id}`).set(bearer(third.key)), 409, 'conflict');
      await t.http.get('/keys').set(bearer(third.key)).expect(200);
    });

    it('holds under concurrent revocation of the last two admins', async () => {
      const tenant = await createTenant(t, admin.key, 'racing');
      const first = (await t.http.get('/keys').set(bearer(tenant.key)).expect(200)).body.keys[0];
      const second = await createKey(t, tenant.key, { role: 'admin' });
      const results = await Promise.all([
        t.http.delete(`/keys/${first.id}`).set(bearer(second.key)),
        t.http.delete(`/keys/${second.id}`).set(bearer(tenant.key)),
      ]);
      // The second to take the tenant's key lock finds its own key revoked by the first.
      expect(results.map((r) => r.status).sort()).toEqual([200, 401]);
      const active = await t.sql(`SELECT 1 FROM api_keys WHERE tenant_id = $1 AND role = 'admin' AND revoked_at IS NULL`, [tenant.tenantId]);
      expect(active).toHaveLength(1);
    });
  });

  describe('keys made on the account pages', () => {
    /** Signs `email` in to the account pages and makes an admin key there; the plaintext key. */
    const mint = async (email: string, label: string) => {
      const agent = request.agent(t.url);
      const form = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
      await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(form.text, 'csrf'), email, password: 'an admin user password' }).expect(303);
      const page = (await agent.get('/auth/security').expect(200)).text;
      const shown = await agent.post('/auth/keys').type('form').send({ csrf: field(page, 'csrf'), form_nonce: field(page, 'form_nonce'), label }).expect(200);
      return /<code id="key">([^<]+)<\/code>/.exec(shown.text)![1];
    };
    const keyLabelled = async (key: string, label: string) =>
      (await t.http.get('/keys').set(bearer(key)).expect(200)).body.keys.find((k: { label: string }) => k.label === label);

    it('name the user who made them, and end when that user is deleted or demoted (keys of POST /keys name no one)', async () => {
      const tenant = await createTenant(t, admin.key, 'minting');
      const newUser = async (email: string, by = tenant.key) =>
        (await t.http.post('/users').set(bearer(by)).send({ email, password: 'an admin user password', name: 'Minter', role: 'admin' }).expect(201)).body;
      const ada = await newUser('ada@minting.example');
      const adaKey = await mint('ada@minting.example', 'looks like the ci key');
      const minted = await keyLabelled(adaKey, 'looks like the ci key');
      expectKeyBody(minted, false);
      expect(minted).toMatchObject({ role: 'admin', created_by_user_id: ada.id, revoked_at: null });
      expect((await t.http.get(`/keys/${minted.id}`).set(bearer(tenant.key)).expect(200)).body.created_by_user_id).toBe(ada.id);
      const [first] = (await t.http.get('/keys').set(bearer(tenant.key)).expect(200)).body.keys.filter((k: { id: string }) => k.id !== minted.id);
      expect(first.created_by_user_id).toBeNull();
      expect((await createKey(t, tenant.key, { label: 'plain' })).created_by_user_id).toBeNull();

      // Ada's key as the tenant's only admin key that does not expire: deleting her would leave the tenant none, so nothing happens.
      await t.http.delete(`/keys/${first.id}`).set(bearer(adaKey)).expect(200);
      const expiring = await createKey(t, adaKey, { role: 'admin', label: 'expiring', expires_at: new Date(Date.now() + 3_600_000).toISOString() });
      expect(expectError(await t.http.delete(`/users/${ada.id}`).set(bearer(expiring.key)), 409, 'conflict').details).toBeUndefined();
      await t.http.get(`/users/${ada.id}`).set(bearer(adaKey)).expect(200);
      const other = await createKey(t, adaKey, { role: 'admin', label: 'ops' });

      // Used (so cached) just before, her key is refused from the very next request.
      await t.http.get('/keys').set(bearer(adaKey)).expect(200);
      await t.http.delete(`/users/${ada.id}`).set(bearer(other.key)).expect(200);
      expectError(await t.http.get('/keys').set(bearer(adaKey)), 401, 'unauthorized');
      const after = (await t.http.get(`/keys/${minted.id}`).set(bearer(other.key)).expect(200)).body;
      expect(after).toMatchObject({ created_by_user_id: ada.id, revoked_at: expect.any(String) });
      // The audit log says who ended it: the admin key that deleted her.
      const revoked = (await t.http.get('/audit?action=key.revoked').set(bearer(other.key)).expect(200)).body.events;
      expect(revoked.find((e: { details: { key_id: string } }) => e.details.key_id === minted.id)?.details).toMatchObject({
        by: 'creator_removed', created_by_user_id: ada.id, actor: { kind: 'api_key', id: other.id },
      });
      expect((await t.http.get('/keys').set(bearer(other.key)).expect(200)).body.keys.filter((k: { revoked_at: string | null }) => !k.revoked_at).map((k: { label: string }) => k.label).sort()).toEqual(['expiring', 'ops', 'plain']);

      const bob = await newUser('bob@minting.example', other.key);
      const bobKey = await mint('bob@minting.example', 'bob cli');
      await t.http.get('/keys').set(bearer(bobKey)).expect(200);
      await t.http.patch(`/users/${bob.id}`).set(bearer(other.key)).send({ name: 'Bob' }).expect(200);
      await t.http.get('/keys').set(bearer(bobKey)).expect(200);
      await t.http.patch(`/users/${bob.id}`).set(bearer(other.key)).send({ role: 'member' }).expect(200);
      expectError(await t.http.get('/keys').set(bearer(bobKey)), 401, 'unauthorized');
      expect((await t.http.get('/keys').set(bearer(other.key)).expect(200)).body.keys.find((k: { label: string }) => k.label === 'bob cli').revoked_at).toEqual(expect.any(String));
    });

    it('cannot delete, demote or disable the user who made them (409 conflict naming the path\'s id, role or disabled; nothing changed); another admin\'s key may', async () => {
      const tenant = await createTenant(t, admin.key, 'self-ending');
      const newUser = async (email: string) =>
        (await t.http.post('/users').set(bearer(tenant.key)).send({ email, password: 'an admin user password', name: 'Self', role: 'admin' }).expect(201)).body;
      const [eve, gus] = [await newUser('eve@self-ending.example'), await newUser('gus@self-ending.example')];
      const [eveKey, gusKey] = [await mint('eve@self-ending.example', 'eve cli'), await mint('gus@self-ending.example', 'gus cli')];

      expect(expectError(await t.http.delete(`/users/${eve.id}`).set(bearer(eveKey)), 409, 'conflict').details).toEqual({ field: 'id' });
      expect(expectError(await t.http.patch(`/users/${eve.id}`).set(bearer(eveKey)).send({ role: 'member' }), 409, 'conflict').details).toEqual({ field: 'role' });
      expect(expectError(await t.http.patch(`/users/${eve.id}`).set(bearer(eveKey)).send({ role: 'member', name: 'Eve' }), 409, 'conflict').details).toEqual({ field: 'role' });
      expect(expectError(await t.http.patch(`/users/${eve.id}`).set(bearer(eveKey)).send({ disabled: true }), 409, 'conflict').details).toEqual({ field: 'disabled' });
      // Nothing of it happened: she is there, unchanged, and her key works.
      expect((await t.http.get(`/users/${eve.id}`).set(bearer(eveKey)).expect(200)).body).toEqual(eve);
      expect((await keyLabelled(eveKey, 'eve cli')).revoked_at).toBeNull();
      // What does not end her key stays hers to do: a rename, her role as it is.
      await t.http.patch(`/users/${eve.id}`).set(bearer(eveKey)).send({ name: 'Eve', role: 'admin' }).expect(200);

      // Another admin's key may, one made on the account pages too.
      await t.http.patch(`/users/${eve.id}`).set(bearer(gusKey)).send({ role: 'member' }).expect(200);
      expectError(await t.http.get('/keys').set(bearer(eveKey)), 401, 'unauthorized');
      await t.http.delete(`/users/${eve.id}`).set(bearer(gusKey)).expect(200);
      await t.http.delete(`/users/${gus.id}`).set(bearer(tenant.key)).expect(200);
      expectError(await t.http.get('/keys').set(bearer(gusKey)), 401, 'unauthorized');
    });

    it('take an optional expiry on the form, checked as POST /keys checks expires_at, shown with the key; a bad one draws the form again (400) saying so at the field, and makes no key', async () => {
      const tenant = await createTenant(t, admin.key, 'expiring');
      await t.http.post('/users').set(bearer(tenant.key)).send({ email: 'exp@expiring.example', password: 'an admin user password', name: 'Exp', role: 'admin' }).expect(201);
      const agent = request.agent(t.url);
      const form = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
      await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(form.text, 'csrf'), email: 'exp@expiring.example', password: 'an admin user password' }).expect(303);
      /** Sends the key form of a fresh showing of the security page (or of `page`) with `fields`. */
      const send = async (fields: Record<string, string>, page?: string) => {
        const shown = page ?? (await agent.get('/auth/security').expect(200)).text;
        return agent.post('/auth/keys').type('form').send({ csrf: field(shown, 'csrf'), form_nonce: field(shown, 'form_nonce'), ...fields });
      };
      const plaintext = (html: string) => /<code id="key">([^<]+)<\/code>/.exec(html)![1];
      const labelled = async (label: string) => (await t.sql(`SELECT 1 FROM api_keys WHERE tenant_id = $1 AND label = $2`, [tenant.tenantId, label])).length;
      expect((await agent.get('/auth/security').expect(200)).text).toMatch(/<input id="expires_at" name="expires_at" type="datetime-local" value="">/);

      // The field's value, read as UTC (the pages' time), is the key's expires_at; the page says when it ends.
      const at = new Date(Date.now() + 7 * 86_400_000);
      at.setUTCSeconds(0, 0);
      const week = await send({ label: 'a week', expires_at: at.toISOString().slice(0, 16) });
      expect(week.status).toBe(200);
      expect(week.text).toContain(`<time datetime="${at.toISOString()}">`);
      expect((await t.http.get('/keys/current').set(bearer(plaintext(week.text))).expect(200)).body).toMatchObject({ label: 'a week', expires_at: at.toISOString() });
      // An RFC 3339 date-time keeps its zone, as on POST /keys.
      const zoned = new Date(at.getTime() + 3_600_000);
      const withZone = await send({ label: 'zoned', expires_at: `${new Date(zoned.getTime() + 7_200_000).toISOString().slice(0, 19)}+02:00` });
      expect(withZone.status).toBe(200);
      expect((await t.http.get('/keys/current').set(bearer(plaintext(withZone.text))).expect(200)).body.expires_at).toBe(zoned.toISOString());
      // Empty, or not sent: it does not expire.
      for (const fields of [{ label: 'never', expires_at: '' }, { label: 'never either' }] as Array<Record<string, string>>) {
        const never = await send(fields);
        expect(never.status).toBe(200);
        expect(never.text).toContain('It does not expire.');
        expect((await t.http.get('/keys/current').set(bearer(plaintext(never.text))).expect(200)).body.expires_at).toBeNull();
      }

      const local = (ms: number) => new Date(Date.now() + ms).toISOString().slice(0, 16);
      for (const bad of [local(-60_000), local(3660 * 86_400_000), 'tomorrow', '2026-13-01T00:00', '2026-12-01']) {
        // POST /keys refuses the same expiry (given a zone, which JSON requires).
        const asJson = /^\d{4}-\d\d-\d\dT\d\d:\d\d$/.test(bad) ? `${bad}:00Z` : bad;
        expect(badFields(await t.http.post('/keys').set(bearer(tenant.key)).send({ expires_at: asJson }))).toEqual(['expires_at']);
        const refused = await send({ label: 'refused', expires_at: bad });
        expect([bad, refused.status, refused.headers['content-type']]).toEqual([bad, 400, 'text/html; charset=utf-8']);
        expect(refused.text).toMatch(/<title>Error: Security<\/title>/);
        expect(refused.text).toMatch(/<p class="error" id="expires_at-error">[^<]+<\/p><input id="expires_at" name="expires_at" type="datetime-local" value="[^"]*" aria-invalid="true" aria-describedby="expires_at-error" autofocus>/);
        expect(field(refused.text, 'label')).toBe('refused');
        expect(refused.text).not.toContain('<code id="key">');
        // Drawn again, the form is a new showing, which sends.
        const fixed = await send({ label: 'fixed', expires_at: local(3_600_000) }, refused.text);
        expect(fixed.status).toBe(200);
      }
      expect(await labelled('refused')).toBe(0);
      expect(await labelled('fixed')).toBe(5);
      // Still a form of the page's: without its CSRF token, refused as expired.
      const page = (await agent.get('/auth/security').expect(200)).text;
      expect((await agent.post('/auth/keys').type('form').send({ form_nonce: field(page, 'form_nonce'), label: 'forged', expires_at: local(3_600_000) })).status).toBe(403);
      expect(await labelled('forged')).toBe(0);
    });

    it('keep a label to what POST /keys takes, 200 characters counted by code point: 150 emoji whole, 201 cut to 200', async () => {
      const tenant = await createTenant(t, admin.key, 'labels');
      await t.http.post('/users').set(bearer(tenant.key)).send({ email: 'label@labels.example', password: 'an admin user password', name: 'Labeller', role: 'admin' }).expect(201);
      // 150 emoji are 300 UTF-16 units: within POST /keys' limit, so within the page's.
      await createKey(t, tenant.key, { label: '😀'.repeat(150) });
      expect(await keyLabelled(await mint('label@labels.example', '😀'.repeat(150)), '😀'.repeat(150))).toBeDefined();
      const cut = await mint('label@labels.example', '😀'.repeat(201));
      expect(await keyLabelled(cut, '😀'.repeat(200))).toBeDefined();
    });

    it('makes one key per showing of the key form: sent again (a reload of its answer) 409 "Form already used" and no key', async () => {
      const tenant = await createTenant(t, admin.key, 'once');
      await t.http.post('/users').set(bearer(tenant.key)).send({ email: 'once@once.example', password: 'an admin user password', name: 'Once', role: 'admin' }).expect(201);
      const agent = request.agent(t.url);
      const form = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
      await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(form.text, 'csrf'), email: 'once@once.example', password: 'an admin user password' }).expect(303);
      const minted = async (label: string) => (await t.sql(`SELECT 1 FROM api_keys WHERE tenant_id = $1 AND label = $2`, [tenant.tenantId, label])).length;
      const page = (await agent.get('/auth/security').expect(200)).text;
      const sent = { csrf: field(page, 'csrf'), form_nonce: field(page, 'form_nonce'), label: 'reloaded' };
      expect(sent.form_nonce).toMatch(/^[\w-]{24}$/);
      const shown = await agent.post('/auth/keys').type('form').send(sent).expect(200);
      expect(shown.text).toContain('<code id="key">');
      const again = await Promise.all([1, 2, 3].map(() => agent.post('/auth/keys').type('form').send(sent)));
      for (const res of again) {
        expect([res.status, res.headers['content-type']]).toEqual([409, 'text/html; charset=utf-8']);
        expect(res.text).toContain('Form already used');
        expect(res.text).toContain('href="/auth/security"');
        expect(res.text).not.toContain('<code id="key">');
      }
      expect(await minted('reloaded')).toBe(1);
      // Without its nonce the form is not the page's: refused as expired.
      expect((await agent.post('/auth/keys').type('form').send({ csrf: sent.csrf, label: 'no nonce' })).status).toBe(403);
      expect(await minted('no nonce')).toBe(0);
    });

    it('refuses a label whose %-escapes are not UTF-8 (400, as in a query string), not kept as the escapes\' text, and makes no key', async () => {
      const tenant = await createTenant(t, admin.key, 'escapes');
      await t.http.post('/users').set(bearer(tenant.key)).send({ email: 'esc@escapes.example', password: 'an admin user password', name: 'Esc', role: 'admin' }).expect(201);
      const agent = request.agent(t.url);
      const form = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
      await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(form.text, 'csrf'), email: 'esc@escapes.example', password: 'an admin user password' }).expect(303);
      const keys = async () => (await t.sql<{ label: string }>(`SELECT label FROM api_keys WHERE tenant_id = $1 AND created_by_user_id IS NOT NULL`, [tenant.tenantId])).map((k) => k.label);
      const send = async (label: string) => {
        const page = (await agent.get('/auth/security').expect(200)).text;
        return agent.post('/auth/keys').type('form').send(`csrf=${encodeURIComponent(field(page, 'csrf'))}&form_nonce=${encodeURIComponent(field(page, 'form_nonce'))}&label=${label}`);
      };
      for (const label of ['ok%C3%A9%FF', '%ED%A0%80', '%FF']) {
        const res = await send(label);
        expect([label, res.status, res.body.error?.code]).toEqual([label, 400, 'invalid_request']);
      }
      expect(await keys()).toEqual([]);
      expect((await send('caf%C3%A9+%F0%9F%94%91')).status).toBe(200);
      expect(await keys()).toEqual(['café 🔑']);
    });
  });

  describe('listing', () => {
    it('pages with limit and cursor, newest first, without overlap, ending with next_cursor null', async () => {
      const tenant = await createTenant(t, admin.key, 'paging');
      const created = [];
      for (let i = 0; i < 6; i++) created.push(await createKey(t, tenant.key, { label: `k${i}` }));
      const all = (await t.http.get('/keys').set(bearer(tenant.key)).expect(200)).body;
      expect(all.keys).toHaveLength(7); // six plus the tenant's first admin key
      expect(all.next_cursor).toBeNull();

      const seen: string[] = [];
      let cursor: string | null = null;
      const sizes: number[] = [];
      do {
        const res: { body: { keys: Array<{ id: string }>; next_cursor: string | null } } = await t.http
          .get('/keys')
          .query({ limit: 3, ...(cursor ? { cursor } : {}) })
          .set(bearer(tenant.key))
          .expect(200);
        sizes.push(res.body.keys.length);
        seen.push(...res.body.keys.map((k) => k.id));
        cursor = res.body.next_cursor;
        expect(cursor === null || typeof cursor === 'string').toBe(true);
      } while (cursor);
      expect(sizes).toEqual([3, 3, 1]);
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen).toEqual(all.keys.map((k: { id: string }) => k.id));
      // Newest first.
      expect(seen.slice(0, 6)).toEqual(created.map((k) => k.id).reverse());

      const exact = await t.http.get('/keys').query({ limit: 7 }).set(bearer(tenant.key)).expect(200);
      expect(exact.body.keys).toHaveLength(7);
      expect(exact.body.next_cursor).toBeNull();
    });

    it('bounds a page in bytes (8 MiB), stopping short of its limit with a cursor to the rest', async () => {
      const tenant = await createTenant(t, admin.key, 'big-keys');
      // Three maps of 200 patterns of 200 characters: about 125 kB of JSON a key.
      const map = (k: number) => Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`p${k}-${i}-${'a'.repeat(185)}.*`, 'read']));
      const made = new Set<string>((await t.http.get('/keys').set(bearer(tenant.key)).expect(200)).body.keys.map((k: { id: string }) => k.id));
      for (let k = 0; k < 72; k++) {
        const body = { type_permissions: map(k), extension_permissions: map(k), edge_permissions: map(k) };
        made.add((await t.http.post('/keys').set(bearer(tenant.key)).send(body).expect(201)).body.id);
      }
      const first = await t.http.get('/keys').query({ limit: 100 }).set(bearer(tenant.key)).expect(200);
      expect(first.body.keys.length).toBeLessThan(made.size);
      expect(first.body.next_cursor).toEqual(expect.any(String));
      expect(Buffer.byteLength(first.text)).toBeLessThan(9 * 1024 * 1024);
      const rest = await t.http.get('/keys').query({ limit: 100, cursor: first.body.next_cursor }).set(bearer(tenant.key)).expect(200);
      expect(rest.body.next_cursor).toBeNull();
      const seen = [...first.body.keys, ...rest.body.keys].map((k: { id: string }) => k.id);
      expect(seen).toHaveLength(made.size);
      expect(new Set(seen)).toEqual(made);
    });

    it('a cursor it did not issue is 400 validation_error', async () => {
      const forged = (position: unknown) => Buffer.from(JSON.stringify(position)).toString('base64url');
      // Year 0000 is a date to JavaScript but not to PostgreSQL.
      for (const cursor of ['garbage', forged(['not a date', 'x']), forged({}), forged(['0000-01-01T00:00:00.000Z', '5fa6676c-1ef9-4825-aeae-61c53329a303'])]) {
        expect(badFields(await t.http.get('/keys').query({ cursor }).set(bearer(admin.key)))).toEqual(['cursor']);
      }
    });

    it('a cursor of another list is 400 validation_error, and one issued before cursors named their list still pages', async () => {
      for (const title of ['a', 'b']) {
        await t.http.post('/items').set(bearer(admin.key)).send({ type: 'core.note', properties: { title } }).expect(201);
      }
      const items = await t.http.get('/items').query({ limit: 1 }).set(bearer(admin.key)).expect(200);
      expect(badFields(await t.http.get('/keys').query({ cursor: items.body.next_cursor }).set(bearer(admin.key)))).toEqual(['cursor']);

      await t.http.post('/keys').set(bearer(admin.key)).send({ label: 'one more' }).expect(201);
      const first = await t.http.get('/keys').query({ limit: 1 }).set(bearer(admin.key)).expect(200);
      const [createdAt, id] = JSON.parse(Buffer.from(first.body.next_cursor, 'base64url').toString()) as string[];
      const legacy = Buffer.from(JSON.stringify([createdAt, id])).toString('base64url');
      const next = await t.http.get('/keys').query({ limit: 1, cursor: first.body.next_cursor }).set(bearer(admin.key)).expect(200);
      expect((await t.http.get('/keys').query({ limit: 1, cursor: legacy }).set(bearer(admin.key)).expect(200)).body).toEqual(next.body);
    });
  });
});

describe('keys: the account pages\' key form while Redis is away', () => {
  const at = appBehindProxy(['redis']);

  it('makes no key while Redis cannot tell whether the form was used (503), and the same showing makes its one key once Redis is back', async () => {
    const { t, redis } = at;
    const admin = await bootstrapAdmin(t);
    await t.http.post('/users').set(bearer(admin.key)).send({ email: 'away@once.example', password: 'an admin user password', name: 'Away', role: 'admin' }).expect(201);
    const agent = request.agent(t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
    await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(form.text, 'csrf'), email: 'away@once.example', password: 'an admin user password' }).expect(303);
    const page = (await agent.get('/auth/security').expect(200)).text;
    const sent = { csrf: field(page, 'csrf'), form_nonce: field(page, 'form_nonce'), label: 'redis away' };
    const minted = async () => (await t.sql(`SELECT 1 FROM api_keys WHERE tenant_id = $1 AND label = $2`, [admin.tenantId, sent.label])).length;

    await redis.cut();
    const refused = await agent.post('/auth/keys').type('form').send(sent);
    expect([refused.status, refused.headers['content-type']]).toEqual([503, 'text/html; charset=utf-8']);
    expect(refused.text).toContain('No key was made');
    expect(await minted()).toBe(0);

    await redis.restore();
    await waitFor(async () => (await agent.post('/auth/keys').type('form').send(sent)).status === 200, 'the key, once Redis is back');
    expect(await minted()).toBe(1);
  });
});
