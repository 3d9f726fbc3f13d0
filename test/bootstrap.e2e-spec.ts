/** SPEC 4.5 / CONTRACT: the first POST /keys on an empty server needs no auth; then never again. */
import { bearer, createKey, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';
import { expectKeyBody } from './support/keys';

describe('bootstrap', () => {
  const apps: TestApp[] = [];
  const fresh = async () => {
    const t = await startApp();
    apps.push(t);
    return t;
  };
  afterAll(() => Promise.all(apps.map((t) => t.close())));

  it('gives the first caller an admin key of a new root tenant, then closes', async () => {
    const t = await fresh();
    // A bad body or a bogus token does not use up the bootstrap.
    expectError(await t.http.post('/keys').send({ role: 'boss' }), 400, 'validation_error');
    expectError(await t.http.post('/keys').set(bearer('svc_k1_bogus')).send({}), 401, 'unauthorized');
    expect(await t.sql('SELECT 1 FROM api_keys')).toHaveLength(0);

    const res = await t.http.post('/keys').send({ label: 'first', role: 'member', source: 'root-src' });
    expect(res.status).toBe(201);
    expectKeyBody(res.body, true);
    expect(res.body.role).toBe('admin'); // the bootstrap key is always an admin
    expect(res.body.label).toBe('first');
    expect(res.body.source).toBe('root-src');
    const tenants = await t.sql<{ id: string; is_root: boolean }>('SELECT id, is_root FROM tenants');
    expect(tenants).toEqual([{ id: res.body.tenant_id, is_root: true }]);

    // Closed: unauthenticated creation is now 401, whatever the body.
    expectError(await t.http.post('/keys').send({ label: 'second' }), 401, 'unauthorized');
    expectError(await t.http.post('/keys').send({}), 401, 'unauthorized');
    // 401 before the body is looked at: not 400 for a bad field or 415 for a wrong media type.
    expectError(await t.http.post('/keys').send({ role: 'boss' }), 401, 'unauthorized');
    expectError(await t.http.post('/keys').set('Content-Type', 'text/plain').send('hello'), 401, 'unauthorized');
    // The admin key works.
    const list = await t.http.get('/keys').set(bearer(res.body.key)).expect(200);
    expect(list.body.keys.map((k: { id: string }) => k.id)).toEqual([res.body.id]);
  });

  it('of two concurrent attempts on a fresh server exactly one succeeds', async () => {
    const t = await fresh();
    const results = await Promise.all([1, 2, 3].map((i) => t.http.post('/keys').send({ label: `racer ${i}` })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 401, 401]);
    for (const r of results.filter((x) => x.status === 401)) expectError(r, 401, 'unauthorized');
    expect(await t.sql('SELECT 1 FROM api_keys')).toHaveLength(1);
    expect(await t.sql('SELECT 1 FROM tenants')).toHaveLength(1);
  });

  it('never re-opens, even when every key that existed at bootstrap is revoked', async () => {
    const t = await fresh();
    const first = (await t.http.post('/keys').send({ label: 'first' }).expect(201)).body;
    const second = await createKey(t, first.key, { label: 'second admin', role: 'admin' });
    await t.http.delete(`/keys/${first.id}`).set(bearer(second.key)).expect(200);
    expectError(await t.http.post('/keys').send({ label: 'sneaky' }), 401, 'unauthorized');
    expect(await t.sql('SELECT 1 FROM tenants')).toHaveLength(1);
  });
});
