/**
 * The order of an item listing (`GET /items?sort=`), in one place: the column a page follows and
 * its direction, the ORDER BY that walks that column's index, the keyset condition for "after the
 * cursor's position", and the cursor itself. Every path of a listing (item-filter.ts: the plain
 * walk, the window read, the property scan) takes its order from here.
 *
 * Keys: `created_at` (indexes items_listing, items_by_created), `updated_at` (items_by_updated,
 * migration 6500), `timestamp` (items_by_timestamp), ascending, or descending with a leading `-`;
 * ties go by id in the same direction, so a page never repeats or skips a row. The default,
 * `-created_at`, keeps the cursors the listing always had (list `items`, milliseconds, which is
 * how `created_at` is stored). Every other order issues cursors of its own list, which carry the
 * value at full precision: `updated_at` and `timestamp` of items written before writes were cut
 * to the millisecond hold microseconds, and a millisecond cursor would step over rows of the
 * millisecond it ends in.
 */
import { decodeCursor, decodeInstantCursor, encodeCursor, encodeInstantCursor, ListName } from '../common/pagination';

export const SORT_KEYS = ['created_at', 'updated_at', 'timestamp'] as const;
export type SortKey = (typeof SORT_KEYS)[number];
export type Sort = SortKey | `-${SortKey}`;
export const SORTS: Sort[] = SORT_KEYS.flatMap((key) => [key, `-${key}` as const]);
export const DEFAULT_SORT: Sort = '-created_at';

export interface ListingOrder {
  sort: Sort;
  key: SortKey;
  descending: boolean;
}

/** Where a page starts: after the row with this value of the order's column (full precision, UTC) and this id. */
export interface ListingPosition {
  value: string;
  id: string;
}

export function listingOrder(sort: Sort = DEFAULT_SORT): ListingOrder {
  const descending = sort.startsWith('-');
  return { sort, key: (descending ? sort.slice(1) : sort) as SortKey, descending };
}

const qualified = (alias: string | undefined, column: string) => (alias ? `${alias}.${column}` : column);

/** The order's column, on `alias` (none: a column of the statement's output). */
export const orderColumn = (o: ListingOrder, alias?: string): string => qualified(alias, `"${o.key}"`);

/** ORDER BY of the order: its column, then id, both one way, as its index is read. */
export function orderBy(o: ListingOrder, alias?: string): string {
  const direction = o.descending ? 'DESC' : 'ASC';
  return `${orderColumn(o, alias)} ${direction}, ${qualified(alias, 'id')} ${direction}`;
}

/**
 * The condition that a row of `alias` comes after `position`: a row comparison, which PostgreSQL
 * reads as a bound of the order's index (or of its first column) rather than a test of each row.
 */
export function afterSql(o: ListingOrder, alias: string, position: ListingPosition, p: (v: unknown) => string): string {
  return `(${orderColumn(o, alias)}, ${alias}.id) ${o.descending ? '<' : '>'} (${p(position.value)}::timestamptz, ${p(position.id)}::uuid)`;
}

/** SQL: the order's value of a row of `alias` to the microsecond, in UTC, as an instant cursor carries it. */
export const positionValueSql = (o: ListingOrder, alias: string): string =>
  `to_char(${orderColumn(o, alias)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

const isDefault = (o: ListingOrder) => o.sort === DEFAULT_SORT;
const listOf = (o: ListingOrder): ListName => (isDefault(o) ? 'items' : `items?sort=${o.sort}`);

/** The cursor after `row`, which carries its `positionValueSql` as `position_value`. */
export function cursorAfter(o: ListingOrder, row: { id: string; created_at: Date | string; position_value: string }): string {
  return isDefault(o)
    ? encodeCursor({ createdAt: new Date(row.created_at).toISOString(), id: row.id }, listOf(o))
    : encodeInstantCursor({ at: row.position_value, id: row.id }, listOf(o));
}

/** Where `cursor` starts a page of this order; 400 `validation_error` naming `cursor` for one another order (or list) issued. */
export function positionOf(o: ListingOrder, cursor: string | undefined): ListingPosition | undefined {
  if (isDefault(o)) {
    const p = decodeCursor(cursor, listOf(o));
    return p && { value: p.createdAt, id: p.id };
  }
  const p = decodeInstantCursor(cursor, listOf(o));
  return p && { value: p.at, id: p.id };
}
