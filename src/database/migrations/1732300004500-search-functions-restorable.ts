import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The tenant-scoped text indexes (migration 0800) survive `pg_dump` / `pg_restore`.
 *
 * pg_restore runs every statement with an empty search_path. Building `items_search_scoped`
 * and `items_search_grams_scoped` inlines `item_search_scoped`, whose body called
 * `item_search_scope(...)` by its bare name: not found there, so both indexes were left out of
 * the restored database (pg_restore exited 1, "errors ignored on restore: 2") and the service
 * started on it without them, every search a sequential scan of the tenant.
 *
 * Of the functions that a restore evaluates (those of index expressions, generated columns,
 * CHECKs and DEFAULTs; triggers are created after the data is loaded), only that one refers
 * to a function of the service's own: `item_search_grams` (generated `search_grams`) and
 * `item_search_scope` use built-ins only, which pg_catalog always provides. The bodies now name
 * `item_search_scope` with the schema it lives in, read here rather than written as `public`,
 * so that a service run in another schema through search_path gets its own. Not `SET
 * search_path` on the function: PostgreSQL does not inline a function with SET clauses, and
 * the planner matches the searches' `item_search_scoped(...)` to the indexes after inlining.
 * `item_search_scoped_query` (PL/pgSQL, planned per search with the service's own search_path)
 * gets the same name, so that its tag comes from the very function the index's does.
 *
 * No REINDEX: each function returns what it returned before for every input (the name resolves
 * to the same function), so the entries already in the indexes stay right.
 */
export class SearchFunctionsRestorable1732300004500 implements MigrationInterface {
  name = 'SearchFunctionsRestorable1732300004500';

  async up(q: QueryRunner): Promise<void> {
    const [{ schema }] = await q.query(
      `SELECT quote_ident(n.nspname) AS schema FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE p.oid = 'item_search_scope(uuid)'::regprocedure`,
    );
    await define(q, `${schema}.`, `${schema}.item_search_scope`);
  }

  async down(q: QueryRunner): Promise<void> {
    await define(q, '', 'item_search_scope');
  }
}

/** The two functions of migration 0800 that call the tag function, calling it as `scope`. */
async function define(q: QueryRunner, schema: string, scope: string): Promise<void> {
  // One expression without a sub-select, so that PostgreSQL still inlines it (migration 0800).
  await q.query(`
      CREATE OR REPLACE FUNCTION ${schema}item_search_scoped(p_tenant uuid, p_vector tsvector) RETURNS tsvector
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
        SELECT CASE WHEN p_vector = ''::tsvector THEN ''::tsvector
                    ELSE array_to_tsvector(string_to_array(
                           ${scope}(p_tenant) || array_to_string(tsvector_to_array(p_vector), E'\\x01' || ${scope}(p_tenant)),
                           E'\\x01'))
               END
      $fn$`);
  await q.query(`
      CREATE OR REPLACE FUNCTION ${schema}item_search_scoped_query(p_tenant uuid, p_query tsquery) RETURNS tsquery
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
      DECLARE
        v_text text := p_query::text;
        v_tag text := ${scope}(p_tenant);
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
}
