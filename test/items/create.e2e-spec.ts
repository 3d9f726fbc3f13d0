/**
 * Item writes over HTTP: POST /items (fields, stamping, validation, natural-key upsert incl.
 * concurrent upserts), POST /items/bulk, DELETE, and id validation.
 */
import { randomUUID } from 'node:crypto';
import { bootstrapAdmin, createKey, startApp, TestApp } from '../support/app';
import { expectLocation } from '../support/created';
import { Api, api, createItem, expectError, expectStatus, ITEM_FIELDS, note, RFC3339 } from './helpers';

describe('items: create, upsert, bulk, delete', () => {
  let t: TestApp;
  let adminKey: string;
  let tenantId: string;
  let admin: Api;
  let adminSource: string;

  beforeAll(async () => {
    t = await startApp();
    const boot = await bootstrapAdmin(t);
    adminKey = boot.key;
    tenantId = boot.tenantId;
    admin = api(t, adminKey);
    adminSource = (await admin.get('/keys')).body.keys[0].source;
  });
  afterAll(() => t?.close());

  describe('POST /items', () => {
    it('201 with every SPEC 2.1 field plus tags, as sent', async () => {
      const body = {
        type: 'core.bookmark',
        properties: { url: 'https://example.com/a', title: 'Example' },
        source_id: 'bm-1',
        tags: ['reading', 'work'],
        tier: 'feed',
        state: 'archived',
        timestamp: '2024-03-01T10:00:00.000Z',
        device: 'phone-1',
        capture_latitude: 52.52,
        capture_longitude: 13.405,
        extensions: { 'acme.geo': { accuracy: 5 } },
      };
      const res = await admin.post('/items', body);
      expectStatus(res, 201);
      expect(Object.keys(res.body).sort()).toEqual(ITEM_FIELDS);
      expect(res.body).toMatchObject({
        type: 'core.bookmark',
        properties: body.properties,
        state: 'archived',
        version: 1,
        schema_version: 1,
        source: adminSource,
        source_id: 'bm-1',
        timestamp: '2024-03-01T10:00:00.000Z',
        tier: 'feed',
        tenant_id: tenantId,
        device: 'phone-1',
        capture_latitude: 52.52,
        capture_longitude: 13.405,
        edges: {},
        extensions: { 'acme.geo': { accuracy: 5 } },
        tags: ['reading', 'work'],
      });
      expect(res.body.id).toMatch(/^[0-9a-f-]{36}$/);
      for (const f of ['timestamp', 'created_at', 'updated_at']) expect(res.body[f]).toMatch(RFC3339);

      const got = await admin.get(`/items/${res.body.id}`);
      expectStatus(got, 200);
      expect(got.body).toEqual(res.body);
    });

    it('a creation answers Location: /items/{id}, which GET reads; an update through the natural key (200) has none', async () => {
      const created = await admin.post('/items', note('located', { source_id: 'located-1' }));
      expect((await expectLocation(t, created, `/items/${created.body.id}`, adminKey)).body).toEqual(created.body);
      const updated = await admin.post('/items', note('located again', { source_id: 'located-1' }));
      expect([updated.status, updated.headers.location]).toEqual([200, undefined]);
    });

    it('defaults: state active, version 1, null optional fields, no tags, timestamp = creation time', async () => {
      const before = Date.now();
      const item = await createItem(admin, note('plain'));
      expect(item).toMatchObject({ state: 'active', version: 1, source_id: null, device: null, capture_latitude: null, capture_longitude: null, tags: [], extensions: {} });
      const ts = Date.parse(item.timestamp);
      expect(ts).toBeGreaterThanOrEqual(before - 5000);
      expect(ts).toBeLessThanOrEqual(Date.now() + 5000);
    });

    it('timestamps with an offset are stored and returned in UTC', async () => {
      const item = await createItem(admin, note('tz', { timestamp: '2024-03-01T11:00:00+01:00' }));
      expect(item.timestamp).toBe('2024-03-01T10:00:00.000Z');
    });

    it('source is stamped from the key; a client-sent source is ignored', async () => {
      const key = await createKey(t, adminKey, { role: 'member', source: 'importer.one', type_permissions: { '*': 'write' } });
      const c = api(t, key.key);
      const res = await c.post('/items', { ...note('stamped'), source: 'forged.source', source_id: 's-1' });
      expectStatus(res, 201);
      expect(res.body.source).toBe('importer.one');
      expect((await admin.get('/items', { source: 'forged.source' })).body.items).toEqual([]);
      const listed = await admin.get('/items', { source: 'importer.one' });
      expect(listed.body.items.map((i: any) => i.id)).toEqual([res.body.id]);
    });

    it("the key's default_tier applies when no tier is sent; a per-item tier overrides it", async () => {
      const feedKey = api(t, (await createKey(t, adminKey, { role: 'member', default_tier: 'feed', type_permissions: { '*': 'write' } })).key);
      expect((await createItem(feedKey, note('defaulted'))).tier).toBe('feed');
      expect((await createItem(feedKey, note('overridden', { tier: 'library' }))).tier).toBe('library');
      const libraryKey = api(t, (await createKey(t, adminKey, { role: 'member', type_permissions: { '*': 'write' } })).key);
      expect((await createItem(libraryKey, note('lib'))).tier).toBe('library');
      expect((await createItem(libraryKey, note('feed', { tier: 'feed' }))).tier).toBe('feed');
    });

    it('invalid properties → 400 invalid_properties naming each bad field as properties.<name>', async () => {
      const res = await admin.post('/items', { type: 'core.task', properties: { title: 5, status: 'nope', priority: 9 } });
      expectError(res, 400, 'invalid_properties');
      expect(res.body.error.details.fields.map((f: any) => f.field).sort()).toEqual(['properties.priority', 'properties.status', 'properties.title']);
      for (const f of res.body.error.details.fields) expect(typeof f.message).toBe('string');

      const url = await admin.post('/items', { type: 'core.bookmark', properties: { url: 'not a url' } });
      expectError(url, 400, 'invalid_properties');
      expect(url.body.error.details.fields.map((f: any) => f.field)).toEqual(['properties.url']);
    });

    it('a missing required property → 400 missing_required_field', async () => {
      const res = await admin.post('/items', { type: 'core.bookmark', properties: { title: 'no url' } });
      expectError(res, 400, 'missing_required_field');
      expect(res.body.error.details.fields.map((f: any) => f.field)).toEqual(['properties.url']);
      expectError(await admin.post('/items', { type: 'core.bookmark' }), 400, 'missing_required_field');
    });

    it('a missing required property among other problems → 400 missing_required_field listing every one', async () => {
      const res = await admin.post('/items', { type: 'core.task', properties: { priority: 'high', status: 'nope' } });
      const error = expectError(res, 400, 'missing_required_field');
      expect(error.details!.fields.map((f: any) => f.field).sort()).toEqual(['properties.priority', 'properties.status', 'properties.title']);
      expect(error.details!.fields.find((f: any) => f.field === 'properties.title').message).toBe('is required');
      // In a bulk write, that element's error says the same.
      const bulk = await admin.post('/items/bulk', { mode: 'upsert', items: [{ type: 'core.task', properties: { priority: 'high', status: 'nope' } }] });
      expect(bulk.body.results[0].error).toEqual(error);
    });

    it('a key a closed object does not allow is named where it is, at any depth', async () => {
      const closed = (properties: Record<string, unknown>) => ({ type: 'object', properties, additionalProperties: false });
      const schema = closed({ a: closed({ ok: { type: 'string' } }), 'x/y': closed({}) });
      expectStatus(await admin.post('/types', { name: 'acme.closed', schema }), 201);
      const res = await admin.post('/items', { type: 'acme.closed', properties: { a: { ok: 'x', b: 1 }, 'x/y': { 'p~q': 1 }, c: 1 } });
      const error = expectError(res, 400, 'invalid_properties');
      expect(error.details!.fields.map((f: any) => f.field).sort()).toEqual(['properties.a.b', 'properties.c', 'properties.x/y.p~q']);
    });

    it('core types allow other properties', async () => {
      const item = await createItem(admin, { type: 'core.note', properties: { title: 't', extra: { any: [1, 2] } } });
      expect(item.properties).toEqual({ title: 't', extra: { any: [1, 2] } });
    });

    it('null where a value is required → 400 validation_error, never a 500', async () => {
      for (const field of ['properties', 'tags', 'tier', 'state', 'timestamp', 'extensions', 'source_id']) {
        const res = await admin.post('/items', { type: 'core.note', properties: { title: 'n' }, [field]: null });
        expectError(res, 400, 'validation_error');
      }
      const created = await admin.post('/items', { type: 'core.note', properties: { title: 'n' } });
      for (const field of ['properties', 'tags', 'tier', 'state', 'timestamp', 'extensions']) {
        expectError(await admin.patch(`/items/${created.body.id}`, { version: 1, [field]: null }), 400, 'validation_error');
      }
    });

    it('a tag sent more than once is kept once, where it first appears, wherever tags are written', async () => {
      const item = await createItem(admin, note('tags', { tags: ['a', 'b', 'a', 'c', 'b'], source_id: 'dup-tags' }));
      expect(item.tags).toEqual(['a', 'b', 'c']);
      const upserted = await admin.post('/items', note('tags', { tags: ['d', 'd'], source_id: 'dup-tags' }));
      expectStatus(upserted, 200);
      expect(upserted.body.tags).toEqual(['d']);
      const patched = await admin.patch(`/items/${item.id}`, { version: upserted.body.version, tags: ['x', 'y', 'x'] });
      expectStatus(patched, 200);
      expect(patched.body.tags).toEqual(['x', 'y']);
      const replaced = await admin.patch(`/items/${item.id}/metadata`, { tags: ['m', 'm'] });
      expectStatus(replaced, 200);
      expect(replaced.body.tags).toEqual(['m']);
      const added = await admin.patch(`/items/${item.id}/metadata`, { add_tags: ['n', 'm', 'n'] });
      expect(added.body.tags).toEqual(['m', 'n']);
      const bulk = await admin.post('/items/bulk', { mode: 'upsert', items: [note('bulk tags', { tags: ['p', 'p', 'q'] })] });
      expect((await admin.get(`/items/${bulk.body.results[0].id}`)).body.tags).toEqual(['p', 'q']);
      // What is stored is what is read: a list filter by the tag finds the item once.
      expect((await admin.get('/items', { tags: 'm' })).body.items.map((i: { id: string }) => i.id)).toEqual([item.id]);
      expect((await t.sql(`SELECT tags FROM items WHERE id = $1`, [item.id]))[0]).toEqual({ tags: ['m', 'n'] });
    });

    it('the OpenAPI document lists 404 for POST /items: edges name edge types and items that may not exist', async () => {
      const doc = (await t.http.get('/openapi.json').expect(200)).body;
      expect(Object.keys(doc.paths['/items'].post.responses)).toContain('404');
      expectError(await admin.post('/items', note('edge to nowhere', { edges: { 'acme.nowhere': [randomUUID()] } })), 404, 'edge_type_not_found');
    });

    it('an unknown type → 400 invalid_type', async () => {
      expectError(await admin.post('/items', { type: 'acme.unknown', properties: {} }), 400, 'invalid_type');
      expectError(await admin.post('/items', { type: 'core.nope', properties: {} }), 400, 'invalid_type');
    });

    it('starting trashed or revoked → 400 invalid_transition', async () => {
      expectError(await admin.post('/items', note('t', { state: 'trashed' })), 400, 'invalid_transition');
      expectError(await admin.post('/items', note('r', { state: 'revoked' })), 400, 'invalid_transition');
      expectError(await admin.post('/items', note('r', { state: 'trashed', source_id: 'never-created' })), 400, 'invalid_transition');
      expect((await t.sql(`SELECT count(*)::int AS n FROM items WHERE source_id = 'never-created'`))[0]).toEqual({ n: 0 });
    });

    it.each<[string, Record<string, unknown>]>([
      ['missing type', { properties: {} }],
      ['properties not an object', { type: 'core.note', properties: 'x' }],
      ['bad tier', note('x', { tier: 'gold' })],
      ['bad state', note('x', { state: 'deleted' })],
      ['tags not strings', note('x', { tags: [1] })],
      ['tag with a comma', note('x', { tags: ['a,b'] })],
      ['bad timestamp', note('x', { timestamp: 'yesterday' })],
      ['latitude out of range', note('x', { capture_latitude: 91 })],
      ['extension namespace not an object', note('x', { extensions: { acme: 5 } })],
      ['unknown field', note('x', { colour: 'red' })],
    ])('%s → 400 validation_error', async (_, body) => {
      expectError(await admin.post('/items', body), 400, 'validation_error');
    });
  });

  describe('ids', () => {
    it('a malformed id → 400 invalid_id on every item route', async () => {
      for (const res of [
        await admin.get('/items/not-an-id'),
        await admin.patch('/items/not-an-id', { version: 1, tags: [] }),
        await admin.delete('/items/123'),
        await admin.get('/items/xyz/versions'),
        await admin.get('/items/xyz/metadata'),
        await admin.patch('/items/xyz/metadata', { tags: [] }),
      ]) {
        expectError(res, 400, 'invalid_id');
      }
    });

    it('an unknown id → 404 item_not_found', async () => {
      const id = randomUUID();
      expectError(await admin.get(`/items/${id}`), 404, 'item_not_found');
      expectError(await admin.patch(`/items/${id}`, { version: 1, tags: [] }), 404, 'item_not_found');
      expectError(await admin.delete(`/items/${id}`), 404, 'item_not_found');
      expectError(await admin.get(`/items/${id}/versions`), 404, 'item_not_found');
      expectError(await admin.get(`/items/${id}/metadata`), 404, 'item_not_found');
    });

    it('ids are accepted case-insensitively', async () => {
      const item = await createItem(admin, note('upper'));
      expectStatus(await admin.get(`/items/${item.id.toUpperCase()}`), 200);
    });
  });

  it('keeps timestamps to the millisecond, and since/until compare at that precision', async () => {
    const at = '1999-03-03T03:03:03.123456789Z';
    const item = await createItem(admin, { type: 'core.task', properties: { title: 'precise' }, timestamp: at });
    expect(item.timestamp).toBe('1999-03-03T03:03:03.123Z');
    const found = async (q: Record<string, string>) => (await admin.get('/items', { type: 'core.task', ...q })).body.items.map((i: { id: string }) => i.id);
    expect(await found({ since: '1999-03-03T03:03:03.123456Z', until: '2000-01-01T00:00:00Z' })).toEqual([item.id]);
    expect(await found({ since: '1999-01-01T00:00:00Z', until: '1999-03-03T03:03:03.123456Z' })).toEqual([]);
  });

  it('cuts digits past the millisecond (never rounds them) wherever a timestamp is written or compared; years 0001-9999 apply to the cut instant', async () => {
    const last = await createItem(admin, { type: 'core.note', properties: { title: 'last instant' }, timestamp: '9999-12-31T23:59:59.9999999Z', tags: ['cut'] });
    expect(last.timestamp).toBe('9999-12-31T23:59:59.999Z');
    expect((await admin.get(`/items/${last.id}`)).body.timestamp).toBe('9999-12-31T23:59:59.999Z');
    const item = await createItem(admin, { type: 'core.note', properties: { title: 'cut' }, timestamp: '2001-02-03T04:05:06.1239999Z', source_id: 'cut-1', tags: ['cut'] });
    expect(item.timestamp).toBe('2001-02-03T04:05:06.123Z');
    const upserted = await admin.post('/items', { type: 'core.note', properties: { title: 'cut' }, timestamp: '2001-02-03T04:05:06.4569999Z', source_id: 'cut-1', tags: ['cut'] });
    expectStatus(upserted, 200);
    expect(upserted.body.timestamp).toBe('2001-02-03T04:05:06.456Z');
    const patched = await admin.patch(`/items/${item.id}`, { version: upserted.body.version, timestamp: '2001-02-03T04:05:06.7899999+00:00' });
    expectStatus(patched, 200);
    expect(patched.body.timestamp).toBe('2001-02-03T04:05:06.789Z');
    const bulk = await admin.post('/items/bulk', { mode: 'upsert', items: [{ type: 'core.note', properties: { title: 'bulk cut' }, timestamp: '2001-02-03T04:05:06.9999999Z', tags: ['cut'] }] });
    expect((await admin.get(`/items/${bulk.body.results[0].id}`)).body.timestamp).toBe('2001-02-03T04:05:06.999Z');

    const found = async (q: Record<string, string>) => (await admin.get('/items', { tags: 'cut', ...q })).body.items.map((i: { id: string }) => i.id);
    expect(await found({ since: '2001-02-03T04:05:06.7899999Z', until: '2001-02-03T04:05:06.9989999Z' })).toEqual([item.id]);
    expect(await found({ since: '2001-02-03T04:05:06.9999999Z', until: '9999-12-31T23:59:59.9999999Z' })).toEqual([bulk.body.results[0].id]);

    const action = await admin.post('/items/bulk_action', { action: 'update_timestamp', filter: { tags: ['cut'], until: '3000-01-01T00:00:00Z' }, timestamp: '2002-01-01T00:00:00.0009999Z' });
    expectStatus(action, 200);
    expect((await admin.get(`/items/${item.id}`)).body.timestamp).toBe('2002-01-01T00:00:00.000Z');

    // Cut, then taken to UTC, these fall in years 10000 and 0.
    for (const timestamp of ['9999-12-31T23:59:59.9999999-00:01', '0001-01-01T00:00:00.9999999+00:01']) {
      const res = await admin.post('/items', note('out of range', { timestamp }));
      expectError(res, 400, 'validation_error');
      expect(res.body.error.details.fields.map((f: { field: string }) => f.field)).toEqual(['timestamp']);
    }
    const list = await admin.get('/items', { until: '9999-12-31T23:59:59.9999999-00:01' });
    expectError(list, 400, 'validation_error');
    expect(list.body.error.details.fields.map((f: { field: string }) => f.field)).toEqual(['until']);
  });

  describe('natural key (source, source_id)', () => {
    it('POST with an existing source_id → 200, same id, version + 1, properties replaced', async () => {
      const first = await admin.post('/items', { type: 'core.note', source_id: 'nk-1', properties: { title: 'one', body: 'first body' }, tags: ['x'] });
      expectStatus(first, 201);
      const second = await admin.post('/items', { type: 'core.note', source_id: 'nk-1', properties: { title: 'two' } });
      expectStatus(second, 200);
      expect(second.body.id).toBe(first.body.id);
      expect(second.body.version).toBe(2);
      expect(second.body.properties).toEqual({ title: 'two' });
      expect(second.body.tags).toEqual(['x']); // not sent: kept
      expect(second.body.created_at).toBe(first.body.created_at);
      const rows = await t.sql(`SELECT count(*)::int AS n FROM items WHERE source_id = 'nk-1'`);
      expect(rows[0]).toEqual({ n: 1 });
    });

    it('an identical re-post → 200 without a version bump or a new revision', async () => {
      const body = { type: 'core.note', source_id: 'nk-same', properties: { title: 'same' }, tags: ['a'], device: 'd' };
      const first = await admin.post('/items', body);
      expectStatus(first, 201);
      const again = await admin.post('/items', body);
      expectStatus(again, 200);
      expect(again.body.id).toBe(first.body.id);
      expect(again.body.version).toBe(1);
      expect(again.body.updated_at).toBe(first.body.updated_at);
      expect((await admin.get(`/items/${first.body.id}/versions`)).body.versions).toHaveLength(1);
    });

    it('a re-post without properties keeps them and changes only the given fields', async () => {
      const first = await admin.post('/items', { type: 'core.bookmark', source_id: 'nk-keep', properties: { url: 'https://example.com/k' } });
      expectStatus(first, 201);
      const again = await admin.post('/items', { type: 'core.bookmark', source_id: 'nk-keep', tags: ['later'] });
      expectStatus(again, 200);
      expect(again.body).toMatchObject({ id: first.body.id, version: 2, properties: { url: 'https://example.com/k' }, tags: ['later'] });
    });

    it('the same source_id from a different key (another source) creates a separate item', async () => {
      const other = api(t, (await createKey(t, adminKey, { role: 'admin', source: 'second.source' })).key);
      const mine = await admin.post('/items', { ...note('mine'), source_id: 'shared-id' });
      const theirs = await other.post('/items', { ...note('theirs'), source_id: 'shared-id' });
      expectStatus(mine, 201);
      expectStatus(theirs, 201);
      expect(theirs.body.id).not.toBe(mine.body.id);
      expect(theirs.body.source).toBe('second.source');
      expect((await admin.get(`/items/${mine.body.id}`)).body.properties.title).toBe('mine');
    });

    it('a natural key held by an item of another type → 400 naming type (never 409), item untouched', async () => {
      const first = await createItem(admin, { ...note('typed'), source_id: 'nk-typed' });
      const res = await admin.post('/items', { type: 'core.bookmark', source_id: 'nk-typed', properties: { url: 'https://x.test' } });
      expectError(res, 400, 'validation_error');
      expect(res.body.error.details.fields.map((f: { field: string }) => f.field)).toEqual(['type']);
      expect((await admin.get(`/items/${first.id}`)).body).toMatchObject({ type: 'core.note', version: 1 });
    });

    it('a natural key held by an item the caller may not read: taken, but neither its id nor its type is named', async () => {
      // A source shared by credentials that read different types: here a revoked key's source, taken up by a narrower key.
      const wide = await createKey(t, adminKey, { role: 'member', source: 'handed.on', type_permissions: { 'core.bookmark': 'write' } });
      const hidden = await createItem(api(t, wide.key), { type: 'core.bookmark', source_id: 'nk-hidden', properties: { url: 'https://x.test/h' } });
      expectStatus(await admin.delete(`/keys/${wide.id}`), 200);
      const narrow = api(t, (await createKey(t, adminKey, { role: 'member', source: 'handed.on', type_permissions: { 'core.note': 'write' } })).key);

      const upsert = await narrow.post('/items', { ...note('mine'), source_id: 'nk-hidden' });
      expectError(upsert, 400, 'validation_error');
      expect(upsert.body.error.details.fields.map((f: { field: string }) => f.field)).toEqual(['type']);
      const bulk = await narrow.post('/items/bulk', { mode: 'create_only', items: [{ ...note('mine'), source_id: 'nk-hidden' }] });
      expectStatus(bulk, 200);
      expect(bulk.body.results[0]).toMatchObject({ status: 'error', error: { code: 'duplicate_source' } });
      for (const text of [JSON.stringify(upsert.body), JSON.stringify(bulk.body)]) {
        expect(text).not.toContain(hidden.id);
        expect(text).not.toContain('core.bookmark');
      }
      expect((await admin.get(`/items/${hidden.id}`)).body).toMatchObject({ type: 'core.bookmark', version: 1 });
    });

    it('a re-post clears device and capture coordinates sent as null, and keeps them when absent, as PATCH does', async () => {
      const located = { device: 'phone-2', capture_latitude: 48.85, capture_longitude: 2.35 };
      const first = await createItem(admin, note('located', { source_id: 'nk-nulls', ...located }));
      const kept = await admin.post('/items', note('located again', { source_id: 'nk-nulls' }));
      expectStatus(kept, 200);
      expect(kept.body).toMatchObject(located);
      const cleared = await admin.post('/items', note('located again', { source_id: 'nk-nulls', device: null, capture_latitude: null, capture_longitude: null }));
      expectStatus(cleared, 200);
      expect(cleared.body).toMatchObject({ id: first.id, version: 3, device: null, capture_latitude: null, capture_longitude: null });
      expect((await admin.get(`/items/${first.id}`)).body).toMatchObject({ device: null, capture_latitude: null, capture_longitude: null });
    });

    it('a re-post may move the state along an allowed edge only', async () => {
      const first = await createItem(admin, { ...note('moving'), source_id: 'nk-state' });
      const archived = await admin.post('/items', { ...note('moving'), source_id: 'nk-state', state: 'archived' });
      expectStatus(archived, 200);
      expect(archived.body.state).toBe('archived');
      await admin.delete(`/items/${first.id}`);
      expectError(await admin.post('/items', { ...note('moving'), source_id: 'nk-state', state: 'archived' }), 400, 'invalid_transition');
    });

    it('concurrent identical POSTs of one natural key → one row; one 201, the rest 200', async () => {
      const body = { ...note('race'), source_id: 'nk-race' };
      const results = await Promise.all(Array.from({ length: 5 }, () => admin.post('/items', body)));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 200, 200, 200, 201]);
      expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
      const rows = await t.sql(`SELECT count(*)::int AS n FROM items WHERE source_id = 'nk-race'`);
      expect(rows[0]).toEqual({ n: 1 });
      expect((await admin.get(`/items/${results[0].body.id}`)).body.version).toBe(1);
    });

    it('concurrent differing POSTs of one natural key → one row, every write recorded as a version', async () => {
      const results = await Promise.all(
        Array.from({ length: 5 }, (_, i) => admin.post('/items', { type: 'core.note', source_id: 'nk-race-2', properties: { title: `v${i}` } })),
      );
      expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 201]);
      expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
      expect((await t.sql(`SELECT count(*)::int AS n FROM items WHERE source_id = 'nk-race-2'`))[0]).toEqual({ n: 1 });
      const final = await admin.get(`/items/${results[0].body.id}`);
      expect(final.body.version).toBe(5);
      expect(results.map((r) => r.body.version).sort()).toEqual([1, 2, 3, 4, 5]);
      const versions = await admin.get(`/items/${results[0].body.id}/versions`);
      expect(versions.body.versions.map((v: any) => v.version)).toEqual([5, 4, 3, 2, 1]);
    });
  });

  describe('POST /items/bulk', () => {
    it('create_only: a taken natural key is a per-item duplicate_source; the others are created', async () => {
      const existing = await createItem(admin, { ...note('taken'), source_id: 'bulk-taken' });
      const res = await admin.post('/items/bulk', {
        mode: 'create_only',
        items: [
          { ...note('b1'), source_id: 'bulk-1' },
          { ...note('dup'), source_id: 'bulk-taken' },
          note('b3'),
        ],
      });
      expectStatus(res, 200);
      const [r0, r1, r2] = res.body.results;
      expect(res.body.results).toHaveLength(3);
      expect(r0).toMatchObject({ index: 0, status: 'created', id: expect.any(String) });
      expect(r1).toMatchObject({ index: 1, status: 'error', error: { code: 'duplicate_source', message: expect.any(String) } });
      expect(r2).toMatchObject({ index: 2, status: 'created', id: expect.any(String) });
      expect((await admin.get(`/items/${existing.id}`)).body).toMatchObject({ version: 1, properties: { title: 'taken' } });
      expect((await admin.get(`/items/${r0.id}`)).body.properties.title).toBe('b1');
      expect((await admin.get(`/items/${r2.id}`)).body.properties.title).toBe('b3');
    });

    it('upsert: a taken natural key is updated', async () => {
      const existing = await createItem(admin, { ...note('old'), source_id: 'bulk-up' });
      const res = await admin.post('/items/bulk', {
        mode: 'upsert',
        items: [{ ...note('new'), source_id: 'bulk-up' }, { ...note('fresh'), source_id: 'bulk-up-2' }],
      });
      expectStatus(res, 200);
      expect(res.body.results).toEqual([
        { index: 0, status: 'updated', id: existing.id },
        { index: 1, status: 'created', id: expect.any(String) },
      ]);
      expect((await admin.get(`/items/${existing.id}`)).body).toMatchObject({ version: 2, properties: { title: 'new' } });
    });

    it('per-item errors (shape, type, properties, state) do not sink the batch, wherever they are', async () => {
      const res = await admin.post('/items/bulk', {
        mode: 'upsert',
        items: [
          { type: 'core.note', properties: 'not an object' },
          note('ok-1', { source_id: 'bulk-mixed-1' }),
          { type: 'acme.nope', properties: {} },
          { type: 'core.bookmark', properties: {} },
          { type: 'core.task', properties: { title: 1 } },
          note('bad state', { state: 'revoked' }),
          'not an object',
          note('ok-2', { source_id: 'bulk-mixed-2' }),
          { ...note('x'), unknown_field: 1 },
        ],
      });
      expectStatus(res, 200);
      const codes = res.body.results.map((r: any) => (r.status === 'error' ? r.error.code : r.status));
      expect(codes).toEqual([
        'validation_error',
        'created',
        'invalid_type',
        'missing_required_field',
        'invalid_properties',
        'invalid_transition',
        'validation_error',
        'created',
        'validation_error',
      ]);
      expect(res.body.results.map((r: any) => r.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
      // Worded as POST /items words its body's errors.
      const single = expectError(await admin.post('/items', { ...note('x'), unknown_field: 1 }), 400, 'validation_error');
      expect(res.body.results[8].error.details.fields).toEqual([{ field: 'unknown_field', message: 'is not a known field' }]);
      expect(res.body.results[8].error.details.fields).toEqual(single.details!.fields);
      for (const i of [1, 7]) expectStatus(await admin.get(`/items/${res.body.results[i].id}`), 200);
      const rows = await t.sql(`SELECT count(*)::int AS n FROM items WHERE source_id IN ('bulk-mixed-1', 'bulk-mixed-2')`);
      expect(rows[0]).toEqual({ n: 2 });
    });

    it('the same natural key twice in one batch: created, then updated', async () => {
      const res = await admin.post('/items/bulk', {
        mode: 'upsert',
        items: [note('first', { source_id: 'bulk-twice' }), note('second', { source_id: 'bulk-twice' })],
      });
      expectStatus(res, 200);
      expect(res.body.results.map((r: any) => r.status)).toEqual(['created', 'updated']);
      expect(res.body.results[0].id).toBe(res.body.results[1].id);
      const dup = await admin.post('/items/bulk', {
        mode: 'create_only',
        items: [note('first', { source_id: 'bulk-twice-c' }), note('second', { source_id: 'bulk-twice-c' })],
      });
      expect(dup.body.results.map((r: any) => r.status === 'error' ? r.error.code : r.status)).toEqual(['created', 'duplicate_source']);
    });

    it('an item created and updated in one write: updated_at and the revisions never go back before created_at', async () => {
      // The natural keys before it put the item's insert well after the transaction began.
      const before = Array.from({ length: 30 }, (_, i) => note(`early ${i}`, { source_id: `clock-a-${String(i).padStart(2, '0')}` }));
      const res = await admin.post('/items/bulk', { mode: 'upsert', items: [...before, note('first', { source_id: 'clock-z' }), note('second', { source_id: 'clock-z' })] });
      expectStatus(res, 200);
      expect(res.body.results.slice(-2).map((r: any) => r.status)).toEqual(['created', 'updated']);
      const item = (await admin.get(`/items/${res.body.results[31].id}`)).body;
      expect(item.version).toBe(2);
      expect(Date.parse(item.updated_at)).toBeGreaterThanOrEqual(Date.parse(item.created_at));
      const [v2, v1] = (await admin.get(`/items/${item.id}/versions`)).body.versions;
      expect(Date.parse(v2.created_at)).toBeGreaterThanOrEqual(Date.parse(v1.created_at));
    });

    it('more than 1000 items, a bad mode or no items array → 400 validation_error', async () => {
      const items = Array.from({ length: 1001 }, (_, i) => note(`n${i}`));
      expectError(await admin.post('/items/bulk', { mode: 'upsert', items }), 400, 'validation_error');
      expectError(await admin.post('/items/bulk', { mode: 'merge', items: [note('x')] }), 400, 'validation_error');
      expectError(await admin.post('/items/bulk', { mode: 'upsert' }), 400, 'validation_error');
      expectError(await admin.post('/items/bulk', { items: [note('x')] }), 400, 'validation_error');
    });

    it('refuses an items array of a whole body\'s worth of elements as it refuses 1001, naming the field', async () => {
      // ~900 KB of `{}` or of numbers: refused before anything is built from the elements.
      for (const element of [{}, 1]) {
        const res = await admin.post('/items/bulk', { mode: 'upsert', items: Array.from({ length: 300_000 }, () => element) });
        expect(expectError(res, 400, 'validation_error').details?.fields).toEqual([{ field: 'items', message: 'must be an array of at most 1000 item bodies' }]);
      }
      const bad = await admin.post('/items/bulk', { mode: 'merge', items: Array.from({ length: 300_000 }, () => ({})) });
      expect(expectError(bad, 400, 'validation_error').details?.fields.map((f: { field: string }) => f.field)).toEqual(['mode', 'items']);
    });

    it('refuses a tag list of more than 100 tags as sent, even when fewer remain once each is kept once', async () => {
      const tags = Array.from({ length: 100 }, (_, i) => `t${i}`);
      const rule =
        'must be an array of at most 100 tags, each 1-100 characters without commas or surrounding spaces, control characters, line separators or bidirectional overrides, nor only invisible characters';
      for (const sent of [[...tags, 't0'], Array.from({ length: 200_000 }, () => 'x')]) {
        const res = await admin.post('/items', note('many tags', { tags: sent }));
        expect(expectError(res, 400, 'validation_error').details?.fields).toEqual([{ field: 'tags', message: rule }]);
      }
      expectStatus(await admin.post('/items', note('a hundred tags', { tags: [...tags.slice(0, 99), 't0'] })), 201);
    });

    it('refuses a tag that does not read as itself: a control character, a line separator, a bidirectional override, or only invisible characters', async () => {
      for (const tag of ['a\u0001b', 'a\u0085', 'a\u2028b', '\u202eab', '\u200b', '\u3164']) {
        expect([tag, expectError(await admin.post('/items', note('odd tag', { tags: [tag] })), 400, 'validation_error').details?.fields.map((f: { field: string }) => f.field)]).toEqual([tag, ['tags']]);
      }
      expectStatus(await admin.post('/items', note('fine tags', { tags: ['日本語', 'café', '📝 notes', 'a\u200db'] })), 201);
      // One stored before the rule can still be named to take it off.
      const item = await createItem(admin, note('old tag'));
      await t.sql(`UPDATE items SET tags = ARRAY['\u200b'] WHERE id = $1`, [item.id]);
      const removed = await admin.patch(`/items/${item.id}/metadata`, { remove_tags: ['\u200b'] });
      expectStatus(removed, 200);
      expect(removed.body.tags).toEqual([]);
    });

    it('exactly 1000 items are accepted', async () => {
      const items = Array.from({ length: 1000 }, (_, i) => note(`k${i}`, { source_id: `bulk-k-${i}` }));
      const res = await admin.post('/items/bulk', { mode: 'create_only', items });
      expectStatus(res, 200);
      expect(res.body.results).toHaveLength(1000);
      expect(res.body.results.every((r: any) => r.status === 'created')).toBe(true);
    });
  });

  describe('DELETE /items/{id}', () => {
    it('→ 200 with the item trashed; repeating it is harmless', async () => {
      const item = await createItem(admin, note('bin me'));
      const res = await admin.delete(`/items/${item.id}`);
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ id: item.id, state: 'trashed', version: 2 });
      const again = await admin.delete(`/items/${item.id}`);
      expectStatus(again, 200);
      expect(again.body).toMatchObject({ state: 'trashed', version: 2 });
      expect((await admin.get(`/items/${item.id}`)).body.state).toBe('trashed');
    });
  });
});
