/**
 * Migrations against a real, empty database: every one applies, every one reverts, the
 * search-storage migration upgrades items written before it (their snippet text is filled in
 * and their vectors move to the new storage), and the tenant-scoped text index keeps tenants
 * apart even when they share a tag.
 */
import 'reflect-metadata';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { loadConfig } from '../src/config/app-config';
import { buildIndexConcurrently } from '../src/database/concurrent-index';
import { dataSourceOptions, ensureDatabase, MigrationDataSource, migrationDataSourceOptions } from '../src/database/data-source-options';
import { migrations } from '../src/database/migrations';
import { parseSearch } from '../src/search/search-query';
import { searchStatement } from '../src/search/search.sql';
import { dropDatabase, PG_SERVER, uniqueName } from './support/app';
import { waitFor } from './support/wait';

const TENANT = '11111111-1111-4111-8111-111111111111';
const ITEM = '22222222-2222-4222-8222-222222222222';

/** Reverts migrations newest first, down to and including `name` (later ones revert first). */
async function revertThrough(ds: DataSource, name: string): Promise<void> {
  for (;;) {
    const [last] = await ds.query(`SELECT name FROM migrations ORDER BY timestamp DESC LIMIT 1`);
    await ds.undoLastMigration({ transaction: 'each' });
    if (last.name === name) return;
  }
}

/**
 * Counts from now on the UPDATEs of each item (a row trigger of the test's own); the function
 * returned reads the counts by item id and removes the trigger.
 */
