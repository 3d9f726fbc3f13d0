/**
 * The order of an item listing (`GET /items?sort=`), in one place: what a page follows and its
 * direction, the ORDER BY, the keyset condition for "after the cursor's position", and the cursor
 * itself. Every path of a listing (item-filter.ts: the plain walk, the window read, the property
 * scan) takes its order from here.
 *
 * Column keys: `created_at` (indexes items_listing, items_by_created), `updated_at`
 * (items_by_updated, migration 6500), `timestamp` (items_by_timestamp), ascending, or descending
 * with a leading `-`; ties go by id in the same direction, so a page never repeats or skips a row.
 * The default, `-created_at`, keeps the cursors the listing always had (list `items`,
 * milliseconds, which is how `created_at` is stored). Every other order issues cursors of its own
 * list, which carry the value at full precision: `updated_at` and `timestamp` of items written
 * before writes were cut to the millisecond hold microseconds, and a millisecond cursor would
 * step over rows of the millisecond it ends in.
 *
 * Property keys, `properties.<path>` (the path as a property clause takes it, property-filter.ts):
 * values compare as jsonb does (numbers numerically, strings by the database's collation, across
 * JSON types jsonb's order), and items without the property or with JSON null there come after
 * all others in both directions (SQL NULLs, NULLS LAST), ties and those items by id in the
 * order's direction. No index serves such an order: a page reads and sorts every item the other
 * filters select (a top-N sort), bounded by the statement timeout. Its cursors, of a list per
 * path and direction, carry the value's jsonb text as PostgreSQL prints it (exact), UNSET for the
 * group without a value, or for a value too long for a URL its digest (`longValuePosition`).
 */
import { createHash } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { inputIssues } from '../common/input-policy';
import {
  decodeCursor, decodeInstantCursor, decodeValueCursor, encodeCursor, encodeInstantCursor, encodeValueCursor, ListName,
} from '../common/pagination';
import { validationError } from '../common/validation';
import { MAX_PATH_KEYS, PATH_KEY_PATTERN, propertyPathOf, readableNumber } from './property-filter';

export const SORT_KEYS = ['created_at', 'updated_at', 'timestamp'] as const;
export type SortKey = (typeof SORT_KEYS)[number];
const PROPERTY_PREFIX = 'properties.';
/** A column key or `properties.<path>`, ascending, or descending with a leading `-` (`isSort`). */
export type Sort = string;
/** The column orders. */
export const SORTS: Sort[] = SORT_KEYS.flatMap((key) => [key, `-${key}`]);
export const DEFAULT_SORT: Sort = '-created_at';

/** Every `sort` accepted, as a regular expression's source (the OpenAPI pattern; isSort decides, with the same rules). */
export const SORT_PATTERN = `^-?(${SORT_KEYS.join('|')}|properties\\.${PATH_KEY_PATTERN}(\\.${PATH_KEY_PATTERN}){0,${MAX_PATH_KEYS - 1}})$`;
export const SORT_RULE =
  `must be created_at, updated_at, timestamp or properties.<path> (property keys of letters, digits, _ and -, at most ${MAX_PATH_KEYS}, ` +
  'joined by dots), ascending, or descending with a leading -';

export interface ListingOrder {
  sort: Sort;
  /** The column ordered by; none for a property order. */
  key?: SortKey;
  /** The property path ordered by (its keys, each checked by propertyPathOf). */
  path?: string[];
  descending: boolean;
}

/** The order `sort` names, or undefined when it names none. */
export function listingOrderOf(sort: unknown): ListingOrder | undefined {
  if (typeof sort !== 'string') return undefined;
  const descending = sort.startsWith('-');
  const key = descending ? sort.slice(1) : sort;
  if ((SORT_KEYS as readonly string[]).includes(key)) return { sort, key: key as SortKey, descending };
  const path = key.startsWith(PROPERTY_PREFIX) ? propertyPathOf(key.slice(PROPERTY_PREFIX.length)) : undefined;
  return path && { sort, path, descending };
}

export const isSort = (v: unknown): boolean => listingOrderOf(v) !== undefined;

/** The order of `sort` (checked by the query's validation, IsSort; 400 naming `sort` all the same). */
export function listingOrder(sort: Sort = DEFAULT_SORT): ListingOrder {
  const order = listingOrderOf(sort);
  if (!order) throw validationError([{ field: 'sort', message: SORT_RULE }]);
  return order;
}

/** Where a page starts: after the row with this value of the order (an instant at full precision, UTC; or a property's, `positionValueSql`) and this id. */
export interface ListingPosition {
  value: string;
  id: string;
}

const qualified = (alias: string | undefined, column: string) => (alias ? `${alias}.${column}` : column);

/** A path as an SQL text[] literal: each key quoted (a key `NULL` is no null), and no key can hold a quote, comma, brace or backslash (propertyPathOf). */
function pathLiteral(path: string[]): string {
  if (!path.every((k) => /^[A-Za-z0-9_-]+$/.test(k))) throw new Error('a property path reached SQL unchecked');
  return `'{${path.map((k) => `"${k}"`).join(',')}}'::text[]`;
}

/**
 * The order's value of a row of `alias` (none: of the statement's output): its column, or its
 * property with JSON null made SQL NULL, so that missing and null are one group, which NULLS LAST
 * puts after every value either way.
 */
export function orderValue(o: ListingOrder, alias?: string): string {
  if (o.path) return `nullif(${qualified(alias, 'properties')} #> ${pathLiteral(o.path)}, 'null'::jsonb)`;
  return qualified(alias, `"${o.key}"`);
}

