import { bootstrapAdmin, bearer, startApp, TestApp } from '../support/app';

describe('idempotency on item writes', () => {
  let t: TestApp;
  let admin: string;
  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t.close());

  it('replays POST /items and creates one item', async () => {
    const body = { type: 'core.note', properties: { title: 'once' } };
    const headers = { ...bearer(admin), 'Idempotency-Key': 'item-create-1' };
    const first = await t.http.post('/items').set(headers).send(body).expect(201);
    const again = await t.http.post('/items').set(headers).send(body).expect(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    const [{ count }] = await t.sql<{ count: string }>(`SELECT count(*) FROM items WHERE properties->>'title' = 'once'`);
    expect(Number(count)).toBe(1);
    const other = await t.http.post('/items').set(headers).send({ ...body, properties: { title: 'twice' } });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('conflict');
  });

  it('runs concurrent POST /items/bulk with one key once', async () => {
    const body = { mode: 'create_only', items: [{ type: 'core.note', properties: { title: 'bulk-once' } }] };
    const headers = { ...bearer(admin), 'Idempotency-Key': 'bulk-1' };
    const responses = await Promise.all([1, 2, 3].map(() => t.http.post('/items/bulk').set(headers).send(body)));
    for (const r of responses) {
      expect(r.status).toBe(200);
      expect(r.body).toEqual(responses[0].body);
    }
    const [{ count }] = await t.sql<{ count: string }>(`SELECT count(*) FROM items WHERE properties->>'title' = 'bulk-once'`);
    expect(Number(count)).toBe(1);
  });
});
