/**
 * Whether a type in use may take a new schema: never one that some stored item would not fit
 * (items keep the schema version they were checked against, and one in the trash can be restored
 * as it is). Proven from the schemas where it can be, since reading items is what costs: the
 * tenant's item writes wait on the catalogue lock while the check runs, hence its bound.
 */
import { randomUUID } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { ApiError } from '../common/api-error';
import { validatorPrefix } from './compiled-validators';
import { PropertiesValidator, validatorFor } from './property-validation';
import { propertyFieldIssues, propertyIssues } from './property-issues';
import { addedProperties, isWidening } from './schema-widening';
import type { JsonSchema } from './type-schema';

/**
 * The most items a PATCH of a type in use reads to check a schema change that isWidening cannot
 * prove safe (the type's and its subtypes' together): the tenant's writes of tenant-type items
 * wait while it runs (TypesService.update). Above it, such a change is refused unread.
 */
export const SCHEMA_CHECK_MAX_ITEMS = 10_000;
/** Items read at a time during that check. */
const SCHEMA_CHECK_PAGE = 500;
/** Items a refusal names at most; the check stops once it has found them. */
const SCHEMA_CHECK_MAX_REPORTED = 10;
/** Problems named per item. */
const SCHEMA_CHECK_FIELDS_REPORTED = 5;

/** A type as its items were checked (its name and resolved schema), and the resolved schema a change gives it. */
export interface SchemaChange {
  row: { name: string; resolved_schema: JsonSchema };
  resolved: JsonSchema;
}

interface InvalidItem {
  id: string;
  type: string;
  fields: Array<{ field: string; message: string }>;
}

/** Why `properties` do not fit: fields named as an item write names them (`properties.<field>`); [] when they fit. */
async function itemIssues(validate: PropertiesValidator, properties: Record<string, unknown>): Promise<Array<{ field: string; message: string }>> {
  let errors;
  try {
    errors = await validate(properties);
  } catch (err) {
    // The schema cannot check them (a time limit): not shown to fit, so counted against the change.
    if (err instanceof ApiError) return [{ field: 'properties', message: err.message }];
    throw err;
  }
  if (!errors.length) return [];
  return propertyFieldIssues(propertyIssues(errors));
}

/**
 * Refuses (409 `type_in_use`) a change of resolved schemas that could leave an item invalid.
 * Where isWidening proves the new schema accepts all the old one did (provenWidening), no item is validated; the
 * items of the other types are counted (at most SCHEMA_CHECK_MAX_ITEMS, or refused unread)
 * and checked against their type's new schema, in pages by id. Every state counts: an item
 * in the trash can be restored as it is.
 */
export async function assertItemsStayValid(
  tenantId: string,
  changes: SchemaChange[],
  readable: (type: string) => boolean,
  m: EntityManager,
): Promise<void> {
  const unproven: SchemaChange[] = [];
  for (const c of changes) if (!(await provenWidening(tenantId, c.row, c.resolved, m))) unproven.push(c);
  if (!unproven.length) return;
  const names = unproven.map((c) => c.row.name);
  const [{ n }]: Array<{ n: number }> = await m.query(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM items WHERE tenant_id = $1 AND type = ANY($2::text[]) LIMIT $3) held`,
    [tenantId, names, SCHEMA_CHECK_MAX_ITEMS + 1],
  );
  if (n > SCHEMA_CHECK_MAX_ITEMS) {
    throw ApiError.conflict(
      'type_in_use',
      `The change may not fit every existing item, and the type${names.length > 1 ? ' and its subtypes hold' : ' holds'} more than ${SCHEMA_CHECK_MAX_ITEMS} items, more than are checked`,
      { reason: 'too_many_items', types: names.filter(readable), max_checked_items: SCHEMA_CHECK_MAX_ITEMS },
    );
  }
  const invalid: InvalidItem[] = [];
  for (const { row, resolved } of unproven) {
    if (invalid.length >= SCHEMA_CHECK_MAX_REPORTED) break;
    await checkItems(tenantId, row.name, validatorFor(`${validatorPrefix(tenantId, row.name)}check:${randomUUID()}`, resolved, tenantId), invalid, m);
  }
  if (invalid.length) {
    const shown = invalid.filter((i) => readable(i.type));
    const [first] = shown;
    const message = first
      ? `Item ${first.id} of type "${first.type}" would not fit the new schema (${first.fields[0]?.field} ${first.fields[0]?.message})`
      : 'Items of a subtype this credential may not read would not fit the new schema';
    throw ApiError.conflict('type_in_use', message, {
      reason: 'items_invalid',
      invalid_items: shown,
      ...(shown.length < invalid.length ? { unreadable_items: invalid.length - shown.length } : {}),
    });
  }
}

/**
 * Whether `type`'s items all fit `resolved` by isWidening alone, given which of the top-level
 * properties it adds no item of the type holds. A property added to an open schema (no
 * `additionalProperties: false`) constrains a key items could already hold, with any value;
 * when none holds it, the change is proven all the same. Finding that out reads the key sets
 * of all the type's items in SQL (no validation, no bound: it costs less than the search
 * reindex the change may bring), which is what lets a type of any size gain a property.
 */
async function provenWidening(tenantId: string, type: SchemaChange['row'], resolved: JsonSchema, m: EntityManager): Promise<boolean> {
  if (isWidening(type.resolved_schema, resolved)) return true;
  const added = addedProperties(type.resolved_schema, resolved);
  if (!added.length || !isWidening(type.resolved_schema, resolved, new Set(added))) return false;
  const held: Array<{ key: string }> = await m.query(
    `SELECT k AS key FROM unnest($3::text[]) k WHERE EXISTS (SELECT 1 FROM items WHERE tenant_id = $1 AND type = $2 AND properties ? k)`,
    [tenantId, type.name, added],
  );
  if (!held.length) return true;
  const heldKeys = new Set(held.map((h) => h.key));
  return isWidening(type.resolved_schema, resolved, new Set(added.filter((k) => !heldKeys.has(k))));
}

/** Adds to `invalid` the items of `type` that `validate` refuses, reading them in pages by id, until it holds SCHEMA_CHECK_MAX_REPORTED. */
async function checkItems(tenantId: string, type: string, validate: PropertiesValidator, invalid: InvalidItem[], m: EntityManager): Promise<void> {
  for (let after: string | null = null; ; ) {
    const page: Array<{ id: string; properties: Record<string, unknown> }> = await m.query(
      `SELECT id, properties FROM items WHERE tenant_id = $1 AND type = $2 AND ($3::uuid IS NULL OR id > $3::uuid) ORDER BY id LIMIT $4`,
      [tenantId, type, after, SCHEMA_CHECK_PAGE],
    );
    for (const item of page) {
      const fields = await itemIssues(validate, item.properties);
      if (!fields.length) continue;
      invalid.push({ id: item.id, type, fields: fields.slice(0, SCHEMA_CHECK_FIELDS_REPORTED) });
      if (invalid.length >= SCHEMA_CHECK_MAX_REPORTED) return;
    }
    if (page.length < SCHEMA_CHECK_PAGE) return;
    after = page[page.length - 1].id;
  }
}
