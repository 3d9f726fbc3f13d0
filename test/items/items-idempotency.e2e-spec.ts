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

  it('compares the path as routed: letter case and a trailing slash make no other request', async () => {
    const body = { type: 'core.note', properties: { title: 'spelt twice' } };
    const headers = { ...bearer(admin), 'Idempotency-Key': 'item-create-spelling' };
    const first = await t.http.post('/items').set(headers).send(body).expect(201);
    for (const path of ['/Items', '/items/', '/ITEMS/']) {
      const again = await t.http.post(path).set(headers).send(body).expect(201);
      expect([path, again.headers['idempotent-replayed'], again.body.id]).toEqual([path, 'true', first.body.id]);
    }
  });

  it('does not keep a write collision\'s 409 ("changed nothing; send it again"): the retry with the key runs', async () => {
    // A deadlock, as PostgreSQL reports a transaction that lost to concurrent ones, on inserts of this title until it is lifted.
    await t.sql(`CREATE TABLE collide (lifted boolean NOT NULL);
                 INSERT INTO collide VALUES (false);
                 CREATE FUNCTION collide() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                   IF NEW.properties->>'title' = 'collides once' AND NOT (SELECT lifted FROM collide) THEN
                     RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01';
                   END IF;
                   RETURN NEW;
                 END $$;
                 CREATE TRIGGER collide BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION collide();`);
    try {
      const headers = { ...bearer(admin), 'Idempotency-Key': 'item-collides' };
      const body = { type: 'core.note', properties: { title: 'collides once' } };
      const collided = await t.http.post('/items').set(headers).send(body);
      expect([collided.status, collided.body.error?.code]).toEqual([409, 'conflict']);
      await t.sql('UPDATE collide SET lifted = true');
      const retried = await t.http.post('/items').set(headers).send(body).expect(201);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      const again = await t.http.post('/items').set(headers).send(body).expect(201);
      expect([again.headers['idempotent-replayed'], again.body.id]).toEqual(['true', retried.body.id]);
    } finally {
      await t.sql('DROP TRIGGER collide ON items; DROP FUNCTION collide(); DROP TABLE collide');
    }
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
