/**
 * One tenant's requests hold at most their share of the main database pool on an instance
 * (src/database/tenant-shared-pool.ts): another tenant's request still finds a connection, and
 * the first tenant's further requests wait their turn, then are refused as a full pool's are.
 */
import { Client } from 'pg';
import type { Response } from 'supertest';
import { DataSource } from 'typeorm';
import { requestTenant } from '../src/common/tenant-context';
import { POOL_SIZE } from '../src/database/data-source-options';
import { tenantShare, TenantSharedPool } from '../src/database/tenant-shared-pool';
import { bearer, bootstrapAdmin, createTenant, PG_SERVER, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';
import { waitFor } from './support/wait';

describe('a tenant\'s share of the main pool', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startApp();
  });
  afterAll(() => t.close());

  it('leaves connections for another tenant while one tenant\'s requests wait on a lock, and holds that tenant\'s further requests back', async () => {
    const big = await bootstrapAdmin(t);
    const small = await createTenant(t, big.key);
    const body = { type: 'core.note', source_id: 'held', properties: { title: 'held' } };
    expect((await t.http.post('/items').set(bearer(big.key)).send(body)).status).toBe(201);
    const pool = (t.app.get(DataSource).driver as unknown as { master: Partial<TenantSharedPool> }).master;
    const database = new URL(t.databaseUrl).pathname.slice(1);
    // A session of its own holds the item: every write of it waits, each on a connection of the pool.
    const holder = new Client({ connectionString: `${PG_SERVER}/${database}` });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM items WHERE source_id = 'held' FOR UPDATE`);
      const answered: Response[] = [];
      const writes = Array.from({ length: POOL_SIZE }, () =>
        t.http
          .post('/items')
          .set(bearer(big.key))
          .send(body)
          .then((res) => (answered.push(res), res)),
      );
      // Not asked of the holder, whose transaction would see the first answer again.
      const onLock = async () =>
        Number((await t.sql<{ n: string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, [database]))[0].n);
      // Every write either waits on the lock, holding a connection, or waits for its tenant's turn at one.
      await waitFor(async () => (await onLock()) + (pool.waiting?.(big.tenantId) ?? 0) === POOL_SIZE, 'every write waiting');
      const list = await t.http.get('/items?limit=10').set(bearer(small.key));
      expect(list.status).toBe(200);
      const past = POOL_SIZE - tenantShare(POOL_SIZE);
      expect([await onLock(), pool.waiting?.(big.tenantId)]).toEqual([POOL_SIZE - past, past]);

      // The writes past the share never get a connection while the others hold theirs: refused
      // once they waited as long as for a full pool.
      await waitFor(() => answered.length === past, 'the writes past the share answered');
      for (const res of answered) {
        expectError(res, 503, 'service_unavailable');
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
      }
      await holder.query('ROLLBACK');
      expect((await Promise.all(writes)).map((res) => res.status).sort()).toEqual([...Array(past).fill(503), ...Array(POOL_SIZE - past).fill(200)].sort());
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  });
});

describe('TenantSharedPool', () => {
  // A pool of 5 keeps 4 for other tenants: each tenant's requests hold 1 connection at once.
  const pool = new TenantSharedPool({ connectionString: `${PG_SERVER}/postgres`, max: 5, connectionTimeoutMillis: 10_000 });
  afterAll(() => pool.end());

  it('lets a request that holds a connection take another, queues the tenant\'s other requests, and serves other tenants and background work', async () => {
    expect(tenantShare(5)).toBe(1);
    const request = { tenantId: 'a' };
    const [first, second] = await requestTenant.run(request, async () => {
      const first = await pool.connect();
      // Beside the first, as a query outside a request's open transaction: not a second turn.
      return [first, await pool.connect()];
    });
    let next: Promise<Client> | undefined;
    requestTenant.run({ tenantId: 'a' }, () => {
      next = pool.connect();
    });
    await waitFor(() => pool.waiting('a') === 1, 'the tenant\'s next request waiting');

    const other = await requestTenant.run({ tenantId: 'b' }, () => pool.query('SELECT 1 AS one'));
    expect(other.rows).toEqual([{ one: 1 }]);
    expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    expect(pool.waiting('a')).toBe(1);

    first.release();
    expect(pool.waiting('a')).toBe(1); // the request still holds a connection
    second.release();
    const third = await next!;
    expect((await third.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    (third as unknown as { release(): void }).release();
  });
});
