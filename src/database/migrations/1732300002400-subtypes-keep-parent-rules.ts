import { MigrationInterface, QueryRunner } from 'typeorm';

/** The tenant that holds the core types, which tenant types may extend. */
const CORE_TENANT = '00000000-0000-0000-0000-000000000000';

/** The parent's resolved schema, as the nearest tenant has it (the type's own tenant first, then the core). */
const PARENT_RULES = `(SELECT p.resolved_schema - '$id' - '$schema' FROM item_types p
                        WHERE p.name = c.parent AND p.tenant_id IN (c.tenant_id, '${CORE_TENANT}')
                        ORDER BY p.tenant_id = c.tenant_id DESC LIMIT 1)`;

/**
 * A subtype's resolved schema carries its parent's whole resolved schema in `allOf`, so that its
 * items satisfy the parent's rules too (src/types/type-schema.ts: before, a subtype's keyword
 * replaced its parent's, so a subtype could loosen a `maxLength` or a `pattern`, or allow
 * additional properties, and `parent.*` then matched items its parent would refuse). Existing
 * subtypes are resolved again, level by level: each pass settles one more generation, and a
 * pass that changes nothing ends it. Items already stored are left as they are.
 */
export class SubtypesKeepParentRules1732300002400 implements MigrationInterface {
  name = 'SubtypesKeepParentRules1732300002400';

  async up(q: QueryRunner): Promise<void> {
    for (let pass = 0; pass < 100; pass++) {
      const [, changed]: [unknown, number] = await q.query(`
        UPDATE item_types c
           SET resolved_schema = (c.resolved_schema - 'allOf')
                 || jsonb_build_object('allOf', jsonb_build_array(${PARENT_RULES}) || coalesce(c.schema->'allOf', '[]'::jsonb))
         WHERE c.parent IS NOT NULL
           AND c.resolved_schema IS DISTINCT FROM (c.resolved_schema - 'allOf')
                 || jsonb_build_object('allOf', jsonb_build_array(${PARENT_RULES}) || coalesce(c.schema->'allOf', '[]'::jsonb))`);
      if (changed === 0) return;
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      UPDATE item_types c SET resolved_schema = CASE WHEN c.schema ? 'allOf' THEN (c.resolved_schema - 'allOf') || jsonb_build_object('allOf', c.schema->'allOf')
                                                     ELSE c.resolved_schema - 'allOf' END
       WHERE c.parent IS NOT NULL`);
  }
}
