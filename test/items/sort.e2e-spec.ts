/**
 * GET /items?sort= (created_at, updated_at, timestamp; ascending or `-` descending, ties by id;
 * property orders are sort-property.e2e-spec.ts)
 * and the updated_since/updated_until window: every order page by page (no repeat, no gap, ties
 * across page ends), the default as it was, cursors bound to the order that issued them,
 * instants finer than a millisecond, the window and property-scan paths under each order, the
 * window on GET /search and bulk actions (direct and as a job), and other tenants' items kept out.
 */
import type { Response } from 'supertest';
import { PROPERTY_SCAN_ITEMS } from '../../src/items/item-filter';
import { SORTS } from '../../src/items/listing-order';
import { bootstrapAdmin, createTenant, startApp, TestApp } from '../support/app';
import { waitFor } from '../support/wait';
import { Api, api, createItem, expectError, expectStatus, ids, listed, pages, Query } from './helpers';

type Listed = { id: string; created_at: string; updated_at: string; timestamp: string; properties: Record<string, unknown> };

/** The order `sort` gives `items`, from their JSON: their instants are whole milliseconds, and ids compare as PostgreSQL's uuids do. */
function sorted(items: Listed[], sort: string): string[] {
  const descending = sort.startsWith('-');
  const key = (descending ? sort.slice(1) : sort) as 'created_at' | 'updated_at' | 'timestamp';
  const ascending = [...items].sort((a, b) => (a[key] === b[key] ? (a.id < b.id ? -1 : 1) : a[key] < b[key] ? -1 : 1));
  return ids(descending ? ascending.reverse() : ascending);
}

/** The field a 400 validation_error names (its only one). */
const fieldOf = (res: Response) => expectError(res, 400, 'validation_error').details!.fields.map((f: { field: string }) => f.field);

