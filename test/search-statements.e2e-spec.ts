/**
 * SearchStatements against a real PostgreSQL: its sessions plan generically, a statement
 * shape is prepared once per connection and runs with each call's parameters, the shapes
 * a connection prepares are bounded, and so are the searches running at once, and a tenant's
 * share of them.
 */
import { Client } from 'pg';
import { ApiError } from '../src/common/api-error';
import { SearchStatements } from '../src/search/search-statements';
import { PG_SERVER } from './support/app';
import { waitFor } from './support/wait';

const TENANT = '00000000-0000-4000-8000-000000000001';
const OTHER_TENANT = '00000000-0000-4000-8000-000000000002';

describe('SearchStatements', () => {
  // Calls run one at a time, so each reuses the one idle connection: every call below sees the same server session.
  const statements = new SearchStatements(`${PG_SERVER}/postgres`, 1);
  const prepared = async () =>
    (await statements.query<{ statement: string }>(TENANT, { sql: `SELECT statement FROM pg_prepared_statements`, params: [] })).map((r) => r.statement);

  afterAll(() => statements.end());

  it('runs its sessions with generic plans', async () => {
    expect(await statements.query(TENANT, { sql: 'SELECT current_setting($1) AS mode', params: ['plan_cache_mode'] })).toEqual([
      { mode: 'force_generic_plan' },
    ]);
  });

  it('prepares a shape once and runs it with each call\'s parameters', async () => {
    const shape = 'SELECT $1::int * 2 AS doubled';
    expect(await statements.query(TENANT, { sql: shape, params: [3] })).toEqual([{ doubled: 6 }]);
    expect(await statements.query(TENANT, { sql: shape, params: [21] })).toEqual([{ doubled: 42 }]);
    expect((await prepared()).filter((s) => s === shape)).toHaveLength(1);
  });

  it('prepares a bounded number of shapes, and still runs the others', async () => {
    for (let k = 0; k < 40; k++) {
      expect(await statements.query(TENANT, { sql: `SELECT $1::int + ${k} AS n`, params: [1] })).toEqual([{ n: 1 + k }]);
    }
    const names = await prepared();
    expect(names.length).toBeGreaterThan(20);
    expect(names.length).toBeLessThanOrEqual(32);
  });

  it('runs at most its size of statements at once and one more (for another tenant), and queues the others', async () => {
    const two = new SearchStatements(`${PG_SERVER}/postgres`, 2);
    const holder = new Client({ connectionString: `${PG_SERVER}/postgres` });
    await holder.connect();
    const key = 1_800_000 + Math.floor(Math.random() * 100_000);
    const waiting = async () =>
      (await holder.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`, [key])).rowCount ?? 0;
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [key]);
      // Eight statements of eight tenants, each waiting on the lock once it runs.
      const sql = 'SELECT 1 AS done FROM (SELECT pg_advisory_xact_lock_shared($1::bigint)) l';
      const all = Promise.all(Array.from({ length: 8 }, (_, n) => two.query<{ done: number }>(`00000000-0000-4000-8000-00000000000${n}`, { sql, params: [key] })));
      await waitFor(async () => (await waiting()) >= 3, 'two statements and the one more running');
      // The others stay queued in the pool, not sent: the lock has three waiters, no more.
      expect(await waiting()).toBe(3);
      await holder.query('SELECT pg_advisory_unlock($1)', [key]);
      expect((await all).flat()).toEqual(Array.from({ length: 8 }, () => ({ done: 1 })));
    } finally {
      await holder.end();
      await two.end();
    }
  });

  it("leaves another tenant a connection while one tenant runs its share, and refuses that tenant's search waiting too long", async () => {
    const one = new SearchStatements(`${PG_SERVER}/postgres`, 1);
    const holder = new Client({ connectionString: `${PG_SERVER}/postgres` });
    await holder.connect();
    const key = 1_700_000 + Math.floor(Math.random() * 100_000);
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [key]);
      // The tenant's one place is taken by a statement that waits on the lock.
      const held = one.query(TENANT, { sql: 'SELECT 1 AS done FROM (SELECT pg_advisory_xact_lock_shared($1::bigint)) l', params: [key] });
      await waitFor(
        async () =>
          (await holder.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`, [key])).rowCount === 1,
        'the held search to wait on its lock',
      );
      expect(await one.query(OTHER_TENANT, { sql: 'SELECT 7 AS seven', params: [] })).toEqual([{ seven: 7 }]);
      const refused = await one.query(TENANT, { sql: 'SELECT 1', params: [] }).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(ApiError);
      expect(refused).toMatchObject({ status: 429, code: 'rate_limited', details: { limit: 1, retry_after: 1 } });
      await holder.query('SELECT pg_advisory_unlock($1)', [key]);
      expect(await held).toEqual([{ done: 1 }]);
    } finally {
      await holder.end();
      await one.end();
    }
  });
});
