import { MigrationInterface, QueryRunner } from 'typeorm';

/** item_types_search_reindex as migration 1732300000600 left it (restored by `down`). */
const REINDEX_0600 = `
      CREATE OR REPLACE FUNCTION item_types_search_reindex() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      BEGIN
        UPDATE items i SET (search_vector, search_title, search_document) = (
                 SELECT x.vector, x.title, x.document FROM item_search_index(i.tenant_id, i.type, i.properties, i.tags) x)
         WHERE i.type = NEW.name
           AND (NEW.tenant_id = '00000000-0000-0000-0000-000000000000' OR i.tenant_id = NEW.tenant_id);
        RETURN NULL;
      END
      $fn$`;

/**
 * A type change that leaves what search reads of the schema as it was (src/types/search-view.ts)
 * may skip the reindex of the type's items: it says so with the transaction-local setting
 * `svc.search_reindex` = `off` for its UPDATE of item_types. Since types in use can change
 * (PATCH /types/{name}), the reindex rewrote every item row of the type for a change such as a
 * new optional property, in the transaction that holds the tenant's type catalogue lock (item
 * writes of tenant types wait for it). Any other UPDATE of a resolved schema reindexes as before.
 * Replacing a function body takes no lock on a table.
 */
export class TypeChangeSearchReindexSkippable1732300005800 implements MigrationInterface {
  name = 'TypeChangeSearchReindexSkippable1732300005800';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE OR REPLACE FUNCTION item_types_search_reindex() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      BEGIN
        IF current_setting('svc.search_reindex', true) = 'off' THEN
          RETURN NULL;
        END IF;
        UPDATE items i SET (search_vector, search_title, search_document) = (
                 SELECT x.vector, x.title, x.document FROM item_search_index(i.tenant_id, i.type, i.properties, i.tags) x)
         WHERE i.type = NEW.name
           AND (NEW.tenant_id = '00000000-0000-0000-0000-000000000000' OR i.tenant_id = NEW.tenant_id);
        RETURN NULL;
      END
      $fn$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(REINDEX_0600);
  }
}
