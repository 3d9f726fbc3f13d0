/**
 * SearchStatements against a real PostgreSQL: its sessions plan generically, a statement
 * shape is prepared once per connection and runs with each call's parameters, the shapes
 * a connection prepares are bounded, and so are the searches running at once.
 */
import { SearchStatements } from '../src/search/search-statements';
import { PG_SERVER } from './support/app';

describe('SearchStatements', () => {
  // One connection, so that every call below sees the same server session.
  const statements = new SearchStatements(`${PG_SERVER}/postgres`, 1);
  const prepared = async () =>
    (await statements.query<{ statement: string }>({ sql: `SELECT statement FROM pg_prepared_statements`, params: [] })).map((r) => r.statement);

  afterAll(() => statements.end());

  it('runs its sessions with generic plans', async () => {
    expect(await statements.query({ sql: 'SELECT current_setting($1) AS mode', params: ['plan_cache_mode'] })).toEqual([
      { mode: 'force_generic_plan' },
    ]);
  });

  it('prepares a shape once and runs it with each call\'s parameters', async () => {
    const shape = 'SELECT $1::int * 2 AS doubled';
    expect(await statements.query({ sql: shape, params: [3] })).toEqual([{ doubled: 6 }]);
    expect(await statements.query({ sql: shape, params: [21] })).toEqual([{ doubled: 42 }]);
    expect((await prepared()).filter((s) => s === shape)).toHaveLength(1);
  });

  it('prepares a bounded number of shapes, and still runs the others', async () => {
    for (let k = 0; k < 40; k++) {
      expect(await statements.query({ sql: `SELECT $1::int + ${k} AS n`, params: [1] })).toEqual([{ n: 1 + k }]);
    }
    const names = await prepared();
    expect(names.length).toBeGreaterThan(20);
    expect(names.length).toBeLessThanOrEqual(32);
  });

  it('runs at most its pool size of statements at once, and queues the others', async () => {
    const two = new SearchStatements(`${PG_SERVER}/postgres`, 2);
    try {
      // Each statement sleeps first, then counts the search sessions busy with a statement.
      const sql = `SELECT pg_sleep(0.1),
                          (SELECT count(*)::int FROM pg_stat_activity
                            WHERE datname = current_database() AND application_name = 'svc-search' AND state = 'active') AS active`;
      const rows = (await Promise.all(Array.from({ length: 8 }, () => two.query<{ active: number }>({ sql, params: [] })))).flat();
      expect(rows).toHaveLength(8);
      expect(Math.max(...rows.map((r) => r.active))).toBeLessThanOrEqual(2);
      expect(Math.max(...rows.map((r) => r.active))).toBeGreaterThanOrEqual(1);
    } finally {
      await two.end();
    }
  });
});
