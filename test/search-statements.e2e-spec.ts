/**
 * SearchStatements against a real PostgreSQL: its sessions plan generically, a statement
 * shape is prepared once per connection and runs with each call's parameters, and the shapes
 * a connection prepares are bounded.
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
});