describe('items: sort and updated_since/updated_until', () => {
  let t: TestApp;
  let rootKey: string;
  let seq = 0;
  const fresh = async () => {
    const { key, tenantId } = await createTenant(t, rootKey, `sort-${seq++}`);
    return { c: api(t, key), tenantId };
  };

  beforeAll(async () => {
    t = await startApp();
    rootKey = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t?.close());

  describe('a tenant whose items are created, stamped and changed in three different orders', () => {
    let c: Api;
    let other: Api;
    let made: Record<string, Listed>;
    let all: Listed[];
    const everything = async (cc: Api) => (await cc.get('/items', { limit: 100 })).body.items as Listed[];

    beforeAll(async () => {
      ({ c } = await fresh());
      ({ c: other } = await fresh());
      // Created n0..n6; stamped 2019..2023 in another order, three on one instant (ties across a page end).
      const stamps = ['2021-03-01', '2020-01-01', '2022-05-01', '2020-01-01', '2023-01-01', '2019-01-01', '2020-01-01'];
      made = {};
      for (const [n, day] of stamps.entries()) {
        const tags = [1, 4, 5].includes(n) ? ['grp'] : [];
        made[`n${n}`] = (await createItem(c, { type: 'core.note', properties: { title: `sortable n${n}`, kind: n % 2 ? 'odd' : 'even' }, timestamp: `${day}T00:00:00.000Z`, tags })) as Listed;
        // Another tenant's items, alike and interleaved: never listed here.
        await createItem(other, { type: 'core.note', properties: { title: `sortable other ${n}`, kind: 'even' }, timestamp: `${day}T00:00:00.000Z`, tags });
      }
      // Changed in yet another order: n3, n0, then n1, n4 and n5 by one bulk action (one updated_at), then n2; n6 never.
      for (const n of ['n3', 'n0']) expectStatus(await c.patch(`/items/${made[n].id}`, { version: 1, properties: { body: 'changed' } }), 200);
      expectStatus(await other.post('/items/bulk_action', { action: 'update_tags', add_tags: ['bumped'], filter: { tags: ['grp'] } }), 200);
      expectStatus(await c.post('/items/bulk_action', { action: 'update_tags', add_tags: ['bumped'], filter: { tags: ['grp'] } }), 200);
      expectStatus(await c.patch(`/items/${made.n2.id}`, { version: 1, properties: { body: 'changed' } }), 200);
      all = await everything(c);
      expect(all).toHaveLength(7);
    });

    it('each order, both ways, page by page over ties, without a repeat or a gap', async () => {
      const bumped = all.filter((i) => [made.n1.id, made.n4.id, made.n5.id].includes(i.id));
      expect(new Set(bumped.map((i) => i.updated_at)).size).toBe(1);
      // The three keys order the items three ways, each both ways: six orders.
      expect(new Set(SORTS.map((sort) => sorted(all, sort).join())).size).toBe(6);
      for (const sort of SORTS) {
        for (const limit of [2, 3]) expect([sort, limit, await listed(c, { sort }, limit)]).toEqual([sort, limit, sorted(all, sort)]);
      }
    });

    it('the default is -created_at, as before: same pages, and its cursors and -created_at\'s are one kind', async () => {
      expect(await listed(c, {})).toEqual(sorted(all, '-created_at'));
      const first = await c.get('/items', { limit: 2 });
      const explicit = await c.get('/items', { limit: 2, sort: '-created_at' });
      expect(explicit.body).toEqual(first.body);
      const next = await c.get('/items', { limit: 2, sort: '-created_at', cursor: first.body.next_cursor });
      expect(ids(next.body.items)).toEqual(sorted(all, '-created_at').slice(2, 4));
      // A cursor of before cursors named their list pages the default still.
      const [createdAt, id] = JSON.parse(Buffer.from(first.body.next_cursor, 'base64url').toString()) as string[];
      const unnamed = Buffer.from(JSON.stringify([createdAt, id])).toString('base64url');
      expect(ids((await c.get('/items', { limit: 2, cursor: unnamed })).body.items)).toEqual(ids(next.body.items));
    });

    it('a cursor pages only the order that issued it: any other is 400 validation_error naming cursor', async () => {
      const cursors = new Map<string, string>();
      for (const sort of SORTS) cursors.set(sort, (await c.get('/items', { sort, limit: 2 })).body.next_cursor);
      for (const [issuedBy, cursor] of cursors) {
        for (const sort of [...SORTS, undefined]) {
          const res = await c.get('/items', { sort, limit: 2, cursor });
          if (sort === issuedBy || (sort === undefined && issuedBy === '-created_at')) expectStatus(res, 200);
          else expect([issuedBy, sort, fieldOf(res)]).toEqual([issuedBy, sort, ['cursor']]);
        }
      }
    });

    it('an unknown sort, or sort given twice, is 400 validation_error naming sort', async () => {
      for (const sort of SORTS) expectStatus(await c.get('/items', { sort }), 200);
      for (const sort of ['name', 'updated', '+created_at', '--created_at', 'created_at,id', '-', '', 'CREATED_AT']) {
        expect([sort, fieldOf(await c.get('/items', { sort }))]).toEqual([sort, ['sort']]);
      }
      expect(fieldOf(await c.get('/items?sort=created_at&sort=updated_at'))).toEqual(['sort']);
    });

    it('updated_since (inclusive) and updated_until (exclusive) select by last change, under every order', async () => {
      const at = all.find((i) => i.id === made.n0.id)!.updated_at;
      const since = all.filter((i) => i.updated_at >= at);
      const until = all.filter((i) => i.updated_at < at);
      expect(ids(since)).toContain(made.n0.id);
      expect(since.length * until.length).toBeGreaterThan(0);
      for (const sort of SORTS) {
        expect([sort, await listed(c, { sort, updated_since: at })]).toEqual([sort, sorted(since, sort)]);
        expect([sort, await listed(c, { sort, updated_until: at })]).toEqual([sort, sorted(until, sort)]);
      }
      const last = all.find((i) => i.id === made.n2.id)!.updated_at;
      expect(await listed(c, { sort: 'updated_at', updated_since: at, updated_until: last })).toEqual(sorted(since.filter((i) => i.updated_at < last), 'updated_at'));
      for (const [name, value] of [['updated_since', 'yesterday'], ['updated_until', '2021-13-01T00:00:00Z'], ['updated_since', '0000-01-01T00:00:00Z']]) {
        expect([name, fieldOf(await c.get('/items', { [name]: value }))]).toEqual([name, [name]]);
      }
    });

    it('combine with since/until and with property clauses under every order', async () => {
      const at = all.find((i) => i.id === made.n3.id)!.updated_at;
      const window = all.filter((i) => i.timestamp >= '2020-01-01T00:00:00.000Z' && i.timestamp < '2022-01-01T00:00:00.000Z');
      const even = all.filter((i) => i.properties.kind === 'even');
      for (const sort of SORTS) {
        expect([sort, await listed(c, { sort, since: '2020-01-01T00:00:00Z', until: '2022-01-01T00:00:00Z' })]).toEqual([sort, sorted(window, sort)]);
        expect([sort, await listed(c, { sort, since: '2020-01-01T00:00:00Z', updated_since: at })]).toEqual([
          sort,
          sorted(all.filter((i) => i.timestamp >= '2020-01-01T00:00:00.000Z' && i.updated_at >= at), sort),
        ]);
        expect([sort, await listed(c, { sort, property: 'kind=even' })]).toEqual([sort, sorted(even, sort)]);
        expect([sort, await listed(c, { sort, property: 'kind=even', updated_since: at })]).toEqual([sort, sorted(even.filter((i) => i.updated_at >= at), sort)]);
      }
    });

    it('what changes updated_at: a change, a metadata patch; not an edge, nor a write that changes nothing', async () => {
      const before = await everything(c);
      const n6 = before.find((i) => i.id === made.n6.id)!;
      const n5 = before.find((i) => i.id === made.n5.id)!;
      const mark = [...before].sort((a, b) => (a.updated_at < b.updated_at ? 1 : -1))[0].updated_at;
      expectStatus(await c.post('/edge-types', { name: 'acme.sorted_near', source_types: ['*'], target_types: ['*'] }), 201);
      expectStatus(await c.post('/edges', { type: 'acme.sorted_near', source_id: made.n6.id, target_id: made.n5.id }), 201);
      expectStatus(await c.patch(`/items/${made.n6.id}`, { version: 1, properties: {} }), 200);
      const patched = await c.patch(`/items/${made.n5.id}/metadata`, { add_tags: ['late'] });
      expectStatus(patched, 200);
      const after = await everything(c);
      expect(after.find((i) => i.id === made.n6.id)!.updated_at).toBe(n6.updated_at);
      expect(after.find((i) => i.id === made.n5.id)!.updated_at > n5.updated_at).toBe(true);
      expect(await listed(c, { sort: '-updated_at', updated_since: mark })).toEqual(sorted(after.filter((i) => i.updated_at >= mark), '-updated_at'));
      expect(await listed(c, { updated_since: after.find((i) => i.id === made.n5.id)!.updated_at })).toEqual([made.n5.id]);
      all = after;
    });

    it('GET /search takes updated_since/updated_until as a filter, and refuses sort (search goes by relevance)', async () => {
      const at = all.find((i) => i.id === made.n0.id)!.updated_at;
      const found = async (query: Query) => {
        const res = await c.get('/search', { q: 'sortable', limit: 100, ...query });
        expectStatus(res, 200);
        return res.body.results.map((r: { item: { id: string } }) => r.item.id).sort();
      };
      expect(await found({})).toEqual(ids(all).sort());
      expect(await found({ updated_since: at })).toEqual(ids(all.filter((i) => i.updated_at >= at)).sort());
      expect(await found({ updated_until: at })).toEqual(ids(all.filter((i) => i.updated_at < at)).sort());
      expect(fieldOf(await c.get('/search', { q: 'sortable', sort: 'updated_at' }))).toEqual(['sort']);
      expect(fieldOf(await c.get('/search', { q: 'sortable', updated_since: 'soon' }))).toEqual(['updated_since']);
    });
  });

  it('instants finer than a millisecond (rows written before writes were cut to one) page without a gap', async () => {
    const { c, tenantId } = await fresh();
    // Eight items in one millisecond of updated_at and one of timestamp, microseconds apart, in another order than their ids.
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'core.note', jsonb_build_object('title', 'fine ' || n), 'active', 's',
              '2024-05-05T05:05:05.123Z'::timestamptz + ((n * 3) % 8) * interval '1 microsecond', 'library',
              date_trunc('milliseconds', now()) - n * interval '1 millisecond',
              '2025-01-01T00:00:00.456Z'::timestamptz + ((n * 5) % 8) * interval '1 microsecond'
         FROM generate_series(1, 8) n`,
      [tenantId],
    );
    for (const sort of SORTS) {
      const column = sort.replace('-', '');
      const direction = sort.startsWith('-') ? 'DESC' : 'ASC';
      const expected = (await t.sql<{ id: string }>(`SELECT id FROM items WHERE tenant_id = $1 ORDER BY "${column}" ${direction}, id ${direction}`, [tenantId])).map((r) => r.id);
      expect([sort, await listed(c, { sort }, 3)]).toEqual([sort, expected]);
    }
  });

  it(`the property scan's ${PROPERTY_SCAN_ITEMS}-item bound holds in every order: a page ends there with a cursor to go on`, async () => {
    const { c, tenantId } = await fresh();
    const rare = await createItem(c, { type: 'core.note', properties: { title: 'rare', kind: 'rare' } });
    // Past the bound: items changed after the rare one, though created before it.
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'core.note', '{"title":"common","kind":"common"}', 'active', 's', i."timestamp", 'library',
              i.created_at - n * interval '1 millisecond', i.updated_at + n * interval '1 millisecond'
         FROM items i, generate_series(1, $3::int) n WHERE i.tenant_id = $1 AND i.id = $2`,
      [tenantId, rare.id, PROPERTY_SCAN_ITEMS + 5],
    );
    // Where the rare item comes first, the page holding it ends at the bound too, with a cursor to an empty last page.
    expect(await pages(c, { property: 'kind=rare', sort: '-updated_at' }, 10)).toEqual([[], [rare.id]]);
    expect(await pages(c, { property: 'kind=rare', sort: 'created_at' }, 10)).toEqual([[], [rare.id]]);
    expect(await pages(c, { property: 'kind=rare', sort: 'updated_at' }, 10)).toEqual([[rare.id], []]);
    expect(await pages(c, { property: 'kind=rare' }, 10)).toEqual([[rare.id], []]);
  });

  it('bulk actions filter by updated_since/updated_until, directly and in a job, whose request shows them; other tenants untouched', async () => {
    const { c } = await fresh();
    const { c: other } = await fresh();
    const made: Listed[] = [];
    for (let n = 0; n < 5; n++) {
      made.push((await createItem(c, { type: 'core.note', properties: { title: `bulk ${n}` } })) as Listed);
      await createItem(other, { type: 'core.note', properties: { title: `bulk other ${n}` } });
    }
    const changed: Listed[] = [];
    for (const item of [made[3], made[1]]) changed.push((await c.patch(`/items/${item.id}`, { version: 1, properties: { body: 'x' } })).body);
    await other.patch(`/items/${(await other.get('/items', { limit: 1 })).body.items[0].id}`, { version: 1, properties: { body: 'x' } });
    const at = changed[0].updated_at;
    const current = (await c.get('/items', { limit: 100 })).body.items as Listed[];
    const recent = ids(current.filter((i) => i.updated_at >= at)).sort();
    const older = ids(current.filter((i) => i.updated_at < at)).sort();
    expect([recent, older.length > 0]).toEqual([expect.arrayContaining(ids(changed)), true]);

    const dry = await c.post('/items/bulk_action', { action: 'update_tags', add_tags: ['recent'], dry_run: true, filter: { updated_until: at } });
    expect([dry.status, [...dry.body.ids].sort()]).toEqual([200, older]);
    const direct = await c.post('/items/bulk_action', { action: 'update_tags', add_tags: ['recent'], filter: { updated_since: at } });
    expect([direct.status, [...direct.body.ids].sort()]).toEqual([200, recent]);
    expect(ids((await c.get('/items', { tags: 'recent' })).body.items).sort()).toEqual(recent);
    expect((await other.get('/items', { tags: 'recent' })).body.items).toEqual([]);

    const filter = { updated_until: at, updated_since: '2000-01-01T00:00:00.000Z' };
    const job = await c.post('/items/bulk_action', { action: 'update_tags', add_tags: ['older'], async: true, filter });
    expectStatus(job, 202);
    expect(job.body.request.filter).toEqual(filter);
    const done = await waitFor(async () => {
      const res = await c.get(`/items/bulk_action/jobs/${job.body.id}`);
      return res.body.status === 'completed' && res.body;
    }, 'the job to complete');
    expect([done.request.filter, done.result.succeeded]).toEqual([filter, older.length]);
    expect(ids((await c.get('/items', { tags: 'older' })).body.items).sort()).toEqual(older);
    for (const [field, value] of [['updated_since', 'now'], ['updated_until', null]]) {
      expect(fieldOf(await c.post('/items/bulk_action', { action: 'update_tags', add_tags: ['x'], filter: { [field as string]: value } }))).toEqual([`filter.${field}`]);
    }
  });

  it('GET /openapi.json describes sort (a pattern: the columns, or a property, either way) and the window on GET /items, the window on GET /search and in a bulk filter', async () => {
    const doc = (await t.http.get('/openapi.json')).body;
    const params = (path: string) => Object.fromEntries(doc.paths[path].get.parameters.map((p: { name: string; schema: unknown }) => [p.name, p.schema]));
    const items = params('/items');
    expect(items.sort).toMatchObject({ type: 'string', default: '-created_at' });
    for (const sort of SORTS) expect([sort, new RegExp(items.sort.pattern).test(sort)]).toEqual([sort, true]);
    for (const sort of ['name', '+created_at', '--created_at', 'created_at,id', '-', '']) expect([sort, new RegExp(items.sort.pattern).test(sort)]).toEqual([sort, false]);
    expect([items.updated_since, items.updated_until]).toEqual([expect.objectContaining({ format: 'date-time' }), expect.objectContaining({ format: 'date-time' })]);
    const search = params('/search');
    expect([search.sort, search.updated_since?.format, search.updated_until?.format]).toEqual([undefined, 'date-time', 'date-time']);
    expect(Object.keys(doc.components.schemas.BulkFilterDto.properties)).toEqual(expect.arrayContaining(['updated_since', 'updated_until']));
  });
});
