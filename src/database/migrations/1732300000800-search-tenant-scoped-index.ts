import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tenant-scoped text indexes: each indexed lexeme is prefixed with a tag of its item's tenant,
 * so a search reads posting lists that hold (almost) only that tenant's items.
 *
 * The btree_gin indexes on (tenant_id, vector) of migrations 0500 and 0700 kept other tenants
 * out too, but GIN answers them by intersecting the word's postings with the tenant's own
 * posting list, which holds every item of the tenant: on 100k items of one tenant that
 * intersection was most of the index time (1.0-1.2 ms of a one-word query, 0.4 ms of a
 * two-word one, against 0.04-0.5 ms here), and it grows with the tenant.
 *
 * - `item_search_scope(tenant)`: the tag, six hex digits of the uuid's own hash function
 *   (uuid_hash_extended, which hash partitioning relies on staying the same across versions;
 *   md5 would fail on servers in FIPS mode). It is a bucket, not an identity: two tenants that
 *   share a tag share posting lists, which costs speed and never correctness, because every
 *   query also tests `tenant_id` and the item's own vector.
 * - `item_search_scoped(tenant, vector)`: the vector's lexemes with the tag in front, without
 *   positions or weights (GIN indexes lexemes only). Only the indexes compute it.
 * - `item_search_scoped_query(tenant, query)`: a query for that index that matches at least
 *   every item `query` matches: the same lexemes tagged, phrase operators (<->, <N>) turned
 *   into AND, since the index has no positions (the exact test on `search_vector` settles the
 *   phrase). A negated group `!( ... )` (an excluded phrase) cannot be widened that way, so for
 *   such a query it returns NULL and the caller skips the index (src/search/search-query.ts).
 *   With only &, |, ! of single lexemes and prefixes, GIN needs no recheck, so the index
 *   expression is not evaluated per row at query time.
 */
export class SearchTenantScopedIndex1732300000800 implements MigrationInterface {
  name = 'SearchTenantScopedIndex1732300000800';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION item_search_scope(p_tenant uuid) RETURNS text
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$ SELECT lpad(to_hex(uuid_hash_extended(p_tenant, 0) & 16777215), 6, '0') $fn$`);
    // One expression without a sub-select, so that PostgreSQL inlines it (every write computes
    // it twice): ~15 µs per item, against ~50 µs for an unnest() sub-select, which a SQL function
    // cannot be inlined with. Lexemes never contain control characters (the parser reads them as
    // blanks), so \x01 can join and split them.
    await q.query(`
      CREATE FUNCTION item_search_scoped(p_tenant uuid, p_vector tsvector) RETURNS tsvector
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
        SELECT CASE WHEN p_vector = ''::tsvector THEN ''::tsvector
                    ELSE array_to_tsvector(string_to_array(
                           item_search_scope(p_tenant) || array_to_string(tsvector_to_array(p_vector), E'\\x01' || item_search_scope(p_tenant)),
                           E'\\x01'))
               END
      $fn$`);
    // The query's text form is read as tokens, so that an operator is never looked for inside a
    // quoted lexeme: a lexeme ('...', quotes doubled inside), a phrase operator, or anything else.
    // PL/pgSQL because the planner calls it for every statement (folding it to a constant), and
    // a SQL function that cannot be inlined would be parsed and planned anew on each call.
    await q.query(`
      CREATE FUNCTION item_search_scoped_query(p_tenant uuid, p_query tsquery) RETURNS tsquery
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
      DECLARE
        v_text text := p_query::text;
        v_tag text := item_search_scope(p_tenant);
        v_out text := '';
        v_token text[];
      BEGIN
        IF strpos(v_text, '!(') > 0 THEN
          RETURN NULL;
        END IF;
        FOR v_token IN
          SELECT t.m FROM regexp_matches(v_text, '(''(?:[^'']|'''')*'')|(<(?:-|[0-9]+)>)|([^''<]+|<)', 'g') WITH ORDINALITY AS t(m, n)
           ORDER BY t.n
        LOOP
          v_out := v_out || CASE WHEN v_token[1] IS NOT NULL THEN '''' || v_tag || substr(v_token[1], 2)
                                 WHEN v_token[2] IS NOT NULL THEN '&'
                                 ELSE v_token[3] END;
        END LOOP;
        RETURN v_out::tsquery;
      END
      $fn$`);
    await q.query(`CREATE INDEX items_search_scoped ON items USING gin (item_search_scoped(tenant_id, search_vector))`);
    await q.query(`CREATE INDEX items_search_grams_scoped ON items USING gin (item_search_scoped(tenant_id, search_grams))`);
    await q.query(`DROP INDEX items_search`);
    await q.query(`DROP INDEX items_search_grams`);
    // Statistics of the new index expressions, which the planner's estimates of text matches use.
    await q.query(`ANALYZE items`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX items_search ON items USING gin (tenant_id, search_vector)`);
    await q.query(`CREATE INDEX items_search_grams ON items USING gin (tenant_id, search_grams)`);
    await q.query(`DROP INDEX items_search_scoped`);
    await q.query(`DROP INDEX items_search_grams_scoped`);
    await q.query(`DROP FUNCTION item_search_scoped_query(uuid, tsquery)`);
    await q.query(`DROP FUNCTION item_search_scoped(uuid, tsvector)`);
    await q.query(`DROP FUNCTION item_search_scope(uuid)`);
  }
}
