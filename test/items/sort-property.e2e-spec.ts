/**
 * GET /items?sort=properties.<path> (and `-` descending): page walks compared with one ORDER BY of
 * the same rows (numbers, strings, other JSON types mixed; ties; items without the property or
 * with null there last in both directions, the walk crossing into them), the order under every
 * other filter and each listing path (plain walk, window read, property clauses, which it reads
 * without the 10,000-item bound), cursors bound to their path and direction, forged cursors, the
 * cursor of a value too long for a URL, bad `sort` values, /search and bulk filters refusing it,
 * the OpenAPI pattern, and other tenants' items kept out.
 */
import type { Response } from 'supertest';
import { PROPERTY_SCAN_ITEMS } from '../../src/items/item-filter';
import { MAX_CURSOR_VALUE, SORTS } from '../../src/items/listing-order';
import { bootstrapAdmin, createKey, createTenant, startApp, TestApp } from '../support/app';
import { Api, api, createItem, expectError, expectStatus, ids, listed, pages, Query } from './helpers';

const fieldOf = (res: Response) => expectError(res, 400, 'validation_error').details!.fields.map((f: { field: string }) => f.field);
const cursorOf = (parts: string[]) => Buffer.from(JSON.stringify(parts)).toString('base64url');
const partsOf = (cursor: string) => JSON.parse(Buffer.from(cursor, 'base64url').toString()) as string[];

/** Values of `priority` (and of `address.city` through `city`), each stored as written; `undefined`: no such property. */
const VALUES: unknown[] = [
  3, 10, 2, 2, 2, -1.5, 0, 1e20, 2.0000001, '10', '2', 'apple', 'Apple', 'banana', 'banana', '', true, false, [], [1, 2], { a: 1 }, null, null,
  undefined, undefined, undefined, 3, 'zebra',
];

