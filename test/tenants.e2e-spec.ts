/** CONTRACT "Tenants and keys": POST /tenants, and tenant isolation of the /keys surface. */
import { randomUUID } from 'node:crypto';
import { keyDigest } from '../src/idempotency/idempotency-key';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { expectLocation } from './support/created';
import { badFields, expectError } from './support/envelope';
import { expectKeyBody } from './support/keys';

describe('tenants', () => {
  let t: TestApp;
  let root: { key: string; id: string; tenantId: string };

  beforeAll(async () => {
    t = await startApp();
    root = await bootstrapAdmin(t);
  });
  afterAll(() => t.close());

  describe('POST /tenants', () => {
    it('by the root tenant\'s admin: 201 with the tenant and its first admin key', async () => {
      const res = await t.http.post('/tenants').set(bearer(root.key)).send({ name: 'Acme Corp' }).expect(201);
      expect(Object.keys(res.body).sort()).toEqual(['admin_key', 'tenant']);
      expect(res.body.tenant).toEqual({ id: expect.any(String), name: 'Acme Corp', created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T[\d:.]+Z$/) });
      expect(res.body.tenant.id).not.toBe(root.tenantId);
      expectKeyBody(res.body.admin_key, true);
      expect(res.body.admin_key).toMatchObject({ role: 'admin', tenant_id: res.body.tenant.id, revoked_at: null });
      // The new key manages its own tenant only.
      const list = await t.http.get('/keys').set(bearer(res.body.admin_key.key)).expect(200);
      expect(list.body.keys.map((k: { id: string }) => k.id)).toEqual([res.body.admin_key.id]);
      const row = await t.sql<{ is_root: boolean }>('SELECT is_root FROM tenants WHERE id = $1', [res.body.tenant.id]);
      expect(row).toEqual([{ is_root: false }]);
      // A name of the longest kind still gives a label within a key label's 200 characters.
      const long = await t.http.post('/tenants').set(bearer(root.key)).send({ name: 'n'.repeat(200) }).expect(201);
      expect(long.body.admin_key.label).toHaveLength(200);
      // Cut between characters: 200 emoji are 400 UTF-16 units, and half of one is text the service refuses.
      const emoji = await t.http.post('/tenants').set(bearer(root.key)).send({ name: `a${'😀'.repeat(199)}` }).expect(201);
      expect([...emoji.body.admin_key.label]).toHaveLength(200);
      expect(emoji.body.admin_key.label).toBe(`a${'😀'.repeat(199)}`);
      const stored = await t.http.get(`/keys/${emoji.body.admin_key.id}`).set(bearer(emoji.body.admin_key.key)).expect(200);
      expect(stored.body.label).toBe(emoji.body.admin_key.label);
      expect(badFields(await t.http.post('/tenants').set(bearer(root.key)).send({ name: '   ' }))).toEqual(['name']);
      // Characters by code point, as a user's name and the sign-up page count them: ❤️ (with its variation selector) is two.
      expect(badFields(await t.http.post('/tenants').set(bearer(root.key)).send({ name: 'a'.repeat(199) + '❤️' }))).toEqual(['name']);
      await t.http.post('/tenants').set(bearer(root.key)).send({ name: 'a'.repeat(198) + '❤️' }).expect(201);
    });

    it('by anyone else: 403 forbidden (or 401 without a key), and nothing is created', async () => {
      const other = await createTenant(t, root.key, 'not root');
      const rootMember = await createKey(t, root.key, { role: 'member', type_permissions: { '*': 'write' } });
      const otherMember = await createKey(t, other.key, { role: 'member' });
      const before = (await t.sql('SELECT 1 FROM tenants')).length;
      expectError(await t.http.post('/tenants').set(bearer(other.key)).send({ name: 'x' }), 403, 'forbidden');
      expectError(await t.http.post('/tenants').set(bearer(rootMember.key)).send({ name: 'x' }), 403, 'forbidden');
      expectError(await t.http.post('/tenants').set(bearer(otherMember.key)).send({ name: 'x' }), 403, 'forbidden');
      expectError(await t.http.post('/tenants').send({ name: 'x' }), 401, 'unauthorized');
      expect(await t.sql('SELECT 1 FROM tenants')).toHaveLength(before);
    });

    it('validates the name', async () => {
      expect(badFields(await t.http.post('/tenants').set(bearer(root.key)).send({}))).toEqual(['name']);
      expect(badFields(await t.http.post('/tenants').set(bearer(root.key)).send({ name: '' }))).toEqual(['name']);
      expect(badFields(await t.http.post('/tenants').set(bearer(root.key)).send({ name: 7, plan: 'gold' })).sort()).toEqual(['name', 'plan']);
    });

    it('refuses a blank name, or one with control or bidirectional override characters, creating nothing', async () => {
      const before = (await t.sql('SELECT 1 FROM tenants')).length;
      // Blank too: a name of zero-width, filler or tag characters only, which shows nothing.
      for (const name of ['\u202e\u0007bell', ' \t ', 'Acme\u001b[31m', 'Acme\u009b', 'Acme\u2067', 'Acme\u202d', '\u200b', '\u3164', '\u2800', '\u00ad\u034f', '\u2060', '\u115f\u1160', '\u{E0041}\u{E0042}']) {
        const error = expectError(await t.http.post('/tenants').set(bearer(root.key)).send({ name }), 400, 'validation_error');
        expect([name, error.details!.fields]).toEqual([name, [{ field: 'name', message: expect.stringContaining('not blank') }]]);
      }
      expect(await t.sql('SELECT 1 FROM tenants')).toHaveLength(before);
      await t.http.post('/tenants').set(bearer(root.key)).send({ name: 'Ünal & Zoë 😀 (right-to-left: שלום)' }).expect(201);
    });

    it('takes an Idempotency-Key: a retry gets the same tenant and admin key again, and makes no second tenant', async () => {
      const idem = randomUUID();
      const name = `idempotent ${idem}`;
      const tenantsNamed = async (n: string) => Number((await t.sql<{ n: string }>('SELECT count(*) AS n FROM tenants WHERE name = $1', [n]))[0].n);
      const first = await t.http.post('/tenants').set(bearer(root.key)).set('Idempotency-Key', idem).send({ name }).expect(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const retry = await t.http.post('/tenants').set(bearer(root.key)).set('Idempotency-Key', idem).send({ name }).expect(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.body).toEqual(first.body);
      expect(retry.body.admin_key.key).toBe(first.body.admin_key.key);
      expect(await tenantsNamed(name)).toBe(1);
      // The replayed key is the tenant's one working key.
      const keys = (await t.http.get('/keys').set(bearer(retry.body.admin_key.key)).expect(200)).body.keys;
      expect(keys.map((k: { id: string }) => k.id)).toEqual([first.body.admin_key.id]);

      const other = await t.http.post('/tenants').set(bearer(root.key)).set('Idempotency-Key', idem).send({ name: `${name} (other)` });
      expectError(other, 409, 'conflict');
      expect(await tenantsNamed(`${name} (other)`)).toBe(0);
    });

    it('never runs a tenant\'s creation twice, even when its response could not be kept: its transaction marked the key applied', async () => {
      const idem = randomUUID();
      const name = `applied ${idem}`;
      const post = () => t.http.post('/tenants').set(bearer(root.key)).set('Idempotency-Key', idem).send({ name });
      await t.sql(`CREATE FUNCTION refuse_tenant_completion() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'not now'; END $$`);
      await t.sql(`CREATE TRIGGER refuse_tenant_completion BEFORE UPDATE ON idempotency_keys FOR EACH ROW WHEN (NEW.state = 'completed') EXECUTE FUNCTION refuse_tenant_completion()`);
      try {
        expect((await post()).status).toBe(201);
      } finally {
        await t.sql(`DROP TRIGGER refuse_tenant_completion ON idempotency_keys`);
        await t.sql(`DROP FUNCTION refuse_tenant_completion()`);
      }
      const where = 'key_hash = $1';
      expect(await t.sql(`SELECT state FROM idempotency_keys WHERE ${where}`, [keyDigest(idem)])).toEqual([{ state: 'applied' }]);
      // Past the claim's lease, the retry is refused, not run again.
      await t.sql(`UPDATE idempotency_keys SET created_at = created_at - interval '1 hour' WHERE ${where}`, [keyDigest(idem)]);
      expectError(await post(), 409, 'conflict');
      expect(await t.sql('SELECT 1 FROM tenants WHERE name = $1', [name])).toHaveLength(1);
    });
  });

  describe('reading tenants back', () => {
    it('POST /tenants answers Location: /tenants/{id}, which GET reads, and a replay carries it too', async () => {
      const idem = randomUUID();
      const post = () => t.http.post('/tenants').set(bearer(root.key)).set('Idempotency-Key', idem).send({ name: 'Located' });
      const res = await post();
      const got = await expectLocation(t, res, `/tenants/${res.body.tenant.id}`, root.key);
      expect(got.body).toEqual(res.body.tenant);
      const retry = await post().expect(201);
      expect([retry.headers['idempotent-replayed'], retry.headers.location]).toEqual(['true', `/tenants/${res.body.tenant.id}`]);
    });

    it('GET /tenants pages through every tenant, the root one included, newest first', async () => {
      for (let i = 0; i < 3; i++) await createTenant(t, root.key, `paged ${i}`);
      const all = await t.sql<{ id: string }>('SELECT id FROM tenants ORDER BY created_at DESC, id DESC');
      const first = await t.http.get('/tenants').set(bearer(root.key)).expect(200);
      expect(Object.keys(first.body).sort()).toEqual(['next_cursor', 'tenants']);
      expect(first.body.tenants.map((x: { id: string }) => x.id)).toEqual(all.map((r) => r.id).slice(0, 50));
      expect(first.body.tenants[0]).toEqual({ id: expect.any(String), name: expect.any(String), created_at: expect.stringMatching(/Z$/) });
      const ids: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { body: { tenants: Array<{ id: string }>; next_cursor: string | null } } = await t.http
          .get('/tenants')
          .query({ limit: 2, ...(cursor ? { cursor } : {}) })
          .set(bearer(root.key))
          .expect(200);
        expect(page.body.tenants.length).toBeLessThanOrEqual(2);
        ids.push(...page.body.tenants.map((x) => x.id));
        cursor = page.body.next_cursor;
      } while (cursor);
      expect(ids).toEqual(all.map((r) => r.id));
      expect(ids).toContain(root.tenantId);
      expect(badFields(await t.http.get('/tenants').query({ limit: 101 }).set(bearer(root.key)))).toEqual(['limit']);
      const keysCursor = (await t.http.get('/keys').query({ limit: 1 }).set(bearer(root.key)).expect(200)).body.next_cursor;
      expect(badFields(await t.http.get('/tenants').query({ cursor: keysCursor }).set(bearer(root.key)))).toEqual(['cursor']);
    });

    it('GET /tenants/{id}: 404 not_found for an unknown id, 400 invalid_id for a malformed one', async () => {
      expect((await t.http.get(`/tenants/${root.tenantId}`).set(bearer(root.key)).expect(200)).body).toMatchObject({ id: root.tenantId, name: 'root' });
      expectError(await t.http.get(`/tenants/${randomUUID()}`).set(bearer(root.key)), 404, 'not_found');
      expectError(await t.http.get('/tenants/nope').set(bearer(root.key)), 400, 'invalid_id');
    });

    it('is for an admin key of the root tenant only: another tenant\'s admin (even for its own tenant) and a member get 403', async () => {
      const other = await createTenant(t, root.key, 'not root reader');
      const rootMember = await createKey(t, root.key, { role: 'member', type_permissions: { '*': 'write' } });
      for (const key of [other.key, rootMember.key]) {
        expectError(await t.http.get('/tenants').set(bearer(key)), 403, 'forbidden');
        expectError(await t.http.get(`/tenants/${other.tenantId}`).set(bearer(key)), 403, 'forbidden');
      }
      expectError(await t.http.get('/tenants'), 401, 'unauthorized');
    });
  });

  describe('isolation of keys', () => {
    let a: { key: string; tenantId: string };
    let b: { key: string; tenantId: string };
    let aKeys: Array<Record<string, any>>;

    beforeAll(async () => {
      a = await createTenant(t, root.key, 'tenant-a');
      b = await createTenant(t, root.key, 'tenant-b');
      aKeys = [await createKey(t, a.key, { label: 'a member', source: 'a-src' }), await createKey(t, a.key, { label: 'a admin', role: 'admin' })];
    });

    it('another tenant\'s admin gets 404 on GET, PATCH and DELETE of its key ids, and changes nothing', async () => {
      for (const k of aKeys) {
        expectError(await t.http.get(`/keys/${k.id}`).set(bearer(b.key)), 404, 'not_found');
        expectError(await t.http.patch(`/keys/${k.id}`).set(bearer(b.key)).send({ label: 'pwned', role: 'admin' }), 404, 'not_found');
        expectError(await t.http.delete(`/keys/${k.id}`).set(bearer(b.key)), 404, 'not_found');
        // The root tenant's admin is no exception: tenants are isolated from each other.
        expectError(await t.http.get(`/keys/${k.id}`).set(bearer(root.key)), 404, 'not_found');
        expectError(await t.http.delete(`/keys/${k.id}`).set(bearer(root.key)), 404, 'not_found');
      }
      const rows = await t.sql<{ label: string; revoked_at: Date | null }>(
        'SELECT label, revoked_at FROM api_keys WHERE id = ANY($1) ORDER BY label',
        [aKeys.map((k) => k.id)],
      );
      expect(rows).toEqual([
        { label: 'a admin', revoked_at: null },
        { label: 'a member', revoked_at: null },
      ]);
      // The keys still work.
      await t.http.get('/keys').set(bearer(aKeys[1].key)).expect(200);
    });

    it('lists never show another tenant\'s keys', async () => {
      const listB = (await t.http.get('/keys').query({ limit: 100 }).set(bearer(b.key)).expect(200)).body.keys;
      expect(listB.every((k: { tenant_id: string }) => k.tenant_id === b.tenantId)).toBe(true);
      expect(listB).toHaveLength(1);
      const listA = (await t.http.get('/keys').query({ limit: 100 }).set(bearer(a.key)).expect(200)).body.keys;
      expect(listA).toHaveLength(3); // its first admin key plus the two created above
      expect(listA.every((k: { tenant_id: string }) => k.tenant_id === a.tenantId)).toBe(true);
      expect(listA.map((k: { id: string }) => k.id)).toEqual(expect.arrayContaining(aKeys.map((k) => k.id)));
      const listRoot = (await t.http.get('/keys').query({ limit: 100 }).set(bearer(root.key)).expect(200)).body.keys;
      expect(listRoot.length).toBeGreaterThan(0);
      expect(listRoot.every((k: { tenant_id: string }) => k.tenant_id === root.tenantId)).toBe(true);
    });

    it('a key created by a tenant\'s admin belongs to that tenant, whatever the body says', async () => {
      const res = await t.http.post('/keys').set(bearer(b.key)).send({ label: 'mine', tenant_id: a.tenantId });
      expect(badFields(res)).toEqual(['tenant_id']);
      const created = await createKey(t, b.key, { label: 'mine' });
      expect(created.tenant_id).toBe(b.tenantId);
    });
  });
});