/**
 * ORDER BY of the order: its value (`value`, the order's value of `alias` unless given), then id,
 * both one way, as a column order's index is read.
 */
export function orderBy(o: ListingOrder, alias?: string, value = orderValue(o, alias)): string {
  const direction = o.descending ? 'DESC' : 'ASC';
  // A column's index lists its values DESC NULLS FIRST (the default): a column order says no more, and keeps its index.
  return `${value} ${direction}${o.path ? ' NULLS LAST' : ''}, ${qualified(alias, 'id')} ${direction}`;
}

/**
 * The condition that a row of `alias` comes after `position`. For a column, a row comparison,
 * which PostgreSQL reads as a bound of the order's index (or of its first column) rather than a
 * test of each row. For a property, the group without a value comes last either way: after a
 * value come the greater (or lesser) values, that value's greater (lesser) ids and the whole
 * group; after a row of the group, its greater (lesser) ids.
 */
export function afterSql(o: ListingOrder, alias: string, position: ListingPosition, p: (v: unknown) => string): string {
  const cmp = o.descending ? '<' : '>';
  const value = orderValue(o, alias);
  if (!o.path) return `(${value}, ${alias}.id) ${cmp} (${p(position.value)}::timestamptz, ${p(position.id)}::uuid)`;
  if (position.value === UNSET) return `(${value} IS NULL AND ${alias}.id ${cmp} ${p(position.id)}::uuid)`;
  return `(${value} IS NULL OR (${value}, ${alias}.id) ${cmp} (${p(position.value)}::jsonb, ${p(position.id)}::uuid))`;
}

/**
 * SQL: the order's value of a row of `alias` as a cursor carries it: an instant to the
 * microsecond, in UTC; a property's jsonb text, NULL for none.
 */
export const positionValueSql = (o: ListingOrder, alias: string): string =>
  o.path ? `(${orderValue(o, alias)})::text` : `to_char(${orderValue(o, alias)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** A property order's position in the group without a value: JSON null, which no value of the others is (orderValue). */
export const UNSET = 'null';
/**
 * Longest jsonb text of a value a cursor carries: past it (a long string, an object), the cursor
 * carries its digest instead, which keeps cursors within what a URL holds.
 */
export const MAX_CURSOR_VALUE = 1000;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const digestOf = (json: string) => `sha256:${createHash('sha256').update(json).digest('hex')}`;

/** Whether a property cursor's value is the digest of a long one, which `longValuePosition` reads back. */
export const isDigest = (value: string): boolean => DIGEST.test(value);

const isDefault = (o: ListingOrder) => o.sort === DEFAULT_SORT;
const listOf = (o: ListingOrder): ListName => (isDefault(o) ? 'items' : `items?sort=${o.sort}`);

/** The cursor after `row`, which carries its `positionValueSql` as `position_value`. */
export function cursorAfter(o: ListingOrder, row: { id: string; created_at: Date | string; position_value: string | null }): string {
  if (isDefault(o)) return encodeCursor({ createdAt: new Date(row.created_at).toISOString(), id: row.id }, listOf(o));
  if (!o.path) return encodeInstantCursor({ at: row.position_value!, id: row.id }, listOf(o));
  const value = row.position_value ?? UNSET;
  return encodeValueCursor({ value: value.length > MAX_CURSOR_VALUE ? digestOf(value) : value, id: row.id }, listOf(o));
}

/**
 * Whether `json` is a value's jsonb text PostgreSQL reads (so that a forged cursor is a 400, never
 * its error): JSON, not null, within MAX_CURSOR_VALUE, text and depth as the input policy takes
 * them, and numbers as property clauses take them.
 */
function isCursorValue(json: string): boolean {
  if (json.length > MAX_CURSOR_VALUE) return false;
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return false;
  }
  // The tokens outside strings that are numbers: JSON.parse has read them, not their size.
  const numbers = json.replace(/"(?:[^"\\]|\\.)*"/g, '"').match(/-?\d[\d.eE+-]*/g) ?? [];
  return value !== null && inputIssues(value).length === 0 && numbers.every(readableNumber);
}

/** Where `cursor` starts a page of this order; 400 `validation_error` naming `cursor` for one another order (or list) issued. */
export function positionOf(o: ListingOrder, cursor: string | undefined): ListingPosition | undefined {
  if (isDefault(o)) {
    const p = decodeCursor(cursor, listOf(o));
    return p && { value: p.createdAt, id: p.id };
  }
  if (o.path) return decodeValueCursor(cursor, listOf(o), (value) => value === UNSET || isDigest(value) || isCursorValue(value));
  const p = decodeInstantCursor(cursor, listOf(o));
  return p && { value: p.at, id: p.id };
}

/**
 * The position of a cursor carrying a digest (`isDigest`): its item's value now, read through `m`,
 * when that is still the value whose digest it carries; undefined otherwise (the item changed or
 * is gone: the walk no longer knows where it was, or of a type not among `readableTypes` when given).
 */
export async function longValuePosition(
  m: Pick<EntityManager, 'query'>, position: ListingPosition, o: ListingOrder, tenantId: string, readableTypes?: string[],
): Promise<ListingPosition | undefined> {
  const readable = readableTypes ? ' AND i.type = ANY($3::text[])' : '';
  const rows: Array<{ value: string | null }> = await m.query(
    `SELECT ${positionValueSql(o, 'i')} AS value FROM items i WHERE i.tenant_id = $1 AND i.id = $2${readable}`,
    [tenantId, position.id, ...(readableTypes ? [readableTypes] : [])],
  );
  const value = rows[0]?.value;
  return value !== undefined && value !== null && digestOf(value) === position.value ? { value, id: position.id } : undefined;
}
