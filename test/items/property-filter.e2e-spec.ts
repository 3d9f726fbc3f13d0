/**
 * The `property` filter (src/items/property-filter.ts) on GET /items, GET /search and bulk
 * actions: equality by JSON value, nested paths and array indexes, null and missing, ordered
 * comparisons by JSON type, the clauses' validation, and a listing page's scan bound.
 */
import { bootstrapAdmin, createTenant, startApp, TestApp } from '../support/app';
import { PROPERTY_SCAN_ITEMS } from '../../src/items/item-filter';
import { badFields } from '../support/envelope';
import { Api, api, createItem, expectStatus } from './helpers';

describe('items: property filter', () => {
  let t: TestApp;
  let rootKey: string;
  let c: Api;
  const made: Record<string, string> = {};

  /** The ids GET /items lists for these clauses (one page of 100), by the names they were made under. */
  async function listed(clauses: string[], extra = ''): Promise<string[]> {
    const query = clauses.map((cl) => `property=${encodeURIComponent(cl)}`).join('&');
    const res = await c.get(`/items?limit=100&${query}${extra}`);
    expectStatus(res, 200);
    const byId = new Map(Object.entries(made).map(([name, id]) => [id, name]));
    return res.body.items.map((i: { id: string }) => byId.get(i.id) ?? i.id).sort();
  }

  beforeAll(async () => {
    t = await startApp();
    rootKey = (await bootstrapAdmin(t)).key;
    c = api(t, (await createTenant(t, rootKey, 'props')).key);
    const items: Record<string, Record<string, unknown>> = {
      open3: { title: 'open three', status: 'open', priority: 3, due: '2026-03-01', address: { city: 'Paris' }, lines: [{ sku: 'A-1' }], flag: true },
      open5: { title: 'open five', status: 'open', priority: 5, due: '2026-05-01', address: { city: 'Lyon' }, lines: [{ sku: 'B-2' }, { sku: 'A-1' }] },
      closed1: { title: 'closed one', status: 'closed', priority: 1, due: '2025-12-31', address: { city: 'Paris' }, flag: false },
      text42: { title: 'text code', code: '42', priority: '4', status: null },
      num42: { title: 'number code', code: 42, priority: 4.5 },
      bare: { title: 'no fields' },
    };
    for (const [name, properties] of Object.entries(items)) made[name] = (await createItem(c, { type: 'core.note', properties })).id;
  });
  afterAll(() => t?.close());

  it('= compares JSON values: bare text is a string, a JSON scalar is itself ("42" is not 42)', async () => {
    expect(await listed(['status=open'])).toEqual(['open3', 'open5']);
    expect(await listed(['status="open"'])).toEqual(['open3', 'open5']);
    expect(await listed(['code=42'])).toEqual(['num42']);
    expect(await listed(['code="42"'])).toEqual(['text42']);
    expect(await listed(['flag=true'])).toEqual(['open3']);
    expect(await listed(['flag="true"'])).toEqual([]);
    expect(await listed(['title=open three'])).toEqual(['open3']);
  });

  it('follows dotted paths into objects and, by a number, into arrays', async () => {
    expect(await listed(['address.city=Paris'])).toEqual(['closed1', 'open3']);
    expect(await listed(['lines.0.sku=A-1'])).toEqual(['open3']);
    expect(await listed(['lines.1.sku=A-1'])).toEqual(['open5']);
  });

  it('=null matches null and missing, != matches what differs and what is missing', async () => {
    expect(await listed(['status=null'])).toEqual(['bare', 'num42', 'text42']);
    expect(await listed(['status!=null'])).toEqual(['closed1', 'open3', 'open5']);
    expect(await listed(['status!=open'])).toEqual(['bare', 'closed1', 'num42', 'text42']);
  });

  it('orders numbers as numbers and strings by code point, each only against its own JSON type', async () => {
    expect(await listed(['priority>=3'])).toEqual(['num42', 'open3', 'open5']);
    expect(await listed(['priority<3'])).toEqual(['closed1']);
    expect(await listed(['priority>4'])).toEqual(['num42', 'open5']);
    // "4" is a string: a string bound finds it, a number bound does not.
    expect(await listed(['priority>"3"'])).toEqual(['text42']);
    expect(await listed(['due<2026-04-01'])).toEqual(['closed1', 'open3']);
    expect(await listed(['due>=2026-03-01', 'due<="2026-05-01"'])).toEqual(['open3', 'open5']);
  });

  it('clauses hold together, and with the other filters', async () => {
    expect(await listed(['status=open', 'address.city=Paris'])).toEqual(['open3']);
    expect(await listed(['address.city=Paris'], '&state=all&type=core.*')).toEqual(['closed1', 'open3']);
    expectStatus(await c.delete(`/items/${made.closed1}`), 200);
    expect(await listed(['address.city=Paris'])).toEqual(['open3']);
    expect(await listed(['address.city=Paris'], '&state=trashed')).toEqual(['closed1']);
  });

  it('refuses a malformed clause as 400 validation_error on `property`', async () => {
    // Also what PostgreSQL could not read: numbers past numeric's range, a JSON-escaped NUL or half a surrogate pair.
    const bad = ['n<1e1000000', 'n>1e-100000', 'a="\\u0000"', 'a>"\\ud800"', 'status', '=open', 'a..b=1', 'a b=1', 'priority>true', 'priority<null', 'a={"x":1}', 'a=[1]', `${'k.'.repeat(8)}k=1`, `a=${'x'.repeat(1000)}`];
    for (const clause of bad) {
      expect([clause, badFields(await c.get(`/items?property=${encodeURIComponent(clause)}`))]).toEqual([clause, ['property']]);
    }
    // An empty value is the empty string.
    expect(await listed(['status='])).toEqual([]);
    const eleven = Array.from({ length: 11 }, (_, i) => `property=k${i}%3D1`).join('&');
    expect(badFields(await c.get(`/items?${eleven}`))).toEqual(['property']);
  });

  it('filters search answers and bulk actions alike', async () => {
    const search = await c.get('/search?q=open&property=priority%3E4');
    expectStatus(search, 200);
    expect(search.body.results.map((r: { item: { id: string } }) => r.item.id)).toEqual([made.open5]);

    const bulk = (property: unknown) => c.post('/items/bulk_action', { action: 'update_tags', add_tags: ['x'], dry_run: true, filter: { property } });
    const dry = await bulk(['status=open', 'priority>=3']);
    expectStatus(dry, 200);
    expect([...dry.body.ids].sort()).toEqual([made.open3, made.open5].sort());
    for (const bad of [['status'], [], 'status=open', ['n<1e1000000']]) expect(badFields(await bulk(bad))).toEqual(['filter.property']);
  });

  it(`a page tests at most ${PROPERTY_SCAN_ITEMS} items: then it ends with what it found and a cursor to go on`, async () => {
    const { key } = await createTenant(t, rootKey, 'props-scan');
    const s = api(t, key);
    const rare = await createItem(s, { type: 'core.note', properties: { title: 'rare', kind: 'rare' } });
    const common = await createItem(s, { type: 'core.note', properties: { title: 'common', kind: 'common' } });
    // Newer items than the rare one, past the bound: copies of `common`, a millisecond apart.
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, version, schema_version, source, "timestamp", tier, tags, extensions, created_at, updated_at)
       SELECT tenant_id, gen_random_uuid(), type, properties, state, version, schema_version, source, "timestamp", tier, tags, extensions,
              created_at + n * interval '1 millisecond', updated_at
         FROM items, generate_series(1, $2::int) n WHERE id = $1`,
      [common.id, PROPERTY_SCAN_ITEMS + 5],
    );
    const first = await s.get('/items?property=kind%3Drare&limit=10');
    expectStatus(first, 200);
    expect(first.body.items).toEqual([]);
    expect(first.body.next_cursor).toEqual(expect.any(String));
    const rest = await s.get(`/items?property=kind%3Drare&limit=10&cursor=${encodeURIComponent(first.body.next_cursor)}`);
    expect([rest.body.items.map((i: { id: string }) => i.id), rest.body.next_cursor]).toEqual([[rare.id], null]);

    // The last item a page may test matching too: the page ends there all the same, with a cursor.
    const [{ id: atBound }] = await t.sql<{ id: string }>(
      `SELECT id FROM items WHERE tenant_id = (SELECT tenant_id FROM items WHERE id = $1) ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 1`,
      [rare.id, PROPERTY_SCAN_ITEMS - 1],
    );
    await t.sql(`UPDATE items SET properties = '{"title":"rare too","kind":"rare"}' WHERE id = $1`, [atBound]);
    const bounded = await s.get('/items?property=kind%3Drare&limit=10');
    expect([bounded.body.items.map((i: { id: string }) => i.id), typeof bounded.body.next_cursor]).toEqual([[atBound], 'string']);
    const after = await s.get(`/items?property=kind%3Drare&limit=10&cursor=${encodeURIComponent(bounded.body.next_cursor)}`);
    expect([after.body.items.map((i: { id: string }) => i.id), after.body.next_cursor]).toEqual([[rare.id], null]);
    // Matches within the bound fill the page as usual.
    const commons = await s.get('/items?property=kind%3Dcommon&limit=10');
    expect([commons.body.items.length, typeof commons.body.next_cursor]).toEqual([10, 'string']);
  });
});
