/**
 * Schema changes of types in use (PATCH /types/{name} with items or subtypes): taken when every
 * existing item stays valid, proven from the schemas or found by checking the items (the type's
 * and its subtypes', each against its own resolved schema), refused with 409 type_in_use naming
 * the items that would not fit; never racing an item write into an invalid state.
 */
import { Client } from 'pg';
import { Api, api, createItem, expectError, expectStatus } from './items/helpers';
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';
import { DEVICE_GRANT, deviceTokens } from './support/device-flow';
import { waitFor } from './support/wait';
import { SCHEMA_CHECK_MAX_ITEMS } from '../src/types/schema-change-check';

describe('type evolution', () => {
  let t: TestApp;
  let admin: Api;
  let adminKey: string;
  let tenantId: string;

  beforeAll(async () => {
    t = await startApp({ OAUTH_DEVICE_POLL_INTERVAL: '1' });
    ({ key: adminKey, tenantId } = await bootstrapAdmin(t));
    admin = api(t, adminKey);
  });
  afterAll(() => t?.close());

  const str = { type: 'string' };

  it('a property added to a type with items → 200 with a new version; new items may use it, old ones stay readable and patchable', async () => {
    expectStatus(await admin.post('/types', { name: 'acme.grow', schema: { properties: { title: str }, additionalProperties: false } }), 201);
    const old = await createItem(admin, { type: 'acme.grow', properties: { title: 'old' } });
    expect(old.schema_version).toBe(1);
    expectError(await admin.post('/items', { type: 'acme.grow', properties: { title: 'x', rating: 3 } }), 400, 'invalid_properties');

    // Proven (additionalProperties was false): no item could hold `rating`.
    const grown = await admin.patch('/types/acme.grow', { schema: { properties: { title: str, rating: { type: 'integer' } }, additionalProperties: false } });
    expectStatus(grown, 200);
    expect(grown.body.version).toBe(2);
    expect(grown.body.resolved_schema.properties.rating).toEqual({ type: 'integer' });

    const fresh = await createItem(admin, { type: 'acme.grow', properties: { title: 'new', rating: 5 } });
    expect(fresh.schema_version).toBe(2);
    const read = await admin.get(`/items/${old.id}`);
    expectStatus(read, 200);
    expect(read.body).toMatchObject({ properties: { title: 'old' }, schema_version: 1 });
    const patched = await admin.patch(`/items/${old.id}`, { version: old.version, properties: { rating: 4 } });
    expectStatus(patched, 200);
    expect(patched.body).toMatchObject({ properties: { title: 'old', rating: 4 }, schema_version: 2 });

    // Open schema: an item may already hold the new key with another type, so the items are checked.
    expectStatus(await admin.post('/types', { name: 'acme.open', schema: { properties: { title: str } } }), 201);
    const holder = await createItem(admin, { type: 'acme.open', properties: { title: 'a', note: 7 } });
    await createItem(admin, { type: 'acme.open', properties: { title: 'b' } });
    const refused = expectError(await admin.patch('/types/acme.open', { schema: { properties: { title: str, note: str } } }), 409, 'type_in_use');
    expect(refused.details).toMatchObject({ reason: 'items_invalid', invalid_items: [{ id: holder.id, type: 'acme.open', fields: [{ field: 'properties.note' }] }] });
    expectStatus(await admin.patch('/types/acme.open', { schema: { properties: { title: str, note: { type: ['string', 'integer'] } } } }), 200);
  });

  it('a property made required → 200 when every item has it (checked), 409 naming the item that lacks it', async () => {
    const schema = { properties: { title: str, due: str } };
    expectStatus(await admin.post('/types', { name: 'acme.req', schema }), 201);
    for (const due of ['mon', 'tue']) await createItem(admin, { type: 'acme.req', properties: { title: 'x', due } });
    const ok = await admin.patch('/types/acme.req', { schema: { ...schema, required: ['due'] } });
    expectStatus(ok, 200);
    expect(ok.body.version).toBe(2);
    expectError(await admin.post('/items', { type: 'acme.req', properties: { title: 'x' } }), 400, 'missing_required_field');

    expectStatus(await admin.post('/types', { name: 'acme.req2', schema }), 201);
    await createItem(admin, { type: 'acme.req2', properties: { title: 'x', due: 'mon' } });
    const lacking = await createItem(admin, { type: 'acme.req2', properties: { title: 'y' } });
    // A trashed item counts: it can be restored as it is.
    expectStatus(await admin.delete(`/items/${lacking.id}`), 200);
    const refused = expectError(await admin.patch('/types/acme.req2', { schema: { ...schema, required: ['due'] } }), 409, 'type_in_use');
    expect(refused.details).toEqual({
      reason: 'items_invalid',
      invalid_items: [{ id: lacking.id, type: 'acme.req2', fields: [{ field: 'properties.due', message: 'is required' }] }],
    });
    const unchanged = await admin.get('/types/acme.req2');
    expect(unchanged.body).toMatchObject({ version: 1, schema });
  });

  it('a narrower enum → 409 when an item uses a removed value, 200 when none does; a wider one is proven', async () => {
    const withEnum = (values: string[]) => ({ properties: { cuisine: { type: 'string', enum: values } } });
    expectStatus(await admin.post('/types', { name: 'acme.dish', schema: withEnum(['it', 'fr', 'jp']) }), 201);
    const french = await createItem(admin, { type: 'acme.dish', properties: { cuisine: 'fr' } });
    await createItem(admin, { type: 'acme.dish', properties: { cuisine: 'it' } });
    const refused = expectError(await admin.patch('/types/acme.dish', { schema: withEnum(['it', 'jp']) }), 409, 'type_in_use');
    expect(refused.details!.invalid_items.map((i: { id: string }) => i.id)).toEqual([french.id]);
    expectStatus(await admin.patch('/types/acme.dish', { schema: withEnum(['it', 'fr']) }), 200);
    expectStatus(await admin.patch('/types/acme.dish', { schema: withEnum(['it', 'fr', 'es']) }), 200);
  });

  it("a parent's change reaches its subtypes: their items are checked against the subtype's own resolved schema", async () => {
    expectStatus(await admin.post('/types', { name: 'acme.doc', schema: { properties: { title: str, pages: { type: 'integer' } } } }), 201);
    expectStatus(await admin.post('/types', { name: 'acme.doc.memo', parent: 'acme.doc', schema: { properties: { to: str } } }), 201);
    await createItem(admin, { type: 'acme.doc', properties: { title: 'a', pages: 2 } });
    const memo = await createItem(admin, { type: 'acme.doc.memo', properties: { title: 'b', to: 'x' } });

    // Every acme.doc item has pages; the memo does not: it is the memo that is named.
    const refused = expectError(
      await admin.patch('/types/acme.doc', { schema: { properties: { title: str, pages: { type: 'integer' } }, required: ['pages'] } }),
      409,
      'type_in_use',
    );
    expect(refused.details).toMatchObject({ reason: 'items_invalid', invalid_items: [{ id: memo.id, type: 'acme.doc.memo', fields: [{ field: 'properties.pages' }] }] });

    // A subtype-only rule (memo's `to` must be a string) is checked on the subtype's items alone.
    const memoBefore = (await admin.get('/types/acme.doc.memo')).body;
    const grown = await admin.patch('/types/acme.doc', { schema: { properties: { title: str, pages: { type: 'integer', minimum: 0 } } } });
    expectStatus(grown, 200);
    const memoAfter = (await admin.get('/types/acme.doc.memo')).body;
    expect(memoAfter.version).toBe(memoBefore.version + 1);
    expect(memoAfter.resolved_schema.properties.pages).toEqual({ type: 'integer', minimum: 0 });
    expectError(await admin.post('/items', { type: 'acme.doc.memo', properties: { title: 'c', pages: -1 } }), 400, 'invalid_properties');

    // A parent change a subtype would contradict → 409 naming the subtype.
    expectStatus(await admin.post('/types', { name: 'acme.kind', schema: { properties: { k: { type: 'string', enum: ['a', 'b'] } } } }), 201);
    expectStatus(await admin.post('/types', { name: 'acme.kind.b', parent: 'acme.kind', schema: { properties: { k: { enum: ['b'] } } } }), 201);
    const conflict = expectError(await admin.patch('/types/acme.kind', { schema: { properties: { k: { type: 'string', enum: ['a'] } } } }), 409, 'type_in_use');
    expect(conflict.details).toMatchObject({ reason: 'subtype_conflict', subtype: 'acme.kind.b', error: { code: 'inheritance_violation' } });
  });

  it('a refusal names only the subtypes and items the credential may read', async () => {
    expectStatus(await admin.post('/types', { name: 'acme.vis', schema: { properties: { title: str, n: { type: 'integer' } } } }), 201);
    expectStatus(await admin.post('/types', { name: 'acme.vis.hidden', parent: 'acme.vis', schema: { properties: { secret: str } } }), 201);
    const hidden = await createItem(admin, { type: 'acme.vis.hidden', properties: { title: 'h', secret: 'x' } });
    // An admin user's app may manage types (metadata.types:write) while reading acme.vis alone.
    const user = { email: 'types@example.com', password: 'a long enough passphrase 42' };
    expectStatus(await admin.post('/users', { ...user, name: 'Types', role: 'admin' }), 201);
    const scopes = ['acme.vis:read', 'metadata.types:write'];
    const client = await admin.post('/auth/clients', { client_name: 'Schema tool', grant_types: [DEVICE_GRANT], response_types: [], token_endpoint_auth_method: 'none', scope: scopes.join(' ') });
    expectStatus(client, 201);
    const { access_token } = await deviceTokens(t, client.body.client_id, user, scopes);
    expectStatus(await t.http.get('/types/acme.vis.hidden').set(bearer(access_token)), 404);

    const required = { schema: { properties: { title: str, n: { type: 'integer' } }, required: ['n'] } };
    const refused = expectError(await t.http.patch('/types/acme.vis').set(bearer(access_token)).send(required), 409, 'type_in_use');
    expect(refused.details).toEqual({ reason: 'items_invalid', invalid_items: [], unreadable_items: 1 });
    expect(JSON.stringify(refused)).not.toMatch(new RegExp(`${hidden.id}|acme\\.vis\\.hidden`));
    const toAdmin = expectError(await admin.patch('/types/acme.vis', required), 409, 'type_in_use');
    expect(toAdmin.details).toMatchObject({ invalid_items: [{ id: hidden.id, type: 'acme.vis.hidden' }] });
  });

  it('a type of more items than are checked: a property whose key no item holds is added, other unproven changes → 409 too_many_items', async () => {
    expectStatus(await admin.post('/types', { name: 'acme.big', schema: { properties: { title: str } } }), 201);
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, version, schema_version, source, "timestamp", tier, tags, extensions, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'acme.big', jsonb_build_object('title', 't' || n), 'active', 1, 1, k.source, now(), 'library', '{}', '{}', now(), now()
         FROM generate_series(1, $2::int) n, (SELECT source FROM api_keys WHERE tenant_id = $1 LIMIT 1) k`,
      [tenantId, SCHEMA_CHECK_MAX_ITEMS + 1],
    );
    const grown = await admin.patch('/types/acme.big', { schema: { properties: { title: str, rating: { type: 'integer' } } } });
    expectStatus(grown, 200);
    const refused = expectError(await admin.patch('/types/acme.big', { schema: { properties: { title: str, rating: { type: 'integer' } }, required: ['title'] } }), 409, 'type_in_use');
    expect(refused.details).toEqual({ reason: 'too_many_items', types: ['acme.big'], max_checked_items: SCHEMA_CHECK_MAX_ITEMS });
    // Once one item holds a key, adding a property under it is no longer proven.
    await createItem(admin, { type: 'acme.big', properties: { title: 'x', colour: 3 } });
    const held = expectError(await admin.patch('/types/acme.big', { schema: { properties: { title: str, rating: { type: 'integer' }, colour: str } } }), 409, 'type_in_use');
    expect(held.details).toMatchObject({ reason: 'too_many_items' });
    expect((await admin.get('/types/acme.big')).body.version).toBe(2);
  });

  it('search: a change it does not read leaves the item rows alone; making a property unsearchable reindexes the items', async () => {
    expectStatus(await admin.post('/types', { name: 'acme.find', schema: { properties: { title: str, secret: str } } }), 201);
    const item = await createItem(admin, { type: 'acme.find', properties: { title: 'plain', secret: 'zanzibarword' } });
    const found = async () => (await admin.get('/search', { q: 'zanzibarword', type: 'acme.find' })).body.results.map((r: any) => r.item.id);
    expect(await found()).toEqual([item.id]);
    const rowVersion = async () => (await t.sql<{ xmin: string }>(`SELECT xmin::text FROM items WHERE id = $1`, [item.id]))[0].xmin;
    const before = await rowVersion();
    expectStatus(await admin.patch('/types/acme.find', { schema: { properties: { title: str, secret: str, extra: str } } }), 200);
    expect(await rowVersion()).toBe(before);
    expectStatus(await admin.patch('/types/acme.find', { schema: { properties: { title: str, secret: { ...str, searchable: false }, extra: str } } }), 200);
    expect(await rowVersion()).not.toBe(before);
    expect(await found()).toEqual([]);
  });

  it("another tenant's type → 404; DELETE of a type in use stays 409", async () => {
    expectStatus(await admin.post('/types', { name: 'acme.mine', schema: { properties: { a: str } } }), 201);
    await createItem(admin, { type: 'acme.mine', properties: { a: 'x' } });
    const other = api(t, (await createTenant(t, adminKey, 'evolution-other')).key);
    expectError(await other.patch('/types/acme.mine', { schema: { properties: { a: str, b: str } } }), 404, 'type_not_found');
    expectError(await admin.delete('/types/acme.mine'), 409, 'type_in_use');
  });

  /**
   * An item write in flight (it read the old schema, under the shared catalogue lock forWrite
   * takes, and has not committed) when the change comes: the change waits for it and then
   * checks its item. Stood in for by a transaction that holds that lock while it inserts an
   * item the new schema refuses, committed only once the PATCH is seen waiting.
   */
  it('a change waits for an item write in flight and checks its item too', async () => {
    expectStatus(await admin.post('/types', { name: 'acme.race', schema: { properties: { title: str, due: str } } }), 201);
    await createItem(admin, { type: 'acme.race', properties: { title: 'a', due: 'mon' } });
    const writer = new Client({ connectionString: t.databaseUrl });
    await writer.connect();
    try {
      await writer.query('BEGIN');
      await writer.query(`SELECT pg_advisory_xact_lock_shared(hashtext($1))`, [`types:${tenantId}`]);
      const [{ id }] = (
        await writer.query(
          `INSERT INTO items (tenant_id, id, type, properties, state, version, schema_version, source, "timestamp", tier, tags, extensions, created_at, updated_at)
           SELECT $1, gen_random_uuid(), 'acme.race', '{"title":"b"}', 'active', 1, 1, source, now(), 'library', '{}', '{}', now(), now()
             FROM api_keys WHERE tenant_id = $1 LIMIT 1 RETURNING id`,
          [tenantId],
        )
      ).rows;
      const change = admin.patch('/types/acme.race', { schema: { properties: { title: str, due: str }, required: ['due'] } });
      await waitFor(
        async () => (await writer.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)).rowCount! > 0,
        'the change to wait for the write',
      );
      await writer.query('COMMIT');
      const refused = expectError(await change, 409, 'type_in_use');
      expect(refused.details!.invalid_items.map((i: { id: string }) => i.id)).toEqual([id]);
    } finally {
      await writer.end();
    }
  });
});
