/**
 * GET /items filters whose plans must not walk the whole tenant: an edge clause that matches
 * few edges or none (item-filter.ts FEW_EDGE_MATCHES), and a type that the caller's permitted
 * types exclude. The answers are checked over HTTP; the plans with EXPLAIN ANALYZE of the
 * statement the service builds (filterFor + itemWhere), after ANALYZE.
 */
import { Principal } from '../../src/auth/principal';
import { FEW_EDGE_MATCHES, itemWhere } from '../../src/items/item-filter';
import { ItemsService } from '../../src/items/items.service';
import { bootstrapAdmin, createKey, startApp, TestApp } from '../support/app';
import { PlanNode, rowsRead, scans } from '../support/plans';
import { Api, api, createItem, expectStatus, note } from './helpers';

const ids = (res: { body: { items: Array<{ id: string }> } }) => res.body.items.map((i) => i.id);

describe('items: filters that select few items or none', () => {
  let t: TestApp;
  let tenantId: string;
  let adminKey: string;
  let admin: Api;
  let hub: string; // many acme.cat edges point to it, no acme.rel one
  let few: string; // a few acme.rel edges point to it
  let citing: string[];
  const MANY = FEW_EDGE_MATCHES + 500;

  const principal = (over: Partial<Principal> = {}): Principal => ({
    tenantId,
    credentialId: 'plan-test',
    kind: 'api_key',
    role: 'admin',
    isRootTenant: false,
    source: 'plan-test',
    defaultTier: 'library',
    typePerms: {},
    extensionPerms: {},
    edgePerms: {},
    ...over,
  });

  /** The plan of the page query for `query`, as the service builds it for `p`. */
  async function pagePlan(p: Principal, query: Record<string, string>): Promise<PlanNode> {
    const filter = await t.app.get(ItemsService).filterFor(p, query);
    const params: unknown[] = [];
    const where = itemWhere(p.tenantId, filter, params);
    const [{ 'QUERY PLAN': [plan] }] = await t.sql<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) SELECT i.id FROM items i WHERE ${where} ORDER BY i.created_at DESC, i.id DESC LIMIT 51`,
      params,
    );
    return plan.Plan;
  }
  const itemsRead = async (p: Principal, query: Record<string, string>) => rowsRead(await pagePlan(p, query), 'items');

  beforeAll(async () => {
    t = await startApp();
    const boot = await bootstrapAdmin(t);
    tenantId = boot.tenantId;
    adminKey = boot.key;
    admin = api(t, adminKey);
    for (const name of ['acme.cat', 'acme.rel']) expectStatus(await admin.post('/edge-types', { name, source_types: ['*'], target_types: ['*'] }), 201);
    hub = (await createItem(admin, note('hub'))).id;
    few = (await createItem(admin, note('few'))).id;
    const seed = (await createItem(admin, note('seed'))).id;
    citing = [];
    for (let n = 0; n < 3; n++) citing.push((await createItem(admin, note(`cites ${n}`, { edges: { 'acme.rel': [few] } }))).id);
    for (let n = 0; n < 2; n++) await createItem(admin, { type: 'core.contact', properties: { name: `contact ${n}` } });
    const other = (await createItem(admin, note('other'))).id;
    // A tenant of some thousands of items, older than those above, half of them contacts, most of
    // them in the hub's category and related to another item: PostgreSQL then expects thousands
    // of items to have an acme.rel edge to the hub (a guess from each column alone).
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, created_at, updated_at)
       SELECT tenant_id, gen_random_uuid(), CASE WHEN n % 2 = 0 THEN 'core.contact' ELSE type END, properties, state, source, "timestamp", tier,
              created_at - n * interval '1 second', updated_at
         FROM items, generate_series(1, $3::int + 1000) AS n WHERE tenant_id = $1 AND id = $2`,
      [tenantId, seed, MANY],
    );
    for (const [type, target] of [['acme.cat', hub], ['acme.rel', other]]) {
      await t.sql(
        `INSERT INTO edges (tenant_id, id, edge_type, source_id, target_id, created_by, created_at)
         SELECT tenant_id, gen_random_uuid(), $2, id, $3, 'plan-test', now()
           FROM items WHERE tenant_id = $1 AND id <> ALL($4::uuid[]) ORDER BY random() LIMIT $5`,
        [tenantId, type, target, [hub, few, seed, other, ...citing], MANY],
      );
    }
    await t.sql(`ANALYZE items`);
    await t.sql(`ANALYZE edges`);
  }, 120_000);
  afterAll(() => t?.close());

  it('edge=<type>:<item>: the same pages whether many, few or no edges match', async () => {
    const expected = async (type: string, target: string) =>
      (
        await t.sql<{ id: string }>(
          `SELECT i.id FROM items i JOIN edges e ON e.tenant_id = i.tenant_id AND e.source_id = i.id
            WHERE i.tenant_id = $1 AND e.edge_type = $2 AND e.target_id = $3 ORDER BY i.created_at DESC, i.id DESC LIMIT 100`,
          [tenantId, type, target],
        )
      ).map((r) => r.id);
    const many = await admin.get('/items', { edge: `acme.cat:${hub}`, limit: 100 });
    expectStatus(many, 200);
    expect(ids(many)).toEqual(await expected('acme.cat', hub));
    expect(ids(many)).toHaveLength(100);
    expect(ids(await admin.get('/items', { edge: `*:${hub}`, limit: 100 }))).toEqual(ids(many));
    expect((await admin.get('/items', { edge: `acme.rel:${hub}` })).body).toEqual({ items: [], next_cursor: null });
    expect(ids(await admin.get('/items', { edge: `acme.rel:${few}` }))).toEqual([...citing].reverse());
    expect(ids(await admin.get('/items', { edge: `*:${few}` }))).toEqual([...citing].reverse());
    expect(ids(await admin.get('/items', { backref: `acme.rel:${citing[0]}` }))).toEqual([few]);
    expect(ids(await admin.get('/items', { backref: `acme.cat:${citing[0]}` }))).toEqual([]);
  });

  it('an edge clause that matches no edge, or a few, reads only the items it keeps', async () => {
    expect(await itemsRead(principal(), { edge: `acme.rel:${hub}` })).toBe(0);
    expect(await itemsRead(principal(), { edge: `acme.rel:${few}` })).toBeLessThanOrEqual(3);
  });

  it("a member's type filter outside its permitted types: the empty page, and no scan of items", async () => {
    const member = api(t, (await createKey(t, adminKey, { role: 'member', type_permissions: { 'core.note': 'read' } })).key);
    expect((await member.get('/items', { type: 'core.contact' })).body).toEqual({ items: [], next_cursor: null });
    expect(scans(await pagePlan(principal({ role: 'member', typePerms: { 'core.note': 'read' } }), { type: 'core.contact' }), 'items')).toBe(0);
  });
});
