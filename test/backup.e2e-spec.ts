/**
 * Backup and restore as docs/operations.md tells an operator to run them: the real `pg_dump -Fc`
 * of a migrated database holding items, restored with the real `pg_restore` into an empty
 * database, comes back whole (every index, the search through the tenant-scoped index), with
 * pg_restore reporting no error.
 */
import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { loadConfig } from '../src/config/app-config';
import { dataSourceOptions, ensureDatabase } from '../src/database/data-source-options';
import { migrations } from '../src/database/migrations';
import { parseSearch } from '../src/search/search-query';
import { searchStatement } from '../src/search/search.sql';
import { dropDatabase, PG_SERVER, uniqueName } from './support/app';

const TENANT = '11111111-1111-4111-8111-111111111111';
const ITEM = '22222222-2222-4222-8222-222222222222';

interface Run {
  code: number;
  stderr: string;
}

/** Runs a PostgreSQL client binary to its end (at most a minute), whatever its exit code. */
function run(file: string, args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 60_000, killSignal: 'SIGKILL' }, (err, _stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stderr });
    });
  });
}

describe('backup and restore', () => {
  const source = uniqueName('svc_test_backup');
  const restored = uniqueName('svc_test_restored');
  const dir = mkdtempSync(join(tmpdir(), 'svc-backup-'));
  const open = (db: string) =>
    new DataSource({ ...dataSourceOptions(loadConfig({ DATABASE_URL: `${PG_SERVER}/${db}` })), migrations, extra: { max: 1 } }).initialize();
  const opened: DataSource[] = [];

  beforeAll(() => ensureDatabase(`${PG_SERVER}/${source}`));
  afterAll(async () => {
    for (const ds of opened) await ds.destroy();
    await dropDatabase(source);
    await dropDatabase(restored);
    rmSync(dir, { recursive: true, force: true });
  });

  it('pg_restore of a pg_dump -Fc exits 0 with every index of the source, and search uses the tenant-scoped index', async () => {
    const ds = await open(source);
    opened.push(ds);
    await ds.runMigrations({ transaction: 'each' });
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'backup') ON CONFLICT DO NOTHING`, [TENANT]);
    // Enough items that the planner prefers the text index to reading the tenant's rows; they
    // fill the generated search_grams column, which the restore computes again as it loads them.
    await ds.query(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
       VALUES ($1, $2, 'core.note', $3, 'active', 's', now(), 'library', '{red}', now(), now())`,
      [TENANT, ITEM, { title: 'Harbour lights', body: 'out of the blue' }],
    );
    await ds.query(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'core.note', jsonb_build_object('title', 'filler ' || n), 'active', 's', now(), 'library', '{}', now(), now()
         FROM generate_series(1, 2000) AS n`,
      [TENANT],
    );

    const file = join(dir, 'backup.fc');
    const dump = await run('pg_dump', ['-Fc', '-f', file, `${PG_SERVER}/${source}`]);
    expect(dump).toEqual({ code: 0, stderr: '' });
    await ensureDatabase(`${PG_SERVER}/${restored}`);
    const restore = await run('pg_restore', ['-d', `${PG_SERVER}/${restored}`, file]);
    expect(restore).toEqual({ code: 0, stderr: '' });

    const target = await open(restored);
    opened.push(target);
    const indexes = (db: DataSource) =>
      db.query(`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2`);
    const expected = await indexes(ds);
    expect(expected.map((r: { indexname: string }) => r.indexname)).toEqual(expect.arrayContaining(['items_search_scoped', 'items_search_grams_scoped']));
    expect(await indexes(target)).toEqual(expected);
    const items = (db: DataSource) => db.query(`SELECT id, search_vector::text, search_grams::text FROM items ORDER BY id`);
    expect(await items(target)).toEqual(await items(ds));

    // The restored database searches through the tenant-scoped index, as the source does (with
    // statistics, which a restore does not bring: ANALYZE, or autovacuum's in its time).
    await target.query(`ANALYZE items`);
    const s = searchStatement({
      tenantId: TENANT,
      filter: { edges: [], backrefs: [] },
      parsed: parseSearch('harbour'),
      mode: 'text',
      limit: 20,
      offset: 0,
      halfLifeDays: 0,
      showTags: false,
    });
    await target.query(`SET enable_seqscan = off`);
    const plan = (await target.query(`EXPLAIN ${s.sql}`, s.params)).map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/Index Scan on items_search_scoped/);
    expect((await target.query(s.sql, s.params)).map((r: { id: string }) => r.id)).toEqual([ITEM]);
  });

  it('migration 4500 names the tag function with its schema in the functions that call it, and reverts to the bare name', async () => {
    const ds = await open(source);
    opened.push(ds);
    await ds.runMigrations({ transaction: 'each' });
    const calls = async () =>
      (
        await ds.query(
          `SELECT proname, substring(prosrc from '[a-z_.]*item_search_scope[(]') AS call FROM pg_proc
            WHERE proname IN ('item_search_scoped', 'item_search_scoped_query') ORDER BY 1`,
        )
      ).map((r: { proname: string; call: string }) => [r.proname, r.call]);
    const qualified = [
      ['item_search_scoped', 'public.item_search_scope('],
      ['item_search_scoped_query', 'public.item_search_scope('],
    ];
    expect(await calls()).toEqual(qualified);
    for (;;) {
      const [last] = await ds.query(`SELECT name FROM migrations ORDER BY timestamp DESC LIMIT 1`);
      await ds.undoLastMigration({ transaction: 'each' });
      if (last.name === 'SearchFunctionsRestorable1732300004500') break;
    }
    expect(await calls()).toEqual([
      ['item_search_scoped', 'item_search_scope('],
      ['item_search_scoped_query', 'item_search_scope('],
    ]);
    await ds.runMigrations({ transaction: 'each' });
    expect(await calls()).toEqual(qualified);
  });
});
