import { MigrationInterface, QueryRunner } from 'typeorm';
import { ITEM_SEARCH_DOCUMENT_0500, ITEM_SEARCH_INDEX_0500 } from './1732300000500-search';

/**
 * Search storage, after profiling GET /search on 100k items (bench/search.ts):
 *
 * 1. `items.search_document` stores the text snippets are cut from. Rebuilding it for every
 *    result row walked the item's properties against its type's schema in PL/pgSQL, ~130 us a
 *    row while ts_headline itself takes ~25 us: on a 20-result page that was over half of the
 *    statement. The trigger of migration 1732300000500 now derives the vector, the trigram
 *    title and the document from one walk of the properties, so they cannot drift apart.
 *    The document holds the searchable strings, most important first (weights A, B, C, D, each
 *    part capped), joined by ' · ', with U+E000/U+E001 removed (snippet.ts marks matches with
 *    them). Tags are not part of it: whether they may show in a snippet depends on the
 *    caller's metadata permission, so the search statement appends them when allowed.
 *
 * 2. `search_vector` is kept in the row (STORAGE MAIN) and compressed with lz4 where the
 *    server supports it. Ranking reads the vector of every match; when a row passed ~2 kB the
 *    toaster compressed it with pglz or moved it to the TOAST table, and detoasting then cost
 *    ~6 us per match, most of a one-word search. MAIN makes the toaster compress and move the
 *    properties and the document first; lz4 decompresses several times faster than pglz.
 */
export class SearchStorage1732300000600 implements MigrationInterface {
  name = 'SearchStorage1732300000600';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE items ADD COLUMN search_document text NOT NULL DEFAULT ''`);
    // New OUT parameters change the function's row type, which CREATE OR REPLACE refuses.
    await q.query(`DROP FUNCTION item_search_index(uuid, text, jsonb, text[])`);
    await q.query(`DROP FUNCTION item_search_document(uuid, text, jsonb, text[])`);
    await q.query(`
      CREATE FUNCTION item_search_index(p_tenant uuid, p_type text, p_properties jsonb, p_tags text[],
                                        OUT vector tsvector, OUT title text, OUT document text)
      LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
      DECLARE
        sch jsonb;
      BEGIN
        SELECT t.resolved_schema INTO sch FROM item_types t
         WHERE t.tenant_id IN (p_tenant, '00000000-0000-0000-0000-000000000000') AND t.name = p_type
         ORDER BY t.tenant_id = p_tenant DESC LIMIT 1;
        SELECT setweight(to_tsvector('simple', left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'A'), ''), 10000)), 'A')
            || setweight(to_tsvector('simple', left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'B'), '')
                                                   || ' ' || array_to_string(coalesce(p_tags, '{}'), ' '), 20000)), 'B')
            || setweight(to_tsvector('simple', left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'C'), ''), 100000)), 'C')
            || setweight(to_tsvector('simple', left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'D'), ''), 100000)), 'D'),
               left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'A'), ''), 1000),
               translate(concat_ws(' · ',
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'A'), 2000),
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'B'), 5000),
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'C'), 30000),
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'D'), 10000)),
               U&'\\E000\\E001', '')
          INTO vector, title, document
          FROM item_search_strings(coalesce(sch, '{}'), p_properties) s;
      END
      $fn$`);
    await this.refreshFunctions(q, ['search_vector', 'search_title', 'search_document'], 'x.vector, x.title, x.document');
    await q.query(`ALTER TABLE items ALTER COLUMN search_vector SET STORAGE MAIN`);
    await q.query(`
      DO $do$ BEGIN
        ALTER TABLE items ALTER COLUMN search_vector SET COMPRESSION lz4;
      EXCEPTION WHEN feature_not_supported THEN
        RAISE NOTICE 'lz4 is not supported by this server: search vectors stay pglz-compressed';
      END $do$`);
    // Recomputes all three, which also stores every vector under the new storage settings.
    await q.query(`
      UPDATE items i SET (search_vector, search_title, search_document) = (
               SELECT x.vector, x.title, x.document FROM item_search_index(i.tenant_id, i.type, i.properties, i.tags) x)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION item_search_index(uuid, text, jsonb, text[])`);
    await q.query(ITEM_SEARCH_INDEX_0500);
    await q.query(ITEM_SEARCH_DOCUMENT_0500);
    await this.refreshFunctions(q, ['search_vector', 'search_title'], 'x.vector, x.title');
    await q.query(`ALTER TABLE items DROP COLUMN search_document`);
    await q.query(`ALTER TABLE items ALTER COLUMN search_vector SET STORAGE EXTENDED, ALTER COLUMN search_vector SET COMPRESSION DEFAULT`);
  }

  /** The row trigger and the type-change reindex, writing `columns` from item_search_index. */
  private async refreshFunctions(q: QueryRunner, columns: string[], values: string): Promise<void> {
    const into = columns.map((c) => `NEW.${c}`).join(', ');
    await q.query(`
      CREATE OR REPLACE FUNCTION items_search_refresh() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      BEGIN
        IF TG_OP = 'UPDATE' AND NEW.properties = OLD.properties AND NEW.tags = OLD.tags AND NEW.type = OLD.type THEN
          RETURN NEW;
        END IF;
        SELECT ${values} INTO ${into}
          FROM item_search_index(NEW.tenant_id, NEW.type, NEW.properties, NEW.tags) x;
        RETURN NEW;
      END
      $fn$`);
    await q.query(`
      CREATE OR REPLACE FUNCTION item_types_search_reindex() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      BEGIN
        UPDATE items i SET (${columns.join(', ')}) = (
                 SELECT ${values} FROM item_search_index(i.tenant_id, i.type, i.properties, i.tags) x)
         WHERE i.type = NEW.name
           AND (NEW.tenant_id = '00000000-0000-0000-0000-000000000000' OR i.tenant_id = NEW.tenant_id);
        RETURN NULL;
      END
      $fn$`);
  }
}
