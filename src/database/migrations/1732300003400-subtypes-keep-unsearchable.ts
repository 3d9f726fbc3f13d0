import { MigrationInterface, QueryRunner } from 'typeorm';

/** The tenant that holds the core types, which tenant types may extend. */
const CORE_TENANT = '00000000-0000-0000-0000-000000000000';

type Schema = Record<string, any>;
const isObject = (s: unknown): s is Schema => s !== null && typeof s === 'object' && !Array.isArray(s);

/**
 * `keepUnsearchable` of src/types/type-schema.ts as it stood when this migration was written (a
 * migration must keep meaning what it meant): `merged` with each `"searchable": false` of `base`
 * kept where search's walk reads it.
 */
function keepUnsearchable(base: unknown, merged: unknown): unknown {
  if (!isObject(base) || !isObject(merged)) return merged;
  if (base.searchable === false) return merged.searchable === false ? merged : { ...merged, searchable: false };
  let out = merged;
  const put = (key: string, value: unknown) => {
    if (out === merged) out = { ...merged };
    out[key] = value;
  };
  if (isObject(base.properties)) {
    const props: Schema = isObject(merged.properties) ? merged.properties : {};
    const instead = merged.additionalProperties === undefined || merged.additionalProperties === true ? {} : merged.additionalProperties;
    let kept = props;
    for (const [name, sub] of Object.entries(base.properties)) {
      const there = Object.hasOwn(props, name) ? props[name] : isObject(instead) ? instead : undefined;
      if (there === undefined) continue;
      const next = keepUnsearchable(sub, there);
      if (next !== there) kept = { ...kept, [name]: next };
    }
    if (kept !== props) put('properties', kept);
  }
  for (const key of ['additionalProperties', 'items']) {
    if (!isObject(base[key])) continue;
    const there = merged[key] === undefined || merged[key] === true ? {} : merged[key];
    if (!isObject(there)) continue;
    const next = keepUnsearchable(base[key], there);
    if (next !== there) put(key, next);
  }
  return out;
}

/**
 * A subtype's resolved schema keeps each of its parent's `"searchable": false` where search reads
 * it: the merge of a parent's and a child's properties is one level deep, so a subtype's
 * `"searchable": true`, or its own nested `properties`, put text its parent keeps out of search
 * back in. Existing subtypes are resolved again, parents first (each pass settles one more
 * generation, and a pass that changes nothing ends it), and the items of each changed type are
 * indexed again. Nothing validates differently. `down` leaves the schemas as they are: they keep
 * out only what the parent meant to keep out.
 */
export class SubtypesKeepUnsearchable1732300003400 implements MigrationInterface {
  name = 'SubtypesKeepUnsearchable1732300003400';

  async up(q: QueryRunner): Promise<void> {
    // Each UPDATE of a resolved schema below fires item_types_search_reindex (migrations 0500,
    // 0600; keepUnsearchable returns a new object only for a schema that differs: its WHEN holds),
    // which recomputes the search columns of the type's items (of a core type's, in every
    // tenant) with item_search_index, as this migration did, reading the schema just written. A
    // type changed again in a later pass has its items indexed again then, so they end indexed
    // by its final schema. Indexing them again after the passes wrote every row twice.
    for (let pass = 0; pass < 100; pass++) {
      const rows: Array<{ tenant_id: string; name: string; resolved_schema: Schema; parent_schema: Schema | null }> = await q.query(`
        SELECT c.tenant_id, c.name, c.resolved_schema,
               (SELECT p.resolved_schema FROM item_types p
                 WHERE p.name = c.parent AND p.tenant_id IN (c.tenant_id, '${CORE_TENANT}')
                 ORDER BY p.tenant_id = c.tenant_id DESC LIMIT 1) AS parent_schema
          FROM item_types c
         WHERE c.parent IS NOT NULL`);
      let passChanged = 0;
      for (const row of rows) {
        const kept = keepUnsearchable(row.parent_schema, row.resolved_schema);
        if (kept === row.resolved_schema) continue;
        await q.query(`UPDATE item_types SET resolved_schema = $3 WHERE tenant_id = $1 AND name = $2`, [row.tenant_id, row.name, kept]);
        passChanged++;
      }
      if (passChanged === 0) break;
    }
  }

  async down(): Promise<void> {}
}
