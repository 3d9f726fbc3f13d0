import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The two item_search_* functions as this migration defines them; migration 1732300000600
 * replaces them and restores these on revert.
 */
export const ITEM_SEARCH_INDEX_0500 = `
      CREATE FUNCTION item_search_index(p_tenant uuid, p_type text, p_properties jsonb, p_tags text[],
                                        OUT vector tsvector, OUT title text)
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
               left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'A'), ''), 1000)
          INTO vector, title
          FROM item_search_strings(coalesce(sch, '{}'), p_properties) s;
      END
      $fn$`;

export const ITEM_SEARCH_DOCUMENT_0500 = `
      CREATE FUNCTION item_search_document(p_tenant uuid, p_type text, p_properties jsonb, p_tags text[])
      RETURNS text
      LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
      DECLARE
        sch jsonb;
        doc text;
      BEGIN
        SELECT t.resolved_schema INTO sch FROM item_types t
         WHERE t.tenant_id IN (p_tenant, '00000000-0000-0000-0000-000000000000') AND t.name = p_type
         ORDER BY t.tenant_id = p_tenant DESC LIMIT 1;
        SELECT translate(concat_ws(' · ',
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'A'), 2000),
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'B'), 5000),
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'C'), 30000),
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'D'), 10000),
                 nullif(array_to_string(coalesce(p_tags, '{}'), ' '), '')),
               U&'\\E000\\E001', '')
          INTO doc
          FROM item_search_strings(coalesce(sch, '{}'), p_properties) s;
        RETURN doc;
      END
      $fn$`;

/**
 * Full-text search (src/search). Each item carries `search_vector`, a weighted tsvector, and
 * `search_title`, its title/name text for the typo-tolerant trigram fallback. A BEFORE INSERT
 * OR UPDATE trigger keeps both in step with `properties`, `tags` and `type` inside the writing
 * transaction, so every write path (create, PATCH, natural-key upsert, bulk writes, bulk
 * actions, plain SQL) is indexed without the writers knowing about search.
 *
 * What is indexed: every string in `properties`, however deeply nested (objects and arrays),
 * except under a property whose schema (the type's resolved_schema, looked up in the item's
 * tenant or among the core types) says `"searchable": false`, at any depth that the schema
 * describes through `properties`, `additionalProperties` or `items`; plus the tags.
 *
 * Weights, by the top-level property a string sits under:
 *   A  title, name            B  description, and the tags
 *   C  body                   D  everything else
 *
 * Text search configuration: 'simple' (lower-casing, no stemming, no stop words), for three
 * reasons: items of all tenants and languages share one index, and an English stemmer
 * mangles names, codes and other languages; a query made only of stop words ("the who")
 * would match nothing under 'english'; and prefix matching of the word being typed only
 * works on unstemmed lexemes ("runn:*" never reaches "running", which 'english' stores as
 * "run"). The price is that "runs" does not find "running" unless it is the last, prefix-
 * matched word of the query. src/search/search-query.ts uses the same configuration;
 * changing it takes a new migration that redefines these functions and recomputes the column.
 *
 * Size caps keep a tsvector far below PostgreSQL's 1 MB limit, whatever the item: at most
 * 10k characters of A text, 20k of B, 100k of C and 100k of D are indexed.
 *
 * Indexes: GIN on (tenant_id, search_vector) through btree_gin, so one tenant's search reads
 * only that tenant's posting lists (14-24 ms against 55-68 ms for a plain index on 1M rows),
 * and GIN trigram (pg_trgm) on (tenant_id, search_title) for the fallback.
 *
 * Item types cannot change while items of theirs exist (409 type_in_use), but should that
 * rule ever be relaxed, an AFTER UPDATE trigger on item_types recomputes that type's items.
 */
export class Search1732300000500 implements MigrationInterface {
  name = 'Search1732300000500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE EXTENSION IF NOT EXISTS btree_gin`);
    await q.query(`CREATE EXTENSION IF NOT EXISTS pg_trgm`);
    await q.query(`ALTER TABLE items ADD COLUMN search_vector tsvector NOT NULL DEFAULT ''::tsvector,
                                     ADD COLUMN search_title text NOT NULL DEFAULT ''`);