async function countItemUpdates(ds: DataSource): Promise<() => Promise<Record<string, number>>> {
  await ds.query(`CREATE TABLE test_item_updates (id uuid PRIMARY KEY, n int NOT NULL)`);
  await ds.query(`
    CREATE FUNCTION test_item_updated() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      INSERT INTO test_item_updates VALUES (NEW.id, 1) ON CONFLICT (id) DO UPDATE SET n = test_item_updates.n + 1;
      RETURN NULL;
    END
    $fn$`);
  await ds.query(`CREATE TRIGGER test_item_updated AFTER UPDATE ON items FOR EACH ROW EXECUTE FUNCTION test_item_updated()`);
  return async () => {
    const rows: Array<{ id: string; n: number }> = await ds.query(`SELECT id, n FROM test_item_updates`);
    await ds.query(`DROP TRIGGER test_item_updated ON items`);
    await ds.query(`DROP FUNCTION test_item_updated()`);
    await ds.query(`DROP TABLE test_item_updates`);
    return Object.fromEntries(rows.map((r) => [r.id, r.n]));
  };
}

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

  it('creates a missing database once, however many starters race to create it', async () => {
    const racing = uniqueName('svc_test_create_race');
    try {
      // Each round's CREATEs run at once: one wins, the others see it taken (42P04, or 23505 from pg_database's index).
      for (let round = 0; round < 3; round++) {
        await dropDatabase(racing);
        await Promise.all(Array.from({ length: 6 }, () => ensureDatabase(`${PG_SERVER}/${racing}`)));
        const server = new Client({ connectionString: `${PG_SERVER}/postgres` });
        await server.connect();
        try {
          expect((await server.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [racing])).rowCount).toBe(1);
        } finally {
          await server.end();
        }
      }
    } finally {
      await dropDatabase(racing);
    }
  });

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

    // Common grams (migrations 0700 and 0900): adjacent common words of the stored vector, the
    // frequent words ('first') among them.
    const grams = async () => (await ds!.query(`SELECT search_grams::text AS grams FROM items WHERE id = $1`, [ITEM]))[0].grams;
    await ds.query(`UPDATE items SET properties = $2 WHERE id = $1`, [ITEM, { title: 'out of the blue', body: 'the first of them' }]);
    expect(await grams()).toBe(`'first of' 'of the' 'of them' 'out of' 'the first'`);
    // Reverting 0900 recomputes the stored grams with the stop words alone; applying it again, with the frequent words.
    await revertThrough(ds, 'SearchFrequentWordGrams1732300000900');
    expect(await grams()).toBe(`'of the' 'of them' 'out of'`);
    await ds.runMigrations({ transaction: 'each' });
    expect(await grams()).toBe(`'first of' 'of the' 'of them' 'out of' 'the first'`);

    // New writes keep the document in step.
    await ds.query(`UPDATE items SET properties = $2 WHERE id = $1`, [ITEM, { title: 'Night ferry' }]);
    expect((await ds.query(`SELECT search_document FROM items WHERE id = $1`, [ITEM]))[0].search_document).toBe('Night ferry');

    await revertThrough(ds, 'SearchFrequentWordGrams1732300000900');
    await ds.undoLastMigration({ transaction: 'each' }); // tenant-scoped index
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

  it('the tenant-scoped text index finds through the index, keeps tenants that share a tag apart, and reverts', async () => {
    const other = '33333333-3333-4333-8333-333333333333';
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    await ds.query(`DELETE FROM tenants`);
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'a'), ($2, 'b')`, [TENANT, other]);
    // Every tenant in one bucket, as if their tags collided, before anything is indexed.
    await ds.query(`CREATE OR REPLACE FUNCTION item_search_scope(p_tenant uuid) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'same' $$`);
    const insert = (tenant: string, id: string, properties: object) =>
      ds!.query(
        `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
         VALUES ($1, $2, 'core.note', $3, 'active', 's', now(), 'library', '{}', now(), now())`,
        [tenant, id, properties],
      );
    await insert(TENANT, ITEM, { title: 'Harbour lights', body: 'out of the blue' });
    await insert(other, '44444444-4444-4444-8444-444444444444', { title: 'Harbour fog', body: 'out of the mist' });
    // Enough other items that the planner prefers the text index to reading the tenant's rows.
    await ds.query(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
       SELECT t, gen_random_uuid(), 'core.note', jsonb_build_object('title', 'filler ' || n), 'active', 's', now(), 'library', '{}', now(), now()
         FROM unnest($1::uuid[]) AS t, generate_series(1, 2000) AS n`,
      [[TENANT, other]],
    );
    await ds.query(`ANALYZE items`);
    const ids = async (tenant: string, q: string) => {
      const s = searchStatement({
        tenantId: tenant,
        filter: { edges: [], backrefs: [] },
        parsed: parseSearch(q),
        mode: 'text',
        limit: 20,
        offset: 0,
        halfLifeDays: 0,
        showTags: false,
      });
      const plan = (await ds!.query(`EXPLAIN ${s.sql}`, s.params)).map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
      return { ids: (await ds!.query(s.sql, s.params)).map((r: { id: string }) => r.id), plan };
    };
    await ds.query(`SET enable_seqscan = off`);
    for (const q of ['lights', 'harbour', 'harb', '"out of the"', 'harbour -"of the mist"']) {
      const own = await ids(TENANT, q);
      expect({ q, ids: own.ids }).toEqual({ q, ids: [ITEM] });
      expect(own.plan).toMatch(/Index Scan on items_search(_grams)?_scoped/);
    }
    expect((await ids(other, 'lights')).ids).toEqual([]);
    // An excluded phrase under `or` cannot be widened for the index: the exact test alone decides
    // (here every item of the tenant matches, the one with the word first).
    const widened = await ids(TENANT, 'lights or -"of the mist"');
    expect(widened.ids).toHaveLength(20);
    expect(widened.ids[0]).toBe(ITEM);
    expect(await ds.query(`SELECT count(*)::int AS n FROM items WHERE id = ANY ($1) AND tenant_id = $2`, [widened.ids, TENANT])).toEqual([{ n: 20 }]);
    expect(widened.plan).not.toMatch(/Index Scan on items_search(_grams)?_scoped/);
    await ds.query(`RESET enable_seqscan`);

    // Lexemes with quotes, backslashes and hyphens, URLs, phrases under `or`: the tagged index
    // query finds what the exact test finds (it may find more only where phrase operators
    // become AND), or is NULL (skip the index) for an excluded phrase. Without phrase operators
    // it finds nothing more, which lets the statement skip the exact test for those queries.
    const cases = await ds.query(
      `SELECT d.doc, d.q, to_tsvector('simple', d.doc) @@ websearch_to_tsquery('simple', d.q) AS exact,
              item_search_scoped($1, to_tsvector('simple', d.doc)) @@ item_search_scoped_query($1, websearch_to_tsquery('simple', d.q)) AS scoped
         FROM (VALUES ($$it's a b\\c$$, $$"it's" b\\c$$), ('x-ray o''brien', 'x-ray or brien'), ('see http://a.example/p?q=1', 'a.example/p?q=1'),
                      ('foo bar', '"bar foo" or foo'), ('tag <b>bold</b>', 'bold -"tag b"'), ('plain words', 'plain -other'),
                      ('bar foo', '"foo bar"'), ('x ray', 'x-ray'), ($$o'brien$$, 'obrien'), ('plain words', 'plain -words'),
                      ($$it's$$, $$it's or isn't$$), ('see http://a.example/p?q=1', 'b.example or plain')) AS d(doc, q)`,
      [TENANT],
    );
    expect(cases.map((c: { q: string; exact: boolean; scoped: boolean | null }) => [c.q, c.exact, c.scoped])).toEqual([
      [`"it's" b\\c`, true, true],
      ['x-ray or brien', true, true],
      ['a.example/p?q=1', true, true],
      ['"bar foo" or foo', true, true],
      ['bold -"tag b"', true, null],
      ['plain -other', true, true],
      ['"foo bar"', false, true], // the phrase is AND in the index; the exact test settles it
      ['x-ray', false, false],
      ['obrien', false, false],
      ['plain -words', false, false],
      [`it's or isn't`, true, true],
      ['b.example or plain', false, false],
    ]);

    await revertThrough(ds, 'SearchFrequentWordGrams1732300000900');
    await ds.undoLastMigration({ transaction: 'each' }); // tenant-scoped index
    const indexes = await ds.query(`SELECT indexname FROM pg_indexes WHERE tablename = 'items' AND indexname LIKE 'items_search%' ORDER BY 1`);
    expect(indexes.map((r: { indexname: string }) => r.indexname)).toEqual(['items_search', 'items_search_grams', 'items_search_title_trgm']);
    expect(await ds.query(`SELECT proname FROM pg_proc WHERE proname LIKE 'item_search_scope%'`)).toEqual([]);
  });

  it('subtypes stored before 2400 keep their parents\' rules after it (every generation), and it reverts', async () => {
    const at = migrations.findIndex((m) => m.name === 'SubtypesKeepParentRules1732300002400');
    ds = await open(migrations.slice(0, at));
    await ds.runMigrations({ transaction: 'each' });
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'types') ON CONFLICT DO NOTHING`, [TENANT]);
    // As the code before it resolved them: the child's keywords replaced the parent's.
    const strict = { type: 'object', properties: { title: { type: 'string', maxLength: 5 } } };
    const loose = { type: 'object', properties: { title: { type: 'string', maxLength: 500 } } };
    const type = (name: string, parent: string | null, schema: object, resolved: object) =>
      ds!.query(
        `INSERT INTO item_types (tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, '{}', false, 1, now(), now())`,
        [TENANT, name, parent, schema, resolved],
      );
    await type('m.base', null, strict, strict);
    await type('m.base.loose', 'm.base', { properties: { title: { maxLength: 500 } } }, loose);
    await type('m.base.loose.leaf', 'm.base.loose', {}, loose);
    await ds.destroy();

    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    const resolved = async (name: string) => (await ds!.query(`SELECT resolved_schema FROM item_types WHERE tenant_id = $1 AND name = $2`, [TENANT, name]))[0].resolved_schema;
    expect((await resolved('m.base.loose')).allOf).toEqual([strict]);
    expect((await resolved('m.base.loose.leaf')).allOf).toEqual([{ ...loose, allOf: [strict] }]);
    expect(await resolved('m.base')).toEqual(strict);

    // Back to just before 2400, whatever came after it.
    while ((await ds.query(`SELECT name FROM migrations ORDER BY id DESC LIMIT 1`))[0].name !== migrations[at - 1].name) {
      await ds.undoLastMigration({ transaction: 'each' });
    }
    expect(await resolved('m.base.loose')).toEqual(loose);
    expect(await resolved('m.base.loose.leaf')).toEqual(loose);
  });

  it('items in the trash before 2500 remember the state they were trashed from, from their history', async () => {
    const at = migrations.findIndex((m) => m.name === 'ItemsTrashedFrom1732300002500');
    ds = await open(migrations.slice(0, at));
    await ds.runMigrations({ transaction: 'each' });
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'trash') ON CONFLICT DO NOTHING`, [TENANT]);
    const item = async (id: string, states: string[]) => {
      await ds!.query(
        `INSERT INTO items (tenant_id, id, type, properties, state, version, source, "timestamp", tier, tags, created_at, updated_at)
         VALUES ($1, $2, 'core.note', '{"title":"t"}', $3, $4, 's', now(), 'library', '{}', now(), now())`,
        [TENANT, id, states[states.length - 1], states.length],
      );
      for (const [n, state] of states.entries()) {
        await ds!.query(`INSERT INTO item_versions (tenant_id, item_id, version, snapshot, changed_by, created_at) VALUES ($1, $2, $3, $4, 'k', now())`, [
          TENANT, id, n + 1, { state },
        ]);
      }
    };
    const [revoked, archived, live] = ['aaaaaaaa-0000-4000-8000-000000000001', 'aaaaaaaa-0000-4000-8000-000000000002', 'aaaaaaaa-0000-4000-8000-000000000003'];
    await item(revoked, ['active', 'revoked', 'trashed']);
    await item(archived, ['archived', 'trashed', 'trashed']);
    await item(live, ['active', 'trashed', 'active']);
    await ds.destroy();

    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    const rows: Array<{ id: string; trashed_from: string | null }> = await ds.query(`SELECT id, trashed_from FROM items WHERE id = ANY($1) ORDER BY id`, [[revoked, archived, live]]);
    expect(rows.map((r) => r.trashed_from)).toEqual(['revoked', 'archived', null]);
  });

  it("subtypes stored before 3400 keep their parents' searchable: false (every generation), and their items are indexed again", async () => {
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    await revertThrough(ds, 'SubtypesKeepUnsearchable1732300003400');
    const tenant = '66666666-6666-4666-8666-666666666666';
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'unsearchable')`, [tenant]);
    const type = (name: string, parent: string | null, resolved: object) =>
      ds!.query(
        `INSERT INTO item_types (tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at)
         VALUES ($1, $2, $3, '{}', $4, '{}', false, 1, now(), now())`,
        [tenant, name, parent, resolved],
      );
    const vault = { type: 'object', properties: { secret: { type: 'string', searchable: false }, label: { type: 'string' } } };
    // As the code before it resolved a subtype saying `"searchable": true`: the child's keyword won.
    const leaky = { type: 'object', properties: { secret: { type: 'string', searchable: true }, label: { type: 'string' } }, allOf: [vault] };
    const leakyLeaf = { ...leaky, allOf: [leaky] };
    await type('u.vault', null, vault);
    await type('u.vault.leaky', 'u.vault', leaky);
    await type('u.vault.leaky.leaf', 'u.vault.leaky', leakyLeaf);
    const item = async (id: string, type: string) =>
      ds!.query(
        `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
         VALUES ($1, $2, $3, $4, 'active', 's', now(), 'library', '{}', now(), now())`,
        [tenant, id, type, { secret: 'quinquagenarian', label: 'copperlabel' }],
      );
    const [child, leaf] = ['44444444-4444-4444-8444-444444444444', '55555555-5555-4555-8555-555555555555'];
    await item(child, 'u.vault.leaky');
    await item(leaf, 'u.vault.leaky.leaf');
    const found = async (word: string) =>
      (await ds!.query(`SELECT id FROM items WHERE tenant_id = $1 AND search_vector @@ to_tsquery('simple', $2) ORDER BY id`, [tenant, word])).map((r: { id: string }) => r.id);
    expect(await found('quinquagenarian')).toEqual([child, leaf]);

    const updates = await countItemUpdates(ds);
    await ds.runMigrations({ transaction: 'each' });
    // Indexed again by item_types_search_reindex as each type changed (the child in the first pass, the leaf in the second), once each.
    expect(await updates()).toEqual({ [child]: 1, [leaf]: 1 });
    const resolved = async (name: string) => (await ds!.query(`SELECT resolved_schema FROM item_types WHERE tenant_id = $1 AND name = $2`, [tenant, name]))[0].resolved_schema;
    expect((await resolved('u.vault.leaky')).properties.secret).toEqual({ type: 'string', searchable: false });
    expect((await resolved('u.vault.leaky.leaf')).properties.secret).toEqual({ type: 'string', searchable: false });
    expect(await resolved('u.vault')).toEqual(vault);
    expect(await found('quinquagenarian')).toEqual([]);
    expect(await found('copperlabel')).toEqual([child, leaf]);
  });

  it("reverting 3700 leaves deliveries without a body as they were, pending ones pending, with the body null the code before it reads; applying it again clears that and the '' an earlier revert wrote", async () => {
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    const tenant = 'b0000000-0000-4000-8000-000000000001';
    const [webhook, event] = ['b0000000-0000-4000-8000-000000000002', 'b0000000-0000-4000-8000-000000000003'];
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'bodies')`, [tenant]);
    await ds.query(`INSERT INTO webhooks (tenant_id, id, url, events, secret_sealed, credential_id) VALUES ($1, $2, 'https://example.com/h', '{*}', 's', 'k')`, [tenant, webhook]);
    await ds.query(`INSERT INTO events (tenant_id, id, name, credential_id, audience, payload) VALUES ($1, $2, 'item.created', 'k', '{}', '{}')`, [tenant, event]);
    const stored = JSON.stringify({ event: 'item.created', item: { type: 'core.note' } });
    const ids = { pending: 'b0000000-0000-4000-8000-000000000004', done: 'b0000000-0000-4000-8000-000000000005', stored: 'b0000000-0000-4000-8000-000000000006' };
    const delivery = (id: string, status: string, body: string | null) =>
      ds!.query(
        `INSERT INTO webhook_deliveries (tenant_id, id, webhook_id, event_id, event, body, status, attempts, next_attempt_at)
         VALUES ($1, $2, $3, $4, 'item.created', $5, $6, 1, CASE WHEN $6 = 'pending' THEN now() + interval '1 hour' END)`,
        [tenant, id, webhook, event, body, status],
      );
    await delivery(ids.pending, 'pending', null);
    await delivery(ids.done, 'succeeded', null);
    await delivery(ids.stored, 'pending', stored);
    const rows = async () =>
      Object.fromEntries(
        (
          await ds!.query(
            `SELECT id, body, status, last_error, next_attempt_at IS NOT NULL AS due, body::json -> 'item' ->> 'type' AS item_type FROM webhook_deliveries WHERE tenant_id = $1`,
            [tenant],
          )
        ).map(({ id, ...r }: { id: string }) => [id, r]),
      );

    await revertThrough(ds, 'DeliveryBodiesFromEvents1732300003700');
    // The statement that claims a delivery before 3700 reads `body::json -> 'item' ->> 'type'` (as `rows` does): no cast fails.
    expect(await rows()).toEqual({
      [ids.pending]: { body: 'null', status: 'pending', last_error: null, due: true, item_type: null },
      [ids.done]: { body: 'null', status: 'succeeded', last_error: null, due: false, item_type: null },
      [ids.stored]: { body: stored, status: 'pending', last_error: null, due: true, item_type: 'core.note' },
    });
    // What the revert wrote before: '' (and the delivery failed).
    await ds.query(`UPDATE webhook_deliveries SET body = '' WHERE id = $1`, [ids.done]);

    await ds.runMigrations({ transaction: 'each' });
    expect(await rows()).toEqual({
      [ids.pending]: { body: null, status: 'pending', last_error: null, due: true, item_type: null },
      [ids.done]: { body: null, status: 'succeeded', last_error: null, due: false, item_type: null },
      [ids.stored]: { body: stored, status: 'pending', last_error: null, due: true, item_type: 'core.note' },
    });
  });

  it("subtypes stored before 4100 keep out of search the properties they add where their parents' additionalProperties say searchable: false, and their items are indexed again", async () => {
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    await revertThrough(ds, 'SubtypesKeepUnsearchableAdded1732300004100');
    const tenant = '77777777-7777-4777-8777-777777777777';
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'unsearchable-added')`, [tenant]);
    const type = (name: string, parent: string | null, resolved: object) =>
      ds!.query(
        `INSERT INTO item_types (tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at)
         VALUES ($1, $2, $3, '{}', $4, '{}', false, 1, now(), now())`,
        [tenant, name, parent, resolved],
      );
    const hidden = { type: 'string', searchable: false };
    const base = { type: 'object', properties: { label: { type: 'string' }, o: { type: 'object', additionalProperties: hidden } }, additionalProperties: hidden };
    // As the code before it resolved a subtype adding `pin` and `o.pin`: as the subtype wrote them.
    const child = {
      type: 'object',
      properties: { label: { type: 'string' }, pin: { type: 'string' }, o: { type: 'object', additionalProperties: hidden, properties: { pin: { type: 'string' } } } },
      additionalProperties: hidden,
      allOf: [base],
    };
    await type('v.base', null, base);
    await type('v.base.child', 'v.base', child);
    const id = '88888888-8888-4888-8888-888888888888';
    await ds.query(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
       VALUES ($1, $2, 'v.base.child', $3, 'active', 's', now(), 'library', '{}', now(), now())`,
      [tenant, id, { label: 'brasslabel', pin: 'septuagenarian', o: { pin: 'octogenarian' } }],
    );
    const found = async (word: string) =>
      (await ds!.query(`SELECT id FROM items WHERE tenant_id = $1 AND search_vector @@ to_tsquery('simple', $2)`, [tenant, word])).map((r: { id: string }) => r.id);
    expect(await found('septuagenarian')).toEqual([id]);

    const updates = await countItemUpdates(ds);
    await ds.runMigrations({ transaction: 'each' });
    // Indexed again by item_types_search_reindex as its type changed, and only then.
    expect(await updates()).toEqual({ [id]: 1 });
    const [{ resolved_schema: resolved }] = await ds.query(`SELECT resolved_schema FROM item_types WHERE tenant_id = $1 AND name = 'v.base.child'`, [tenant]);
    expect(resolved.properties.pin).toEqual(hidden);
    expect(resolved.properties.o.properties.pin).toEqual(hidden);
    for (const word of ['septuagenarian', 'octogenarian']) expect(await found(word)).toEqual([]);
    expect(await found('brasslabel')).toEqual([id]);
  });

  it('bulk jobs ended before 4200 keep neither spec nor match set, and of their starter only kind and scopes; unfinished ones keep all; it reverts', async () => {
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    await revertThrough(ds, 'BulkJobRetention1732300004200');
    const tenant = '99999999-9999-4999-8999-999999999999';
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'bulk-retention')`, [tenant]);
    const principal = { tenantId: tenant, credentialId: 'c', kind: 'oauth', role: 'member', typePerms: { 'core.*': 'write' }, scopes: ['core.note:write'] };
    const job = async (id: string, status: string, p: object = principal) =>
      ds!.query(
        `INSERT INTO bulk_jobs (tenant_id, id, action, spec, credential_id, principal, status, item_ids, matched, finished_at)
         VALUES ($1, $2, 'update_tier', '{"action":"update_tier","tier":"feed"}', 'c', $3, $4, ARRAY[$2]::uuid[], 1,
                 CASE WHEN $4 IN ('queued', 'in_progress') THEN NULL ELSE now() END)`,
        [tenant, id, p, status],
      );
    const ids = { done: 'a0000000-0000-4000-8000-000000000001', key: 'a0000000-0000-4000-8000-000000000002', running: 'a0000000-0000-4000-8000-000000000003' };
    await job(ids.done, 'completed');
    await job(ids.key, 'cancelled', { ...principal, kind: 'api_key', scopes: undefined });
    await job(ids.running, 'in_progress');
    const rows = async () =>
      Object.fromEntries(
        (await ds!.query(`SELECT id, spec, principal, cardinality(item_ids) AS n FROM bulk_jobs WHERE tenant_id = $1`, [tenant])).map(
          (r: { id: string; spec: unknown; principal: unknown; n: number }) => [r.id, { spec: r.spec, principal: r.principal, n: r.n }],
        ),
      );

    await ds.runMigrations({ transaction: 'each' });
    expect(await rows()).toEqual({
      [ids.done]: { spec: null, principal: { kind: 'oauth', scopes: ['core.note:write'] }, n: 0 },
      [ids.key]: { spec: null, principal: { kind: 'api_key' }, n: 0 },
      [ids.running]: { spec: { action: 'update_tier', tier: 'feed' }, principal, n: 1 },
    });
    await revertThrough(ds, 'BulkJobRetention1732300004200');
    expect((await rows())[ids.done].spec).toEqual({ action: 'update_tier' });
  });

  it('the typeorm CLI (ormconfig.ts) runs and reverts migrations without the statement, read and idle limits of DATABASE_STATEMENT_TIMEOUT_MS, under the lock start-up takes', async () => {
    const saved = { DATABASE_URL: process.env.DATABASE_URL, DATABASE_STATEMENT_TIMEOUT_MS: process.env.DATABASE_STATEMENT_TIMEOUT_MS };
    Object.assign(process.env, { DATABASE_URL: url, DATABASE_STATEMENT_TIMEOUT_MS: '100' });
    let cli!: DataSource;
    try {
      // Loaded afresh: ormconfig.ts reads the environment when it is loaded, as the CLI loads it.
      jest.isolateModules(() => {
        cli = (require('../ormconfig') as typeof import('../ormconfig')).default;
      });
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
    expect(cli.options.extra).not.toHaveProperty('query_timeout');
    ds = await cli.initialize();
    const [limits] = await ds.query(`SELECT current_setting('statement_timeout') AS statement, current_setting('idle_in_transaction_session_timeout') AS idle`);
    expect(limits).toEqual({ statement: '0', idle: '0' });
    // Longer than the 100 ms a request's statement may take, as a migration over a large table is.
    await ds.query(`SELECT pg_sleep(0.3)`);
    // An instance migrating at start-up holds the lock: the CLI waits for it, then applies what is left.
    const instance = new Client({ connectionString: url });
    await instance.connect();
    // It tries for the lock, idle between tries (see the next test for why it does not wait in pg_advisory_lock).
    const waiting = `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock%'`;
    const applied = async (): Promise<number> =>
      (await ds!.query(`SELECT to_regclass('migrations') IS NULL AS none`))[0].none ? 0 : (await ds!.query(`SELECT count(*)::int AS n FROM migrations`))[0].n;
    const before = await applied();
    try {
      await instance.query('SELECT pg_advisory_lock(727002)');
      const run = ds.runMigrations({ transaction: 'each' });
      await waitFor(async () => (await instance.query(waiting)).rowCount === 1, 'the CLI waiting for the migration lock');
      expect(await applied()).toBe(before);
      await instance.query('SELECT pg_advisory_unlock(727002)');
      await run;
      expect(await applied()).toBeGreaterThan(before);
    } finally {
      await instance.end();
    }
    await ds.undoLastMigration({ transaction: 'each' });
    expect(await ds.runMigrations({ transaction: 'each' })).toHaveLength(1);
  });

  it('two runners starting together on a database owing an index built CONCURRENTLY both finish, applying each migration once', async () => {
    // A runner waiting in pg_advisory_lock held a snapshot, which the holder's CREATE INDEX
    // CONCURRENTLY waited out: neither finished. Each runner here has its own pool, as two
    // instances (or an instance and the CLI) do.
    const together = `${PG_SERVER}/${name}_together`;
    await ensureDatabase(together);
    const runners = [0, 1].map(() => new MigrationDataSource(migrationDataSourceOptions(loadConfig({ DATABASE_URL: together }))));
    try {
      await Promise.all(runners.map((r) => r.initialize()));
      const applied = await Promise.all(runners.map((r) => r.runMigrations({ transaction: 'each' })));
      expect(applied.map((list) => list.length).sort((a, b) => a - b)).toEqual([0, migrations.length]);
    } finally {
      await Promise.all(runners.map((r) => (r.isInitialized ? r.destroy() : undefined)));
      await dropDatabase(`${name}_together`);
    }
  });

  it('an index built CONCURRENTLY is built again when a run left it invalid, and kept when it is valid', async () => {
    ds = await open([]);
    const q = ds.createQueryRunner();
    const indexOf = async (n: string): Promise<{ oid: number; valid: boolean } | undefined> =>
      (await q.query(`SELECT indexrelid::int AS oid, indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass($1)`, [n]))[0];
    try {
      await q.query(`CREATE TABLE test_concurrent (v int)`);
      await q.query(`INSERT INTO test_concurrent VALUES (1), (1)`);
      // A build that failed half way, as a cancelled start-up leaves one: PostgreSQL keeps it, invalid.
      await expect(q.query(`CREATE UNIQUE INDEX CONCURRENTLY test_concurrent_v ON test_concurrent (v)`)).rejects.toThrow();
      expect((await indexOf('test_concurrent_v'))?.valid).toBe(false);
      await buildIndexConcurrently(q, 'test_concurrent_v', `test_concurrent (v)`);
      const built = await indexOf('test_concurrent_v');
      expect(built?.valid).toBe(true);
      await buildIndexConcurrently(q, 'test_concurrent_v', `test_concurrent (v)`);
      expect(await indexOf('test_concurrent_v')).toEqual(built);
    } finally {
      await q.query(`DROP TABLE IF EXISTS test_concurrent`);
      await q.release();
    }
  });

  it('reverting 5100 refuses while a deleted tenant is not purged yet (it would be whole again), and takes the purged ones away', async () => {
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    const [purging, purged] = ['c0000000-0000-4000-8000-000000000001', 'c0000000-0000-4000-8000-000000000002'];
    await ds.query(`INSERT INTO tenants (id, name, deleted_at) VALUES ($1, 'purging', now())`, [purging]);
    await ds.query(`INSERT INTO tenants (id, name, deleted_at, purged_at) VALUES ($1, 'purged', now(), now())`, [purged]);
    await expect(revertThrough(ds, 'TenantDeletion1732300005100')).rejects.toThrow(/not purged yet/);
    expect(await ds.query(`SELECT id FROM tenants WHERE id = ANY($1) ORDER BY id`, [[purging, purged]])).toHaveLength(2);
    await ds.query(`UPDATE tenants SET purged_at = now() WHERE id = $1`, [purging]);
    await revertThrough(ds, 'TenantDeletion1732300005100');
    expect(await ds.query(`SELECT id FROM tenants WHERE id = ANY($1)`, [[purging, purged]])).toEqual([]);
    await ds.runMigrations({ transaction: 'each' });
  });

  it('reverting 6800 writes the users whose disablement has ended as enabled, and keeps the others disabled', async () => {
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    const tenant = 'd0000000-0000-4000-8000-000000000000';
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'disabled-until')`, [tenant]);
    const ids = Object.fromEntries(['ended', 'ongoing', 'indefinite', 'enabled'].map((who, i) => [who, `d0000000-0000-4000-8000-00000000000${i + 1}`]));
    const add = (who: string, disabled: boolean, until: string | null) =>
      ds!.query(
        `INSERT INTO users (tenant_id, id, email, name, role, password_hash, disabled, disabled_reason, disabled_until)
         VALUES ($1, $2, $3, 'U', 'member', 'x', $4, CASE WHEN $4 THEN 'why' END, now() + $5::interval)`,
        [tenant, ids[who], `${who}@example.com`, disabled, until],
      );
    await add('ended', true, '-1 minute');
    await add('ongoing', true, '1 hour');
    await add('indefinite', true, null);
    await add('enabled', false, null);
    await revertThrough(ds, 'UsersDisabledUntil1732300006800');
    const rows = await ds.query(`SELECT email, disabled, disabled_reason FROM users WHERE tenant_id = $1 ORDER BY email`, [tenant]);
    expect(rows).toEqual([
      { email: 'enabled@example.com', disabled: false, disabled_reason: null },
      { email: 'ended@example.com', disabled: false, disabled_reason: null },
      { email: 'indefinite@example.com', disabled: true, disabled_reason: 'why' },
      { email: 'ongoing@example.com', disabled: true, disabled_reason: 'why' },
    ]);
    await ds.runMigrations({ transaction: 'each' });
    expect(await ds.query(`SELECT count(*)::int AS n FROM users WHERE tenant_id = $1 AND disabled_until IS NOT NULL`, [tenant])).toEqual([{ n: 0 }]);
  });

  it('audit rows written before 5500 come first in transaction order, in the order of their times; later rows follow in their transactions\' order', async () => {
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    await revertThrough(ds, 'AuditTransactionOrder1732300005500');
    const tenant = 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb';
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'audit-order')`, [tenant]);
    const row = (n: number, at: string) =>
      ds!.query(`INSERT INTO audit_events (tenant_id, id, action, details, created_at) VALUES ($1, $2, 'key.created', $3, $4)`, [tenant, `a0000000-0000-4000-8000-00000000000${n}`, { n }, at]);
    await row(2, '2026-01-02T00:00:00Z');
    await row(1, '2026-01-01T00:00:00Z');
    await row(3, '2026-01-03T00:00:00Z');
    // Enough more, in no order of time, for the backfill to take several batches.
    await ds.query(
      `INSERT INTO audit_events (tenant_id, id, action, details, created_at)
       SELECT $1, gen_random_uuid(), 'key.created', '{}', '2026-02-01T00:00:00Z'::timestamptz + random() * interval '300 days' FROM generate_series(1, 12000)`,
      [tenant],
    );
    await ds.runMigrations({ transaction: 'each' });
    await row(4, '2025-01-01T00:00:00Z');
    const order = await ds.query(`SELECT details->>'n' AS n, txid::text AS txid FROM audit_events WHERE tenant_id = $1 AND details ? 'n' ORDER BY txid, seq`, [tenant]);
    expect(order.map((r: { n: string }) => r.n)).toEqual(['1', '2', '3', '4']);
    expect(order.slice(0, 3).map((r: { txid: string }) => r.txid)).toEqual(['0', '0', '0']);
    // Every earlier row numbered, in the order of (created_at, id), each place once; and no index left behind.
    const [numbered] = await ds.query(
      `SELECT count(*)::int AS rows, count(DISTINCT seq)::int AS places, bool_and(txid = '0') AS all_zero,
              bool_and(in_time_order) AS in_order
         FROM (SELECT txid, seq, row_number() OVER (ORDER BY seq) = row_number() OVER (ORDER BY created_at, id) AS in_time_order
                 FROM audit_events WHERE tenant_id = $1 AND txid = '0') o`,
      [tenant],
    );
    expect(numbered).toEqual({ rows: 12003, places: 12003, all_zero: true, in_order: true });
    expect(await ds.query(`SELECT indexname FROM pg_indexes WHERE indexname = 'audit_events_unnumbered'`)).toEqual([]);
    await revertThrough(ds, 'AuditTransactionOrder1732300005500');
    expect(await ds.query(`SELECT count(*)::int AS n FROM audit_events WHERE tenant_id = $1`, [tenant])).toEqual([{ n: 12004 }]);
  });

  it('5500 waits for the audit table\'s lock a little at a time: a writer of audit rows is not queued behind it while a transaction holds the table', async () => {
    ds = await open(migrations);
    await ds.runMigrations({ transaction: 'each' });
    await revertThrough(ds, 'AuditTransactionOrder1732300005500');
    const tenant = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
    await ds.query(`INSERT INTO tenants (id, name) VALUES ($1, 'audit-lock')`, [tenant]);
    const [holder, writer] = [new Client({ connectionString: url }), new Client({ connectionString: url })];
    await Promise.all([holder.connect(), writer.connect()]);
    try {
      // A reader's transaction (a pg_dump, a report) holds the table while the upgrade starts.
      await holder.query('BEGIN');
      await holder.query('SELECT count(*) FROM audit_events');
      const migrated = ds.runMigrations({ transaction: 'each' });
      await waitFor(async () => (await writer.query(`SELECT 1 FROM pg_locks WHERE relation = 'audit_events'::regclass AND NOT granted`)).rowCount! > 0, 'the migration waiting for the table');
      // Ended only by the guard should the write wait for the holder: then it was queued behind the migration.
      let heldUntilGuard = false;
      const guard = setTimeout(() => {
        heldUntilGuard = true;
        void holder.query('COMMIT');
      }, 30_000);
      await writer.query(`INSERT INTO audit_events (tenant_id, id, action, details) VALUES ($1, gen_random_uuid(), 'key.created', '{}')`, [tenant]);
      clearTimeout(guard);
      expect(heldUntilGuard).toBe(false);
      if (!heldUntilGuard) await holder.query('COMMIT');
      await migrated;
      expect(await ds.query(`SELECT count(*)::int AS n FROM audit_events WHERE tenant_id = $1 AND txid IS NOT NULL`, [tenant])).toEqual([{ n: 1 }]);
    } finally {
      await Promise.all([holder.end(), writer.end()]);
    }
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