describe('items: sort by a property', () => {
  let t: TestApp;
  let rootKey: string;
  let seq = 0;
  const fresh = async () => {
    const { key, tenantId } = await createTenant(t, rootKey, `sortprop-${seq++}`);
    return { c: api(t, key), tenantId, key };
  };

  /** The tenant's active items in one ORDER BY of PostgreSQL: the order every walk must equal. */
  async function ordered(tenantId: string, path: string[], descending: boolean, where = 'TRUE', params: unknown[] = []): Promise<string[]> {
    const dir = descending ? 'DESC' : 'ASC';
    const rows = await t.sql<{ id: string }>(
      `SELECT id FROM items WHERE tenant_id = $1 AND state = 'active' AND ${where}
        ORDER BY nullif(properties #> $2::text[], 'null'::jsonb) ${dir} NULLS LAST, id ${dir}`,
      [tenantId, path, ...params],
    );
    return ids(rows);
  }

  beforeAll(async () => {
    t = await startApp();
    rootKey = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t?.close());

  describe('a tenant whose items hold values of every JSON type, ties, null and none', () => {
    let c: Api;
    let tenantId: string;
    let other: Api;
    /** id → the stored priority (undefined: none). */
    const value = new Map<string, unknown>();

    beforeAll(async () => {
      ({ c, tenantId } = await fresh());
      ({ c: other } = await fresh());
      for (const [n, v] of VALUES.entries()) {
        const properties: Record<string, unknown> = { title: `prop ${n}`, kind: n % 3 ? 'odd' : 'even' };
        if (v !== undefined) properties.priority = v;
        if (n % 4 !== 3) properties.address = { city: n % 2 ? 'Paris' : v ?? 'Lyon' };
        const item = await createItem(c, { type: n % 5 ? 'core.note' : 'core.contact', properties: n % 5 ? properties : { ...properties, name: `c${n}` }, tags: n % 2 ? ['odd'] : [] });
        value.set(item.id, v);
        // Another tenant's items, alike: never listed here.
        await createItem(other, { type: 'core.note', properties: { title: `other ${n}`, ...(v !== undefined ? { priority: v } : {}) } });
      }
    });

    it('pages, both ways and at any page size, equal one ORDER BY: jsonb order, unset last, ties by id the same way', async () => {
      for (const descending of [false, true]) {
        const expected = await ordered(tenantId, ['priority'], descending);
        expect(expected).toHaveLength(VALUES.length);
        for (const limit of [1, 2, 3, 7, 100]) {
          const sort = `${descending ? '-' : ''}properties.priority`;
          expect([sort, limit, await listed(c, { sort }, limit)]).toEqual([sort, limit, expected]);
        }
        // What that order is: the five without a value last (by id the same way), numbers numerically.
        const unset = expected.slice(-5);
        expect(unset.map((id) => value.get(id) ?? null)).toEqual([null, null, null, null, null]);
        const sortedIds = [...unset].sort();
        expect(unset).toEqual(descending ? sortedIds.reverse() : sortedIds);
        const numbers = expected.map((id) => value.get(id)).filter((v): v is number => typeof v === 'number');
        const byValue = [...numbers].sort((a, b) => a - b);
        expect(numbers).toEqual(descending ? byValue.reverse() : byValue);
      }
    });

    it('a nested path, both ways; and other tenants\' items never listed', async () => {
      for (const sort of ['properties.address.city', '-properties.address.city']) {
        const expected = await ordered(tenantId, ['address', 'city'], sort.startsWith('-'));
        expect([sort, await listed(c, { sort }, 4)]).toEqual([sort, expected]);
      }
      const theirs = await listed(other, { sort: 'properties.priority' }, 10);
      expect(theirs).toHaveLength(VALUES.length);
      expect(theirs.filter((id) => value.has(id))).toEqual([]);
    });

    it('combines with type, tags, state, property clauses, windows and edge clauses, in every path of a listing', async () => {
      const everything = async (query: Query) => new Set(await listed(c, query, 100));
      const filters: Query[] = [
        { type: 'core.note' },
        { tags: 'odd' },
        { property: 'kind=even' },
        { property: 'priority>=2' },
        { since: '2000-01-01T00:00:00Z' }, // a window of few items: the window read
        { updated_since: '2000-01-01T00:00:00Z', type: 'core.*', property: 'kind!=odd' },
        { state: 'all' },
        { tier: 'library', until: '2999-01-01T00:00:00Z', property: 'priority<"b"' },
        { updated_until: '2999-01-01T00:00:00Z', tags: 'odd', source: 'nobody' },
      ];
      for (const filter of filters) {
        const selected = await everything(filter);
        expect(selected.size > 0).toBe(filter.source === undefined);
        for (const sort of ['properties.priority', '-properties.priority']) {
          const expected = (await ordered(tenantId, ['priority'], sort.startsWith('-'))).filter((id) => selected.has(id));
          expect([filter, sort, await listed(c, { ...filter, sort }, 3)]).toEqual([filter, sort, expected]);
        }
      }
      // An edge clause: the items linking to one of them.
      expectStatus(await c.post('/edge-types', { name: 'acme.sortprop', source_types: ['*'], target_types: ['*'] }), 201);
      const all = await ordered(tenantId, ['priority'], false);
      const linking = [all[0], all[5], all[all.length - 1], all[all.length - 3]];
      for (const source of linking) expectStatus(await c.post('/edges', { type: 'acme.sortprop', source_id: source, target_id: all[1] }), 201);
      expect(await listed(c, { edge: `acme.sortprop:${all[1]}`, sort: 'properties.priority' }, 1)).toEqual(all.filter((id) => linking.includes(id)));
      expect(await listed(c, { backref: `acme.sortprop:${all[0]}`, sort: '-properties.priority' })).toEqual([all[1]]);
    });

    it('a cursor pages only its own path and direction: any other sort is 400 validation_error naming cursor', async () => {
      const sorts = ['properties.priority', '-properties.priority', 'properties.address.city', 'properties.kind', ...SORTS];
      const cursors = new Map<string, string>();
      for (const sort of sorts) cursors.set(sort, (await c.get('/items', { sort, limit: 2 })).body.next_cursor);
      for (const [issuedBy, cursor] of cursors) {
        for (const sort of [...sorts, undefined]) {
          const res = await c.get('/items', { sort, limit: 2, cursor });
          if (sort === issuedBy || (sort === undefined && issuedBy === '-created_at')) expectStatus(res, 200);
          else expect([issuedBy, sort, fieldOf(res)]).toEqual([issuedBy, sort, ['cursor']]);
        }
      }
    });

    it('a forged cursor is 400 validation_error naming cursor, never a 500', async () => {
      const cursor = (await c.get('/items', { sort: 'properties.priority', limit: 2 })).body.next_cursor;
      const [, id, list] = partsOf(cursor);
      expect(list).toBe('items?sort=properties.priority');
      const forged = [
        ...['1e-100000', '1e100000', `1${'0'.repeat(1001)}`, '"\\u0000"', '"\\ud800"', '{"a":"\\u0000"}', 'nan', '', '{', '[1,]', "'a'", '"a" "b"',
          `"${'x'.repeat(MAX_CURSOR_VALUE)}"`, 'sha256:abc', `sha256:${'G'.repeat(64)}`].map((v) => [v, id, list]),
        ['3', 'not-an-id', list],
        ['3', id],
        ['3', id, list, 'more'],
        ['3', id, 'items?sort=properties.other'],
      ];
      for (const parts of forged) expect([parts[0].slice(0, 40), fieldOf(await c.get('/items', { sort: 'properties.priority', cursor: cursorOf(parts) }))]).toEqual([parts[0].slice(0, 40), ['cursor']]);
      // A made-up but readable position pages from there: values of any type, and the group without one.
      for (const v of ['2', '"b"', 'true', '{"z":[1,{"y":null}]}', '[]', 'null', '1e-300']) {
        expectStatus(await c.get('/items', { sort: 'properties.priority', cursor: cursorOf([v, id, list]) }), 200);
      }
    });

    it('an unknown or malformed sort is 400 validation_error naming sort', async () => {
      for (const sort of ['properties.', 'properties.a..b', '-', 'properties', '-properties.', 'properties..a', 'properties.a.', 'properties.a b', 'properties.a/b',
        `properties.${Array.from({ length: 9 }, (_, i) => `k${i}`).join('.')}`, `properties.${'k'.repeat(101)}`, 'property.a', 'Properties.a', '--properties.a', '+properties.a',
        'properties.a,id']) {
        expect([sort, fieldOf(await c.get('/items', { sort }))]).toEqual([sort, ['sort']]);
      }
      // The longest path a property clause takes is a sort too.
      const longest = Array.from({ length: 8 }, () => 'k'.repeat(100)).join('.');
      expectStatus(await c.get('/items', { property: `${longest}=1` }), 200);
      expectStatus(await c.get('/items', { sort: `-properties.${longest}` }), 200);
      expect(fieldOf(await c.get('/items?sort=properties.a&sort=properties.b'))).toEqual(['sort']);
    });
  });

  it(`with property clauses, pages are full: the ${PROPERTY_SCAN_ITEMS}-item bound of the walk does not apply to a sort it reads whole`, async () => {
    const { c, tenantId } = await fresh();
    const seed = await createItem(c, { type: 'core.note', properties: { title: 'seed', kind: 'common' } });
    // Common items past the bound, and a few rare ones older than the bound's first walk reaches.
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'core.note',
              jsonb_build_object('title', 'n' || n, 'kind', CASE WHEN n > $4 AND n % 1000 = 0 THEN 'rare' ELSE 'common' END, 'rank', n),
              'active', 's', i."timestamp", 'library', i.created_at - n * interval '1 millisecond', i.updated_at
         FROM items i, generate_series(1, $3::int) n WHERE i.tenant_id = $1 AND i.id = $2`,
      [tenantId, seed.id, PROPERTY_SCAN_ITEMS + 5000, PROPERTY_SCAN_ITEMS],
    );
    const rare = await ordered(tenantId, ['rank'], true, `properties->>'kind' = 'rare'`);
    expect(rare).toHaveLength(5);
    expect(await pages(c, { property: 'kind=rare', sort: '-properties.rank' }, 4)).toEqual([rare.slice(0, 4), rare.slice(4)]);
    expect(await pages(c, { property: 'kind=rare', sort: 'properties.rank' }, 5)).toEqual([[...rare].reverse()]);
    // The same clause under a column order keeps its bound: its first page, newest first, reaches none of them.
    const bounded = await c.get('/items', { property: 'kind=rare', limit: 4 });
    expect([bounded.body.items, typeof bounded.body.next_cursor]).toEqual([[], 'string']);
  });

  it('a value too long for a URL: its cursor carries a digest, pages on, and is 409 conflict once that item changed', async () => {
    const { c, tenantId, key } = await fresh();
    const long = (n: number) => `${String.fromCharCode(97 + n)}${'x'.repeat(MAX_CURSOR_VALUE + 50)}`;
    const made: string[] = [];
    for (let n = 0; n < 6; n++) made.push((await createItem(c, { type: 'core.note', properties: { title: `long ${n}`, body: long(n % 3) } })).id);
    for (const sort of ['properties.body', '-properties.body']) {
      expect([sort, await listed(c, { sort }, 2)]).toEqual([sort, await ordered(tenantId, ['body'], sort.startsWith('-'))]);
    }
    const first = await c.get('/items', { sort: 'properties.body', limit: 2 });
    const [digest, id] = partsOf(first.body.next_cursor);
    expect([digest, first.body.next_cursor.length < 400]).toEqual([expect.stringMatching(/^sha256:[0-9a-f]{64}$/), true]);
    // Another property of that item may change; its sort value may not.
    expectStatus(await c.patch(`/items/${id}`, { version: 1, properties: { title: 'renamed' } }), 200);
    expectStatus(await c.get('/items', { sort: 'properties.body', cursor: first.body.next_cursor }), 200);
    expectStatus(await c.patch(`/items/${id}`, { version: 2, properties: { body: 'short now' } }), 200);
    const stale = await c.get('/items', { sort: 'properties.body', cursor: first.body.next_cursor });
    expect([expectError(stale, 409, 'conflict').details]).toEqual([expect.objectContaining({ field: 'cursor' })]);
    // A digest of no item of this tenant is no position either.
    const [, , list] = partsOf(first.body.next_cursor);
    const unknown = await c.get('/items', { sort: 'properties.body', cursor: cursorOf([`sha256:${'0'.repeat(64)}`, id, list]) });
    expect(unknown.status).toBe(409);
    // Nor is an item the caller may not read, its digest right or not: no guessing what it holds.
    for (const n of [1, 2]) await createItem(c, { type: 'core.contact', properties: { name: `hidden ${n}`, body: long(n) } });
    const hidden = (await c.get('/items', { sort: 'properties.body', type: 'core.contact', limit: 1 })).body.next_cursor;
    expect(partsOf(hidden)[0]).toMatch(/^sha256:/);
    expectStatus(await c.get('/items', { sort: 'properties.body', cursor: hidden }), 200);
    const member = api(t, (await createKey(t, key, { role: 'member', type_permissions: { 'core.note': 'read' } })).key);
    expectStatus(await member.get('/items', { sort: 'properties.body' }), 200);
    expect(expectError(await member.get('/items', { sort: 'properties.body', cursor: hidden }), 409, 'conflict').details).toMatchObject({ field: 'cursor' });
  });

  it('GET /search and bulk filters refuse sort; GET /openapi.json shows the property form', async () => {
    const { c } = await fresh();
    await createItem(c, { type: 'core.note', properties: { title: 'searchable', priority: 1 } });
    expect(fieldOf(await c.get('/search', { q: 'searchable', sort: 'properties.priority' }))).toEqual(['sort']);
    expect(fieldOf(await c.post('/items/bulk_action', { action: 'update_tags', add_tags: ['x'], dry_run: true, filter: { sort: 'properties.priority' } }))).toEqual(['filter.sort']);
    const doc = (await t.http.get('/openapi.json')).body;
    const sort = doc.paths['/items'].get.parameters.find((p: { name: string }) => p.name === 'sort');
    expect(sort.schema).toMatchObject({ type: 'string', default: '-created_at' });
    expect(sort.description).toContain('properties.<path>');
    const pattern = new RegExp(sort.schema.pattern);
    for (const ok of [...SORTS, 'properties.priority', '-properties.address.city', 'properties.lines.0.sku']) expect([ok, pattern.test(ok)]).toEqual([ok, true]);
    for (const bad of ['properties.', 'properties.a..b', '-', 'name', `properties.${Array(9).fill('k').join('.')}`]) expect([bad, pattern.test(bad)]).toEqual([bad, false]);
  });
});