    // Every searchable string of an item (its properties, walked with its type's resolved
    // schema) with the weight of its top-level property, in document order.
    await q.query(`
      CREATE FUNCTION item_search_strings(p_schema jsonb, p_properties jsonb)
      RETURNS TABLE (weight "char", txt text)
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
        WITH RECURSIVE walk (top, ord, val, sch) AS (
          SELECT e.key, ARRAY[e.ordinality], e.value,
                 coalesce(p_schema -> 'properties' -> e.key,
                          CASE WHEN jsonb_typeof(p_schema -> 'additionalProperties') = 'object' THEN p_schema -> 'additionalProperties' END)
            FROM jsonb_each(CASE WHEN jsonb_typeof(p_properties) = 'object' THEN p_properties ELSE '{}'::jsonb END)
                   WITH ORDINALITY AS e(key, value, ordinality)
          UNION ALL
          SELECT w.top, w.ord || c.n, c.val, c.sch
            FROM walk w
            CROSS JOIN LATERAL (
              SELECT o.ordinality AS n, o.value AS val,
                     coalesce(w.sch -> 'properties' -> o.key,
                              CASE WHEN jsonb_typeof(w.sch -> 'additionalProperties') = 'object' THEN w.sch -> 'additionalProperties' END) AS sch
                FROM jsonb_each(CASE WHEN jsonb_typeof(w.val) = 'object' THEN w.val ELSE '{}'::jsonb END)
                       WITH ORDINALITY AS o(key, value, ordinality)
              UNION ALL
              SELECT a.ordinality, a.value,
                     CASE WHEN jsonb_typeof(w.sch -> 'items') = 'object' THEN w.sch -> 'items' END
                FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.val) = 'array' THEN w.val ELSE '[]'::jsonb END)
                       WITH ORDINALITY AS a(value, ordinality)
            ) c
           WHERE jsonb_typeof(w.val) IN ('object', 'array')
             AND (w.sch -> 'searchable') IS DISTINCT FROM 'false'::jsonb
        )
        SELECT CASE WHEN w.top IN ('title', 'name') THEN 'A'
                    WHEN w.top = 'description' THEN 'B'
                    WHEN w.top = 'body' THEN 'C'
                    ELSE 'D' END::"char",
               w.val #>> '{}'
          FROM walk w
         WHERE jsonb_typeof(w.val) = 'string'
           AND (w.sch -> 'searchable') IS DISTINCT FROM 'false'::jsonb
         ORDER BY w.ord
      $fn$`);

    // The stored vector and the trigram text, for an item of the given tenant and type (the
    // tenant's own type, or a core type). PL/pgSQL rather than SQL because it keeps its
    // statements' plans for the session: a SQL function is planned again on every call,
    // which made each write ~1.5 ms slower.
    await q.query(ITEM_SEARCH_INDEX_0500);

    // The text ts_headline cuts snippets from (only for the page being returned): the same
    // strings, most important first, with the private-use characters U+E000/U+E001 removed
    // because the search service uses them to mark matches.
    await q.query(ITEM_SEARCH_DOCUMENT_0500);

    await q.query(`
      CREATE FUNCTION items_search_refresh() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      BEGIN
        IF TG_OP = 'UPDATE' AND NEW.properties = OLD.properties AND NEW.tags = OLD.tags AND NEW.type = OLD.type THEN
          RETURN NEW;
        END IF;
        SELECT x.vector, x.title INTO NEW.search_vector, NEW.search_title
          FROM item_search_index(NEW.tenant_id, NEW.type, NEW.properties, NEW.tags) x;
        RETURN NEW;
      END
      $fn$`);
    await q.query(`
      CREATE TRIGGER items_search_refresh BEFORE INSERT OR UPDATE OF properties, tags, type ON items
      FOR EACH ROW EXECUTE FUNCTION items_search_refresh()`);

    await q.query(`
      CREATE FUNCTION item_types_search_reindex() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      BEGIN
        UPDATE items i SET (search_vector, search_title) = (
                 SELECT x.vector, x.title FROM item_search_index(i.tenant_id, i.type, i.properties, i.tags) x)
         WHERE i.type = NEW.name
           AND (NEW.tenant_id = '00000000-0000-0000-0000-000000000000' OR i.tenant_id = NEW.tenant_id);
        RETURN NULL;
      END
      $fn$`);
    await q.query(`
      CREATE TRIGGER item_types_search_reindex AFTER UPDATE OF resolved_schema ON item_types
      FOR EACH ROW WHEN (OLD.resolved_schema IS DISTINCT FROM NEW.resolved_schema)
      EXECUTE FUNCTION item_types_search_reindex()`);

    // Backfill, then index (building an index once is faster than maintaining it row by row).
    await q.query(`
      UPDATE items i SET (search_vector, search_title) = (
               SELECT x.vector, x.title FROM item_search_index(i.tenant_id, i.type, i.properties, i.tags) x)`);
    await q.query(`CREATE INDEX items_search ON items USING gin (tenant_id, search_vector)`);
    await q.query(`CREATE INDEX items_search_title_trgm ON items USING gin (tenant_id, search_title gin_trgm_ops)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER item_types_search_reindex ON item_types`);
    await q.query(`DROP FUNCTION item_types_search_reindex()`);
    await q.query(`DROP TRIGGER items_search_refresh ON items`);
    await q.query(`DROP FUNCTION items_search_refresh()`);
    await q.query(`DROP FUNCTION item_search_document(uuid, text, jsonb, text[])`);
    await q.query(`DROP FUNCTION item_search_index(uuid, text, jsonb, text[])`);
    await q.query(`DROP FUNCTION item_search_strings(jsonb, jsonb)`);
    await q.query(`DROP INDEX items_search_title_trgm`);
    await q.query(`DROP INDEX items_search`);
    await q.query(`ALTER TABLE items DROP COLUMN search_title, DROP COLUMN search_vector`);
    // The extensions stay: other objects may have come to rely on them.
  }
}
