/**
 * Migrations against a real, empty database: every one applies, every one reverts, and the
 * search-storage migration upgrades items written before it (their snippet text is filled in
 * and their vectors move to the new storage).
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { loadConfig } from '../src/config/app-config';
import { dataSourceOptions, ensureDatabase } from '../src/database/data-source-options';
import { migrations } from '../src/database/migrations';
import { dropDatabase, PG_SERVER, uniqueName } from './support/app';

const TENANT = '11111111-1111-4111-8111-111111111111';
const ITEM = '22222222-2222-4222-8222-222222222222';

describe('migrations', () => {
  const name = uniqueName('svc_test_migrations');
  const url = `${PG_SERVER}/${name}`;
  const config = loadConfig({ DATABASE_URL: url });
  const open = async (list: typeof migrations) => {
    const ds = new DataSource({ ...dataSourceOptions(config), migrations: list, extra: { max: 1 } });
    return ds.initialize();
  };
  let ds: DataSource | undefined;

  beforeAll(() => ensureDatabase(url));
  afterEach(async () => {
    await ds?.destroy();
    ds = undefined;
  });
  afterAll(() => dropDatabase(name));

  it('search storage upgrades items written before it, common grams follow writes, and both revert', async () => {
    const storage = migrations.findIndex((m) => m.name === 'SearchStorage1732300000600');
    ds = await open(migrations.slice(0, storage));
    await ds.runMigrations({ transaction: 'each' });
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'm')`, [TENANT]);
    await ds.query(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
       VALUES ($1, $2, 'core.note', $3, 'active', 's', now(), 'library', '{red}', now(), now())`,
      [TENANT, ITEM, { title: 'Harbour lights', body: 'Boats \uE000at\uE001 dusk' }],
    );
    await ds.destroy();

    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    const [row] = await ds.query(
      `SELECT search_document, search_vector @@ 'harbour & boats & red'::tsquery AS indexed FROM items WHERE id = $1`,
      [ITEM],
    );
    // Weight order (title, then body), markers removed, tags left to the search statement.
    expect(row).toEqual({ search_document: 'Harbour lights · Boats at dusk', indexed: true });
    const [column] = await ds.query(
      `SELECT attstorage, attcompression FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'search_vector'`,
    );
    // Kept in the row; lz4 where the server was built with it (Debian's and the official images' are).
    expect(column).toEqual({ attstorage: 'm', attcompression: 'l' });

    // Common grams (migration 0700): adjacent common words of the stored vector.
    await ds.query(`UPDATE items SET properties = $2 WHERE id = $1`, [ITEM, { title: 'out of the blue', body: 'and then' }]);
    const [grams] = await ds.query(`SELECT search_grams::text AS grams FROM items WHERE id = $1`, [ITEM]);
    expect(grams.grams).toBe(`'and then' 'of the' 'out of'`);

    // New writes keep the document in step.
    await ds.query(`UPDATE items SET properties = $2 WHERE id = $1`, [ITEM, { title: 'Night ferry' }]);
    expect((await ds.query(`SELECT search_document FROM items WHERE id = $1`, [ITEM]))[0].search_document).toBe('Night ferry');

    await ds.undoLastMigration({ transaction: 'each' }); // common grams
    await ds.undoLastMigration({ transaction: 'each' }); // search storage
    const columns = await ds.query(`SELECT 1 FROM information_schema.columns WHERE table_name = 'items' AND column_name = 'search_document'`);
    expect(columns).toHaveLength(0);
    // The trigger of the earlier migration works again on its own.
    await ds.query(`UPDATE items SET properties = $2 WHERE id = $1`, [ITEM, { title: 'Morning tide' }]);
    const [after] = await ds.query(
      `SELECT search_vector @@ 'morning'::tsquery AS indexed, item_search_document(tenant_id, type, properties, tags) AS doc FROM items WHERE id = $1`,
      [ITEM],
    );
    expect(after).toEqual({ indexed: true, doc: 'Morning tide · red' });
  });

  it('every migration reverts, down to an empty schema, and applies again', async () => {
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    while ((await ds.query(`SELECT count(*)::int AS n FROM migrations`))[0].n > 0) {
      await ds.undoLastMigration({ transaction: 'each' });
    }
    const tables = await ds.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'migrations'`);
    expect(tables).toEqual([]);
    expect(await ds.runMigrations({ transaction: 'each' })).toHaveLength(migrations.length);
  });
});
