/**
 * Tenant isolation for items: another tenant's admin key cannot see or touch the first
 * tenant's items on any route, never lists them, and natural keys are per tenant.
 */
import { bootstrapAdmin, createKey, createTenant, startApp, TestApp } from '../support/app';
import { Api, api, createItem, expectError, expectStatus, note } from './helpers';

describe('items: tenant isolation', () => {
  let t: TestApp;
  let rootKey: string;
  let first: Api;
  let second: Api;
  let secondKey: string;
  let item: Record<string, any>;

  beforeAll(async () => {
    t = await startApp();
    rootKey = (await bootstrapAdmin(t)).key;
    first = api(t, rootKey);
    secondKey = (await createTenant(t, rootKey, 'second')).key;
    second = api(t, secondKey);
    item = await createItem(first, note('tenant one', { tags: ['iso'], source_id: 'iso-1', extensions: { 'acme.x': { a: 1 } } }));
  });
  afterAll(() => t?.close());

  it("every item route answers 404 item_not_found for the other tenant's item", async () => {
    const id = item.id;
    expectError(await second.get(`/items/${id}`), 404, 'item_not_found');
    expectError(await second.patch(`/items/${id}`, { version: 1, properties: { title: 'hijack' } }), 404, 'item_not_found');
    expectError(await second.patch(`/items/${id}`, { version: 1, tags: ['hijack'] }), 404, 'item_not_found');
    expectError(await second.delete(`/items/${id}`), 404, 'item_not_found');
    expectError(await second.get(`/items/${id}/versions`), 404, 'item_not_found');
    expectError(await second.get(`/items/${id}/versions/1`), 404, 'item_not_found');
    expectError(await second.post(`/items/${id}/versions/1/restore`, { version: 1 }), 404, 'item_not_found');
    expectError(await second.get(`/items/${id}/metadata`), 404, 'item_not_found');
    expectError(await second.patch(`/items/${id}/metadata`, { add_tags: ['hijack'] }), 404, 'item_not_found');

    const after = await first.get(`/items/${id}`);
    expect(after.body).toEqual(item);
  });

  it("GET /items never lists the other tenant's items, whatever the filter", async () => {
    await createItem(second, note('tenant two', { tags: ['iso'] }));
    for (const query of [{}, { type: '*' }, { state: 'all' }, { tags: 'iso' }, { source: item.source }, { limit: 100 }]) {
      const res = await second.get('/items', query);
      expectStatus(res, 200);
      expect(res.body.items.map((i: any) => i.id)).not.toContain(item.id);
      expect(res.body.items.every((i: any) => i.tenant_id !== item.tenant_id)).toBe(true);
    }
    const own = await first.get('/items', { tags: 'iso' });
    expect(own.body.items.map((i: any) => i.id)).toEqual([item.id]);
  });

  it('a cursor from one tenant does not reveal the other tenant\'s items', async () => {
    for (let i = 0; i < 3; i++) await createItem(first, note(`page ${i}`));
    const page = await first.get('/items', { limit: 1 });
    const res = await second.get('/items', { cursor: page.body.next_cursor, state: 'all' });
    expectStatus(res, 200);
    expect(res.body.items.every((i: any) => i.tenant_id !== item.tenant_id)).toBe(true);
  });

  it('natural keys are per tenant: the same source and source_id in two tenants are two items', async () => {
    const keyA = api(t, (await createKey(t, rootKey, { role: 'admin', source: 'shared.sync' })).key);
    const keyB = api(t, (await createKey(t, secondKey, { role: 'admin', source: 'shared.sync' })).key);
    const a = await keyA.post('/items', note('A', { source_id: 'same-id' }));
    const b = await keyB.post('/items', note('B', { source_id: 'same-id' }));
    expectStatus(a, 201);
    expectStatus(b, 201);
    expect(b.body.id).not.toBe(a.body.id);
    expect(b.body.tenant_id).not.toBe(a.body.tenant_id);

    const again = await keyB.post('/items', note('B2', { source_id: 'same-id' }));
    expectStatus(again, 200);
    expect(again.body.id).toBe(b.body.id);
    expect((await keyA.get(`/items/${a.body.id}`)).body).toMatchObject({ version: 1, properties: { title: 'A' } });
  });

  it("bulk create_only in one tenant does not see the other tenant's natural keys, even with the same source", async () => {
    const sameSource = api(t, (await createKey(t, secondKey, { role: 'admin', source: item.source })).key);
    const res = await sameSource.post('/items/bulk', { mode: 'create_only', items: [note('bulk', { source_id: 'iso-1' })] });
    expectStatus(res, 200);
    expect(res.body.results[0]).toMatchObject({ status: 'created' });
    expect(res.body.results[0].id).not.toBe(item.id);
    expect((await first.get(`/items/${item.id}`)).body.version).toBe(1);
  });

  it("the other tenant's types are not writable: items of them are invalid_type", async () => {
    expectStatus(await first.post('/types', { name: 'acme.mine', schema: {} }), 201);
    expectError(await second.post('/items', { type: 'acme.mine', properties: {} }), 400, 'invalid_type');
  });
});
