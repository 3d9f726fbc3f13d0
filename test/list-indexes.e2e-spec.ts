/**
 * Listings that must read about a page, not every row of the tenant, the webhook, the hub, the
 * user or the OAuth client (migrations 4400, 4600, 4700, 6400, 6500, 6900, 7000 and 7100): each request's own statement, caught on its way to PostgreSQL, explained
 * with the statistics autovacuum would have gathered (this machine runs without it). Plus what
 * the edge listing's rewrite (one branch per direction) must keep: order, cursor, both
 * directions, a self-edge once.
 */
import request from 'supertest';
import { DataSource } from 'typeorm';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { entriesRead, PlanNode, rowsRead } from './support/plans';
import { MEMBER_SCAN_EDGES } from '../src/edges/edges.service';
import { SearchStatements } from '../src/search/search-statements';

/** A parameter's value as SQL text, for EXECUTE (whose arguments are not bind parameters). */
function literal(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  const text = Array.isArray(v) ? `{${v.map((x) => `"${String(x).replace(/["\\]/g, '\\$&')}"`).join(',')}}` : String(v);
  return `'${text.replace(/'/g, "''")}'`;
}

describe('listings read about a page', () => {
  let t: TestApp;
  let admin: string;
  let tenantId: string;
  let small: { key: string; tenantId: string };
  /** Statements the service's main pool ran, from the moment `caught` is emptied. */
  const caught: Array<{ sql: string; params: unknown[] }> = [];

  beforeAll(async () => {
    t = await startApp();
    ({ key: admin, tenantId } = await bootstrapAdmin(t));
    small = await createTenant(t, admin, 'small');
    const db = t.app.get(DataSource);
    const query = db.query.bind(db);
    jest.spyOn(db, 'query').mockImplementation((sql, params, runner) => {
      caught.push({ sql, params: Array.isArray(params) ? params : [] });
      return query(sql, params, runner);
    });
  });
  afterAll(() => t.close());

  const note = async (key: string, body: Record<string, unknown> = {}) =>
    (await t.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties: { title: 'n' }, ...body }).expect(201)).body as { id: string };
  /** `count` more notes of the tenant, created `step` seconds apart going back from `from`. */
  const notes = (tenant: string, count: number, tags: string[], title = 'filler') =>
    t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'core.note', jsonb_build_object('title', $4 || ' ' || n), 'active', 's', now(), 'library', $3, now() - n * interval '1 second', now()
         FROM generate_series(1, $2::int) n`,
      [tenant, count, tags, title],
    );
  const explain = async (statement: { sql: string; params: unknown[] }) =>
    (await t.sql<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement.sql}`, statement.params))[0]['QUERY PLAN'][0].Plan;
  const statementOf = (table: RegExp) => {
    const found = caught.filter((s) => table.test(s.sql));
    expect(found).toHaveLength(1);
    return found[0];
  };

  it("a webhook's deliveries by status read the page, not the webhook's (or every tenant's) other deliveries", async () => {
    const webhook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: 'http://127.0.0.1:9/hook', events: ['item.created'] }).expect(201)).body as {
      id: string;
    };
    await t.sql(
      `INSERT INTO webhook_deliveries (tenant_id, id, webhook_id, event_id, event, status, attempts, created_at)
       SELECT $1, gen_random_uuid(), $2, gen_random_uuid(), 'item.created', CASE WHEN n % 500 = 0 THEN 'failed' ELSE 'succeeded' END, 1,
              date_trunc('milliseconds', now() - n * interval '1 second')
         FROM generate_series(1, 5000) n`,
      [tenantId, webhook.id],
    );
    await t.sql(`ANALYZE webhook_deliveries`);
    const page = async (limit: number, cursor?: string) => {
      caught.length = 0;
      const res = await t.http
        .get(`/webhooks/${webhook.id}/deliveries`)
        .query({ status: 'failed', limit, ...(cursor ? { cursor } : {}) })
        .set(bearer(admin))
        .expect(200);
      return { body: res.body as { deliveries: Array<{ status: string }>; next_cursor: string | null }, plan: await explain(statementOf(/FROM webhook_deliveries d/)) };
    };
    const first = await page(4);
    expect(first.body.deliveries.map((d) => d.status)).toEqual(['failed', 'failed', 'failed', 'failed']);
    expect(rowsRead(first.plan, 'webhook_deliveries')).toBeLessThan(20);
    const second = await page(10, first.body.next_cursor!);
    expect(second.body.deliveries.map((d) => d.status)).toEqual(Array(6).fill('failed'));
    expect(second.body.next_cursor).toBeNull();
    expect(rowsRead(second.plan, 'webhook_deliveries')).toBeLessThan(20);
  });

  it("a tags filter reads the tenant's own postings of the tag, not another tenant's", async () => {
    await notes(tenantId, 3000, ['inbox'], 'finka');
    await notes(small.tenantId, 40, ['inbox'], 'plain');
    await note(small.key, { properties: { title: 'finka0 here' }, tags: ['inbox'] });
    await t.sql(`ANALYZE items`);
    const statements = t.app.get(SearchStatements);
    const searched: Array<{ sql: string; params: unknown[] }> = [];
    const run = statements.query.bind(statements);
    const spy = jest.spyOn(statements, 'query').mockImplementation((tenant, statement) => {
      searched.push(statement);
      return run(tenant, statement);
    });
    try {
      const res = await t.http.get('/search').query({ q: 'finka0', tags: 'inbox' }).set(bearer(small.key)).expect(200);
      expect(res.body.results.map((r: { item: { properties: { title: string } } }) => r.item.properties.title)).toEqual(['finka0 here']);
    } finally {
      spy.mockRestore();
    }
    // As the search pool plans it: generically, the tenant unknown to the plan.
    const [search] = searched;
    await t.sql(`SET plan_cache_mode = force_generic_plan`);
    try {
      await t.sql(`PREPARE tagged AS ${search.sql}`);
      const [{ 'QUERY PLAN': [{ Plan: plan }] }] = await t.sql<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE tagged(${search.params.map(literal).join(', ')})`,
      );
      expect(entriesRead(plan, /^items_tags/)).toBeLessThan(100);
    } finally {
      await t.sql(`DEALLOCATE ALL`);
      await t.sql(`RESET plan_cache_mode`);
    }
  });

  it('items of every state read a page', async () => {
    await notes(tenantId, 2000, []);
    await t.sql(`UPDATE items SET state = 'archived' WHERE tenant_id = $1 AND id IN (SELECT id FROM items WHERE tenant_id = $1 LIMIT 500)`, [tenantId]);
    await t.sql(`ANALYZE items`);
    caught.length = 0;
    const res = await t.http.get('/items').query({ state: 'all', limit: 10 }).set(bearer(admin)).expect(200);
    expect(res.body.items).toHaveLength(10);
    expect(rowsRead(await explain(statementOf(/FROM items i WHERE/)), 'items')).toBeLessThan(40);
  });

  it('a since/until window far from the newest items reads the window, not the tenant; a wide one still reads a page', async () => {
    // Timestamps that follow creation, as most items' do: the window's 1,500 items lie behind
    // 10,000 newer ones in the list's created_at order.
    const base = Date.parse('2020-01-01T00:00:00Z');
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'core.note', jsonb_build_object('title', 'dated ' || n), 'active', 's', $2::timestamptz - n * interval '1 second', 'library', '{}',
              date_trunc('milliseconds', now()) - interval '1 day' - n * interval '1 second', now()
         FROM generate_series(1, 12000) n`,
      [tenantId, new Date(base).toISOString()],
    );
    await t.sql(`VACUUM ANALYZE items`);
    const window = { since: new Date(base - 11500 * 1000).toISOString(), until: new Date(base - 10000 * 1000).toISOString() };
    const expected = (
      await t.sql<{ id: string }>(
        `SELECT id FROM items WHERE tenant_id = $1 AND state = 'active' AND "timestamp" >= $2 AND "timestamp" < $3 ORDER BY created_at DESC, id DESC LIMIT 20`,
        [tenantId, window.since, window.until],
      )
    ).map((r) => r.id);
    const listing = /FROM items i WHERE|JOIN items i ON/;
    const page = async (query: Record<string, string | number>) => {
      caught.length = 0;
      const res = await t.http.get('/items').query(query).set(bearer(admin)).expect(200);
      return { body: res.body as { items: Array<{ id: string }>; next_cursor: string }, plan: await explain(statementOf(listing)) };
    };
    const first = await page({ ...window, limit: 10 });
    expect(first.body.items.map((i) => i.id)).toEqual(expected.slice(0, 10));
    expect(rowsRead(first.plan, 'items')).toBeLessThan(1600);
    const second = await page({ ...window, limit: 10, cursor: first.body.next_cursor });
    expect(second.body.items.map((i) => i.id)).toEqual(expected.slice(10, 20));
    expect(rowsRead(second.plan, 'items')).toBeLessThan(1600);
    const wide = await page({ since: new Date(base - 20000 * 1000).toISOString(), limit: 10 });
    expect(wide.body.items).toHaveLength(10);
    expect(rowsRead(wide.plan, 'items')).toBeLessThan(40);
  });

  it('every sort reads about a page, first and at a cursor; a window on another column than the order reads the window (migration 6500)', async () => {
    // 20,000 items whose created_at, timestamp and updated_at orders all differ (each a permutation).
    const { key, tenantId: sortedTenant } = await createTenant(t, admin, 'sorted');
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'core.note', jsonb_build_object('title', 'sorted ' || n), 'active', 's',
              date_trunc('milliseconds', now()) - ((n * 7919) % 20000) * interval '1 second', 'library', '{}',
              date_trunc('milliseconds', now()) - n * interval '1 second',
              date_trunc('milliseconds', now()) - ((n::bigint * 104729) % 20000) * interval '1 second'
         FROM generate_series(1, 20000) n`,
      [sortedTenant],
    );
    await t.sql(`VACUUM ANALYZE items`);
    const listing = /FROM items i WHERE|JOIN items i ON/;
    const page = async (query: Record<string, string | number>) => {
      caught.length = 0;
      const res = await t.http.get('/items').query(query).set(bearer(key)).expect(200);
      return { body: res.body as { items: Array<{ id: string }>; next_cursor: string }, read: rowsRead(await explain(statementOf(listing)), 'items') };
    };
    for (const sort of ['created_at', '-created_at', 'updated_at', '-updated_at', 'timestamp', '-timestamp']) {
      const first = await page({ sort, limit: 10 });
      const second = await page({ sort, limit: 10, cursor: first.body.next_cursor });
      expect([sort, first.body.items.length, second.body.items.length, first.read < 40, second.read < 40]).toEqual([sort, 10, 10, true, true]);
    }
    // A window of 1,500 items on another column than the order's: read from that column's index, not walked to.
    const ago = async (seconds: number) => (await t.sql<{ at: Date }>(`SELECT now() - $1 * interval '1 second' AS at`, [seconds]))[0].at.toISOString();
    const windows: Array<Record<string, string>> = [
      { sort: '-updated_at', since: await ago(16500), until: await ago(15000) },
      { sort: '-created_at', updated_since: await ago(16500), updated_until: await ago(15000) },
      { sort: 'timestamp', updated_since: await ago(5000), updated_until: await ago(3500) },
    ];
    for (const window of windows) {
      const first = await page({ ...window, limit: 10 });
      expect([window, first.body.items.length, first.read < 1600]).toEqual([window, 10, true]);
    }
  });

  it('sort=timestamp reads about a page inside a long run of one timestamp, both ways (migration 6900)', async () => {
    // An import stamps thousands of items with one instant: the order goes on by id within it.
    const { key, tenantId: runTenant } = await createTenant(t, admin, 'one-instant');
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'core.note', jsonb_build_object('title', 'run ' || n), 'active', 's',
              timestamptz '2026-01-01T00:00:00Z', 'library', '{}', now() - n * interval '1 second', now()
         FROM generate_series(1, 5000) n`,
      [runTenant],
    );
    await t.sql(`VACUUM ANALYZE items`);
    const listing = /FROM items i WHERE|JOIN items i ON/;
    for (const sort of ['timestamp', '-timestamp']) {
      let cursor: string | undefined;
      // Half way into the run: the page's cursor sits on the shared instant.
      for (let n = 0; n < 25; n++) {
        const res = await t.http.get('/items').query({ sort, limit: 100, ...(cursor ? { cursor } : {}) }).set(bearer(key)).expect(200);
        cursor = res.body.next_cursor;
      }
      caught.length = 0;
      const res = await t.http.get('/items').query({ sort, limit: 10, cursor }).set(bearer(key)).expect(200);
      const read = rowsRead(await explain(statementOf(listing)), 'items');
      expect([sort, res.body.items.length, read < 40]).toEqual([sort, 10, true]);
    }
  });

  it('tenants read a page, at a deep cursor too', async () => {
    await t.sql(
      `INSERT INTO tenants (id, name, is_root, created_at) SELECT gen_random_uuid(), 'filler ' || n, false, now() - n * interval '1 second' FROM generate_series(1, 3000) n`,
    );
    await t.sql(`ANALYZE tenants`);
    const page = async (cursor?: string) => {
      caught.length = 0;
      const res = await t.http.get('/tenants').query({ limit: 10, ...(cursor ? { cursor } : {}) }).set(bearer(admin)).expect(200);
      expect(res.body.tenants).toHaveLength(10);
      expect(rowsRead(await explain(statementOf(/FROM tenants/)), 'tenants')).toBeLessThan(40);
      return res.body.next_cursor as string;
    };
    let cursor = await page();
    for (let i = 0; i < 100; i++) cursor = (await t.http.get('/tenants').query({ limit: 20, cursor }).set(bearer(admin)).expect(200)).body.next_cursor;
    await page(cursor);
  });

  it("a client's update and deletion read its own OAuth rows, not every client's", async () => {
    // Other clients' grants and client-credentials tokens, as a busy provider holds them.
    await t.sql(
      `INSERT INTO oidc_models (model, id, payload, expires_at)
       SELECT m, m || n, jsonb_build_object('clientId', 'other' || (n % 500), 'accountId', 'user' || n, 'iat', 1700000000 + n), now() + interval '1 day'
         FROM generate_series(1, 5000) n, unnest(ARRAY['Grant', 'ClientCredentials', 'AccessToken']) m`,
    );
    await t.sql(`ANALYZE oidc_models`);
    const client = (
      await t.http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'indexed', grant_types: ['client_credentials'], scope: 'core.note:read core.note:write' })
        .expect(201)
    ).body as { client_id: string };
    const byClient = /FROM oidc_models WHERE .*payload->>'clientId' = (ANY\(\$1::text\[\]\)|\$1)/;
    /** Rows each statement by client of `request` reads, explained after it ran (again: what it changed is done). */
    const readBy = async (request: () => Promise<unknown>) => {
      caught.length = 0;
      await request();
      const statements = caught.filter((s) => byClient.test(s.sql));
      return Promise.all(statements.map(async (s) => [s.sql, rowsRead(await explain(s), 'oidc_models')]));
    };
    const update = await readBy(() => t.http.patch(`/auth/clients/${client.client_id}`).set(bearer(admin)).send({ scope: 'core.note:read' }).expect(200));
    const deletion = await readBy(() => t.http.delete(`/auth/clients/${client.client_id}`).set(bearer(admin)).expect(200));
    // Its grants to narrow and its unexchanged codes; then its grants and the rows it holds without one.
    expect([update.length, deletion.length]).toEqual([2, 2]);
    for (const [sql, read] of [...update, ...deletion]) expect([sql, read]).toEqual([sql, 0]);
  });

  it("a user's grants and sessions (the account pages' lists) read a page, at a deep cursor too, not every one of the user's", async () => {
    const email = 'many@lists.example';
    const user = (await t.http.post('/users').set(bearer(admin)).send({ email, password: 'a long enough password', name: 'Many' }).expect(201)).body as { id: string };
    // 3000 grants and sessions of theirs, three to a second, and as many of other users'.
    await t.sql(
      `INSERT INTO oidc_models (model, id, payload, expires_at)
       SELECT m, m || a || '-' || n, jsonb_build_object('kind', m, 'jti', m || a || '-' || n, 'accountId', CASE a WHEN 0 THEN $1 ELSE 'other' || n END,
                'clientId', 'c' || n, 'iat', 1700000000 + n / 3, 'loginTs', 1700000000 + n / 3, 'exp', 1900000000), now() + interval '1 day'
         FROM generate_series(1, 3000) n, generate_series(0, 1) a, unnest(ARRAY['Grant', 'Session']) m`,
      [user.id],
    );
    await t.sql(`ANALYZE oidc_models`);
    const agent = request.agent(t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/grants').expect(200);
    const csrf = /name="csrf" value="([^"]*)"/.exec(form.text)![1];
    await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf, email, password: 'a long enough password' }).expect(303);
    for (const [path, key, statement] of [['/auth/grants', 'grants', /AS iat FROM oidc_models/], ['/auth/sessions', 'sessions', /AS signed_in, /]] as const) {
      /** A page at `cursor`: its rows and cursor, and how many rows its statement read. */
      const page = async (limit: number, cursor?: string) => {
        caught.length = 0;
        const body = (await agent.get(path).query({ limit, ...(cursor ? { cursor } : {}) }).set('Accept', 'application/json').expect(200)).body;
        return { rows: body[key] as unknown[], next: body.next_cursor as string, read: rowsRead(await explain(statementOf(statement)), 'oidc_models') };
      };
      let at = await page(10);
      expect([path, at.rows.length]).toEqual([path, 10]);
      expect(at.read).toBeLessThan(40);
      for (let i = 0; i < 20; i++) at = await page(100, at.next);
      const deep = await page(10, at.next);
      expect([path, deep.rows.length]).toEqual([path, 10]);
      expect(deep.read).toBeLessThan(40);
    }
  });

  it("a client's grants (GET /auth/clients/{client_id}/grants) read about a page, at a cursor too, not every one of the client's (migration 7100)", async () => {
    const client = (
      await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'popular', grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)
    ).body as { client_id: string };
    const users: string[] = [];
    for (const name of ['one', 'two', 'three']) {
      users.push((await t.http.post('/users').set(bearer(admin)).send({ email: `${name}@popular.example`, password: 'a long enough password', name }).expect(201)).body.id);
    }
    const stranger = (await t.http.post('/users').set(bearer(small.key)).send({ email: 'stranger@popular.example', password: 'a long enough password', name: 'S' }).expect(201))
      .body.id as string;
    // 400 grants of the client, one in ten a user of another tenant's, and as many of other clients'.
    await t.sql(
      `INSERT INTO oidc_models (model, id, payload, expires_at)
       SELECT 'Grant', 'popular' || c || '-' || n, jsonb_build_object('kind', 'Grant', 'jti', 'popular' || c || '-' || n,
                'accountId', CASE WHEN n % 10 = 0 THEN $2 ELSE ($1::text[])[1 + n % 3] END,
                'clientId', CASE c WHEN 0 THEN $3 ELSE 'elsewhere' || n END, 'iat', 1700000000 + n, 'exp', 1900000000), now() + interval '1 day'
         FROM generate_series(1, 400) n, generate_series(0, 1) c`,
      [users, stranger, client.client_id],
    );
    await t.sql(`ANALYZE oidc_models`);
    const page = async (limit: number, cursor?: string) => {
      caught.length = 0;
      const body = (await t.http.get(`/auth/clients/${client.client_id}/grants`).query({ limit, ...(cursor ? { cursor } : {}) }).set(bearer(admin)).expect(200)).body;
      const plan = await explain(statementOf(/AS user_id, /));
      return { grants: body.grants as Array<{ user_id: string }>, next: body.next_cursor as string, read: rowsRead(plan, 'oidc_models') };
    };
    const first = await page(5);
    expect(first.grants).toHaveLength(5);
    expect(first.read).toBeLessThan(20);
    let at = first;
    for (let i = 0; i < 3; i++) at = await page(50, at.next);
    const deep = await page(5, at.next);
    expect(deep.grants).toHaveLength(5);
    expect(deep.grants.every((g) => users.includes(g.user_id))).toBe(true);
    expect(deep.read).toBeLessThan(20);
  });

  it("the tenant's edges (GET /edges) read about a page, at a deep cursor and for a rare edge type too (migration 7000)", async () => {
    const { key, tenantId: graph } = await createTenant(t, admin, 'graph');
    for (const name of ['g.common', 'g.rare']) {
      await t.http.post('/edge-types').set(bearer(key)).send({ name, source_types: ['*'], target_types: ['*'] }).expect(201);
    }
    await notes(graph, 200, []);
    // 20,000 edges of g.common, newer than the 20 of g.rare: a page of g.rare walked in the
    // tenant's order would read past all of them.
    await t.sql(
      `WITH n AS (SELECT id, row_number() OVER (ORDER BY id) AS k FROM items WHERE tenant_id = $1)
       INSERT INTO edges (tenant_id, id, edge_type, source_id, target_id, created_by, created_at)
       SELECT $1, gen_random_uuid(), CASE WHEN a.k = 1 AND b.k <= 20 THEN 'g.rare' ELSE 'g.common' END, a.id, b.id, 'test',
              date_trunc('milliseconds', now()) - (CASE WHEN a.k = 1 AND b.k <= 20 THEN 100000 ELSE 0 END + a.k * 200 + b.k) * interval '1 second'
         FROM n a JOIN n b ON b.k <= 100 OR (a.k = 1 AND b.k <= 20)`,
      [graph],
    );
    await t.sql(`VACUUM ANALYZE edges`);
    const page = async (query: Record<string, string | number>) => {
      caught.length = 0;
      const body = (await t.http.get('/edges').query(query).set(bearer(key)).expect(200)).body as { edges: unknown[]; next_cursor: string };
      return { body, read: rowsRead(await explain(statementOf(/FROM edges e/)), 'edges') };
    };
    for (const type of [undefined, 'g.rare']) {
      const query: Record<string, string> = type ? { type } : {};
      let at = await page({ ...query, limit: 5 });
      expect([type, at.body.edges.length, at.read < 40]).toEqual([type, 5, true]);
      at = await page({ ...query, limit: 5, cursor: at.body.next_cursor });
      expect([type, at.body.edges.length, at.read < 40]).toEqual([type, 5, true]);
    }

    // A member who may read every edge reads about a page too; one who may read only the 20 oldest
    // edges reads at most MEMBER_SCAN_EDGES a page, in short pages with a cursor, and finds them all.
    const everything = (await createKey(t, key, { role: 'member', type_permissions: { '*': 'read' }, edge_permissions: { '*': 'read' } })).key;
    const rareOnly = (await createKey(t, key, { role: 'member', type_permissions: { '*': 'read' }, edge_permissions: { 'g.rare': 'read' } })).key;
    const memberPage = async (member: string, query: Record<string, string | number>) => {
      caught.length = 0;
      const body = (await t.http.get('/edges').query(query).set(bearer(member)).expect(200)).body as { edges: Array<{ id: string; type: string }>; next_cursor: string | null };
      return { body, read: rowsRead(await explain(statementOf(/FROM edges e/)), 'edges') };
    };
    let at = await memberPage(everything, { limit: 5 });
    expect([at.body.edges.length, at.read < 40]).toEqual([5, true]);
    at = await memberPage(everything, { limit: 5, cursor: at.body.next_cursor! });
    expect([at.body.edges.length, at.read < 40]).toEqual([5, true]);
    const found: string[] = [];
    const reads: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await memberPage(rareOnly, { limit: 50, ...(cursor ? { cursor } : {}) });
      found.push(...res.body.edges.map((e) => e.type));
      reads.push(res.read);
      cursor = res.body.next_cursor;
    } while (cursor && reads.length < 10);
    expect([found.length, new Set(found)]).toEqual([20, new Set(['g.rare'])]);
    expect(reads.length).toBeGreaterThan(1);
    expect(Math.max(...reads)).toBeLessThanOrEqual(MEMBER_SCAN_EDGES + 1);
  });

  describe("an item's edges", () => {
    let hub: string;
    let out: string[];
    let incoming: string[];
    let self: string;

    beforeAll(async () => {
      await t.http.post('/edge-types').set(bearer(admin)).send({ name: 'test.links', source_types: ['*'], target_types: ['*'] }).expect(201);
      hub = (await note(admin)).id;
      // Others' edges, and edges into and out of the hub, interleaved in time.
      await notes(tenantId, 600, []);
      const edge = (source: string, target: string, secondsAgo: number) =>
        t.sql<{ id: string }>(
          `INSERT INTO edges (tenant_id, id, edge_type, source_id, target_id, created_by, created_at)
           VALUES ($1, gen_random_uuid(), 'test.links', $2, $3, 'test', date_trunc('milliseconds', now()) - $4 * interval '1 second') RETURNING id`,
          [tenantId, source, target, secondsAgo],
        );
      const others = (await t.sql<{ id: string }>(`SELECT id FROM items WHERE tenant_id = $1 AND id <> $2 ORDER BY created_at DESC LIMIT 600`, [tenantId, hub])).map((r) => r.id);
      out = [];
      incoming = [];
      for (let n = 0; n < 30; n++) out.push((await edge(hub, others[n], n * 20 + 5))[0].id);
      await t.sql(
        `INSERT INTO edges (tenant_id, id, edge_type, source_id, target_id, created_by, created_at)
         SELECT $1, gen_random_uuid(), 'test.links', o, $2, 'test', date_trunc('milliseconds', now()) - (n + 1) * interval '1 second'
           FROM unnest($3::uuid[]) WITH ORDINALITY AS x(o, n)`,
        [tenantId, hub, others],
      );
      await t.sql(
        `INSERT INTO edges (tenant_id, id, edge_type, source_id, target_id, created_by, created_at)
         SELECT $1, gen_random_uuid(), 'test.links', a, b, 'test', now() - n * interval '1 second'
           FROM unnest($2::uuid[], $3::uuid[]) WITH ORDINALITY AS x(a, b, n)`,
        [tenantId, others.slice(0, 599), others.slice(1)],
      );
      self = (await edge(hub, hub, 7))[0].id;
      incoming = (await t.sql<{ id: string }>(`SELECT id FROM edges WHERE target_id = $1 AND source_id <> $1`, [hub])).map((r) => r.id);
      await t.sql(`ANALYZE edges`);
    });

    /** Every page of the listing; the plan of the last page's statement. */
    const all = async (query: Record<string, string | number>) => {
      const ids: string[] = [];
      const dates: string[] = [];
      let cursor: string | null = null;
      let plan: PlanNode | undefined;
      do {
        caught.length = 0;
        const res: { body: { edges: Array<{ id: string; created_at: string }>; next_cursor: string | null } } = await t.http
          .get(`/items/${hub}/edges`)
          .query({ ...query, ...(cursor ? { cursor } : {}) })
          .set(bearer(admin))
          .expect(200);
        ids.push(...res.body.edges.map((e) => e.id));
        dates.push(...res.body.edges.map((e) => e.created_at));
        cursor = res.body.next_cursor;
        plan = await explain(statementOf(/FROM edges e/));
      } while (cursor);
      return { ids, dates, plan: plan! };
    };

    it('lists both directions newest first, page by page, the self-edge once, reading about a page each time', async () => {
      const both = await all({ limit: 25 });
      expect(both.ids).toHaveLength(out.length + incoming.length + 1);
      expect(new Set(both.ids)).toEqual(new Set([...out, ...incoming, self]));
      expect([...both.dates].sort().reverse()).toEqual(both.dates);
      // The first page: the newest 25 of 631, read from the two ends of the indexes.
      caught.length = 0;
      await t.http.get(`/items/${hub}/edges`).query({ limit: 25 }).set(bearer(admin)).expect(200);
      expect(rowsRead(await explain(statementOf(/FROM edges e/)), 'edges')).toBeLessThan(60);
    });

    it('lists one direction, the self-edge in each', async () => {
      const outgoing = await all({ direction: 'outgoing', limit: 7 });
      expect(new Set(outgoing.ids)).toEqual(new Set([...out, self]));
      expect(outgoing.ids).toHaveLength(out.length + 1);
      const inward = await all({ direction: 'incoming', limit: 50 });
      expect(new Set(inward.ids)).toEqual(new Set([...incoming, self]));
      expect(inward.ids).toHaveLength(incoming.length + 1);
      expect([...inward.dates].sort().reverse()).toEqual(inward.dates);
    });

    it('filtered by edge type, lists that type only', async () => {
      await t.http.post('/edge-types').set(bearer(admin)).send({ name: 'test.other', source_types: ['*'], target_types: ['*'] }).expect(201);
      const [other] = await t.sql<{ id: string }>(
        `INSERT INTO edges (tenant_id, id, edge_type, source_id, target_id, created_by, created_at)
         VALUES ($1, gen_random_uuid(), 'test.other', $2, $2, 'test', now()) RETURNING id`,
        [tenantId, hub],
      );
      const links = (await t.http.get(`/items/${hub}/edges`).query({ limit: 5, type: 'test.links' }).set(bearer(admin)).expect(200)).body;
      expect(links.edges.map((e: { type: string }) => e.type)).toEqual(Array(5).fill('test.links'));
      const others = (await t.http.get(`/items/${hub}/edges`).query({ type: 'test.other' }).set(bearer(admin)).expect(200)).body;
      expect(others.edges.map((e: { id: string }) => e.id)).toEqual([other.id]);
    });
  });
});
