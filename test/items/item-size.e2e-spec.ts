/**
 * How big an item and a page of edges may get: an item's properties and extensions together hold
 * at most JSON_BODY_LIMIT bytes of JSON however many merges build them up (PATCH, metadata,
 * upsert, bulk update_properties), and a page of an item's edges stops at 8 MiB of edge
 * properties, as a page of items does.
 */
import { PAGE_BYTES } from '../../src/common/pagination';
import { badFields } from '../support/envelope';
import { bootstrapAdmin, startApp, TestApp } from '../support/app';
import { Api, api, createItem, expectStatus } from './helpers';

const text = (bytes: number) => 'x'.repeat(bytes);

describe('items: size', () => {
  let t: TestApp;
  let admin: Api;

  beforeAll(async () => {
    t = await startApp({ JSON_BODY_LIMIT: '16kb' });
    admin = api(t, (await bootstrapAdmin(t)).key);
  });
  afterAll(() => t?.close());

  const versionOf = async (id: string): Promise<number> => (await admin.get(`/items/${id}`)).body.version;

  it('refuses a PATCH or a metadata change that would take an item past the limit, naming what grew, and keeps the item as it was', async () => {
    const item = await createItem(admin, { type: 'core.note', properties: { title: 't', a: text(6_000) }, extensions: { 'acme.one': { v: text(6_000) } } });
    // Each request is under the body limit; together they would not be.
    expect(badFields(await admin.patch(`/items/${item.id}`, { version: 1, properties: { b: text(6_000) } }))).toEqual(['properties']);
    expect(badFields(await admin.patch(`/items/${item.id}/metadata`, { extensions: { 'acme.two': { v: text(6_000) } } }))).toEqual(['extensions']);
    expect(await versionOf(item.id)).toBe(1);
    expect(await t.sql(`SELECT count(*)::int AS n FROM item_versions WHERE item_id = $1`, [item.id])).toEqual([{ n: 1 }]);

    // Within the limit, a merge is taken; replacing a key with a value of the same size is too.
    expectStatus(await admin.patch(`/items/${item.id}`, { version: 1, properties: { b: text(1_000) } }), 200);
    expectStatus(await admin.patch(`/items/${item.id}`, { version: 2, properties: { a: text(6_000).replace('x', 'y') } }), 200);
  });

  it('refuses an upsert that would grow its item past the limit', async () => {
    const first = { type: 'core.note', source: 'feed', source_id: 'big-1', properties: { title: 't' }, extensions: { 'acme.one': { v: text(7_000) } } };
    expectStatus(await admin.post('/items', first), 201);
    const again = await admin.post('/items', { ...first, extensions: { 'acme.two': { v: text(7_000) } }, properties: { title: 't', more: text(3_000) } });
    expect(badFields(again)).toEqual(['properties']);
    const bigger = await admin.post('/items', { ...first, extensions: { 'acme.two': { v: text(10_000) } } });
    expect(badFields(bigger)).toEqual(['extensions']);
  });

  it('lets an item already past the limit change as long as it does not grow', async () => {
    const item = await createItem(admin, { type: 'core.note', properties: { title: 't' } });
    await t.sql(`UPDATE items SET properties = jsonb_build_object('title', 't', 'a', repeat('x', 20000), 'b', repeat('x', 5000)) WHERE id = $1`, [item.id]);
    expectStatus(await admin.patch(`/items/${item.id}`, { version: 1, properties: { b: null } }), 200);
    expectStatus(await admin.patch(`/items/${item.id}/metadata`, { add_tags: ['kept'] }), 200);
    expect(badFields(await admin.patch(`/items/${item.id}`, { version: 3, properties: { c: 'one more' } }))).toEqual(['properties']);
  });

  it('reports bulk update_properties that would take an item past the limit as that item\'s error, and writes the others', async () => {
    const big = await createItem(admin, { type: 'core.note', properties: { title: 'big', a: text(10_000) }, tags: ['bulk-size'] });
    const small = await createItem(admin, { type: 'core.note', properties: { title: 'small' }, tags: ['bulk-size'] });
    const res = await admin.post('/items/bulk_action', { action: 'update_properties', properties: { b: text(8_000) }, filter: { tags: ['bulk-size'] } });
    expectStatus(res, 200);
    expect(res.body).toMatchObject({ matched: 2, succeeded: 1, errored: 1, ids: [small.id] });
    expect(res.body.errors).toEqual([{ id: big.id, code: 'validation_error', message: expect.any(String), details: { fields: [{ field: 'properties', message: expect.any(String) }] } }]);
    expect(await versionOf(big.id)).toBe(1);
    expect(await versionOf(small.id)).toBe(2);
  });

  it('stops a page of an item\'s edges at 8 MiB of edge properties, with a cursor to the rest', async () => {
    expectStatus(await admin.post('/edge-types', { name: 'acme.heavy', source_types: ['*'], target_types: ['*'] }), 201);
    const hub = await createItem(admin, { type: 'core.note', properties: { title: 'hub' } });
    for (let n = 0; n < 4; n++) {
      const target = await createItem(admin, { type: 'core.note', properties: { title: `t${n}` } });
      expectStatus(await admin.post('/edges', { type: 'acme.heavy', source_id: hub.id, target_id: target.id }), 201);
    }
    // Edges made when the limit was larger: each a third of the page budget.
    await t.sql(`UPDATE edges SET properties = jsonb_build_object('v', repeat('x', $2::int)) WHERE source_id = $1`, [hub.id, Math.ceil(PAGE_BYTES / 3)]);
    const first = await admin.get(`/items/${hub.id}/edges`, { limit: 100 });
    expectStatus(first, 200);
    // The page keeps the edge that crosses the mark (at least one, as pages of items do).
    expect(first.body.edges).toHaveLength(3);
    expect(first.body.next_cursor).toEqual(expect.any(String));
    const rest = await admin.get(`/items/${hub.id}/edges`, { limit: 100, cursor: first.body.next_cursor });
    expect(rest.body.edges).toHaveLength(1);
    expect(rest.body.next_cursor).toBeNull();
    expect(new Set([...first.body.edges, ...rest.body.edges].map((e: { id: string }) => e.id)).size).toBe(4);
  });
});
