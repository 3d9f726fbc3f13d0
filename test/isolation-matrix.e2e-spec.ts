/**
 * Tenant isolation matrix: a second tenant's admin key tries every route that names an item,
 * type, edge, edge type, blob, bulk job or user of the first tenant, taken from GET /openapi.json so that new
 * routes join the matrix by themselves. Each attempt must be a 404 that says nothing more, and
 * list routes must never show the first tenant's objects. Finally the first tenant's objects
 * must be unchanged.
 */
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';

type Method = 'get' | 'head' | 'patch' | 'delete' | 'post' | 'put';

/** Valid bodies, so that a 404 cannot be explained by a validation failure. */
const BODIES: Record<string, Record<string, unknown>> = {
  'patch /items/{id}': { version: 1, properties: { title: 'stolen' } },
  'patch /items/{id}/metadata': { tags: ['stolen'] },
  'patch /types/{name}': { schema: { type: 'object', properties: { a: { type: 'string' } } } },
  'post /items/{id}/versions/{version}/restore': { version: 1 },
};

/** Path prefixes whose routes hold tenant objects. */
const SCOPED = /^\/(items|types|edges|edge-types|blobs|users)\b/;

describe('tenant isolation matrix (e2e)', () => {
  let t: TestApp;
  let owner: string;
  let intruder: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    t = await startApp();
    owner = (await bootstrapAdmin(t)).key;
    intruder = (await createTenant(t, owner, 'intruder')).key;
    const as = (path: string, body: object) => t.http.post(path).set(bearer(owner)).send(body);
    await as('/types', { name: 'acme.secret', schema: { type: 'object', properties: { title: { type: 'string' } } } }).expect(201);
    await as('/edge-types', { name: 'acme.links', source_types: ['*'], target_types: ['*'] }).expect(201);
    const a = await as('/items', { type: 'acme.secret', properties: { title: 'alpha secret' }, tags: ['x'] }).expect(201);
    const b = await as('/items', { type: 'core.note', properties: { title: 'beta secret' } }).expect(201);
    const e = await as('/edges', { type: 'acme.links', source_id: a.body.id, target_id: b.body.id }).expect(201);
    const blob = await t.http.post('/blobs').set(bearer(owner)).set('Content-Type', 'text/plain').send('top secret bytes').expect(201);
    const job = await as('/items/bulk_action', { action: 'update_tier', tier: 'feed', filter: { tags: ['matches-nothing'] }, async: true }).expect(202);
    const user = await as('/users', { email: 'owner@example.com', password: 'a long password', name: 'Owner' }).expect(201);
    Object.assign(ids, { itemA: a.body.id, itemB: b.body.id, edge: e.body.id, hash: blob.body.hash, job: job.body.id, user: user.body.id });
  });
  afterAll(() => t.close());

  function concrete(path: string): string {
    return path
      .replace('/edge-types/{name}', '/edge-types/acme.links')
      .replace('/types/{name}', '/types/acme.secret')
      .replace('/edges/{id}', `/edges/${ids.edge}`)
      .replace('/blobs/{hash}', `/blobs/${ids.hash}`)
      .replace('/items/bulk_action/jobs/{id}', `/items/bulk_action/jobs/${ids.job}`)
      .replace('/users/{id}', `/users/${ids.user}`)
      // A well-formed grant id: the owner's user is what the intruder must not reach.
      .replace('{grant_id}', 'G'.repeat(43))
      .replace('{version}', '1')
      .replace('/items/{id}', `/items/${ids.itemA}`);
  }

  it('answers 404 to every object route of the other tenant', async () => {
    const doc = (await t.http.get('/openapi.json').expect(200)).body as { paths: Record<string, Record<string, unknown>> };
    const attempts: Array<{ method: Method; path: string }> = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      if (!SCOPED.test(path) || !path.includes('{')) continue;
      for (const method of Object.keys(ops) as Method[]) attempts.push({ method, path });
    }
    // Every kind of object is in the matrix.
    const kinds = new Set(attempts.map((a) => a.path.split('/')[1]));
    expect([...kinds].sort()).toEqual(['blobs', 'edge-types', 'edges', 'items', 'types', 'users']);

    const failures: string[] = [];
    for (const { method, path } of attempts) {
      const url = concrete(path);
      const req = t.http[method](url).set(bearer(intruder));
      const body = BODIES[`${method} ${path}`];
      const res = await (body ? req.send(body) : method === 'post' || method === 'patch' ? req.send({}) : req);
      // The request's own path may be echoed back; the owner's data and tenant id may not.
      const leaked = method !== 'head' && /alpha secret|beta secret|top secret/.test(JSON.stringify(res.body ?? {}));
      if (res.status !== 404 || leaked) failures.push(`${method.toUpperCase()} ${path} -> ${res.status} ${JSON.stringify(res.body)}`);
      else if (method !== 'head') expect(res.body.error.code).toMatch(/not_found$/);
    }
    expect(failures).toEqual([]);
    expect(attempts.length).toBeGreaterThanOrEqual(15);
  });

  it('never lists the other tenant\'s objects', async () => {
    const lists = ['/items', '/items?state=all', '/types', '/edge-types', '/search?q=secret', `/items?edge=acme.links:${ids.itemB}`, '/items/bulk_action/jobs', '/users'];
    for (const path of lists) {
      const res = await t.http.get(path).set(bearer(intruder));
      expect([200, 403]).toContain(res.status);
      expect(JSON.stringify(res.body)).not.toMatch(/secret|acme\.links/);
      for (const id of [ids.itemA, ids.job, ids.user]) expect(JSON.stringify(res.body)).not.toContain(id);
      expect(JSON.stringify(res.body)).not.toContain('owner@example.com');
    }
  });

  it('leaves the owner\'s objects untouched', async () => {
    const item = await t.http.get(`/items/${ids.itemA}`).set(bearer(owner)).expect(200);
    expect(item.body).toMatchObject({ state: 'active', version: 1, properties: { title: 'alpha secret' }, tags: ['x'] });
    expect(item.body.edges).toEqual({ 'acme.links': [ids.itemB] });
    await t.http.get(`/types/acme.secret`).set(bearer(owner)).expect(200);
    await t.http.get(`/edges/${ids.edge}`).set(bearer(owner)).expect(200);
    const blob = await t.http.get(`/blobs/${ids.hash}`).set(bearer(owner)).buffer(true).parse((res, cb) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => cb(null, Buffer.concat(chunks)));
    });
    expect(blob.status).toBe(200);
    expect((blob.body as Buffer).toString()).toBe('top secret bytes');
  });
});
