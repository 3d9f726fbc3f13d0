/**
 * Keyset pagination: opaque cursors over (created_at, id) of one list (or over another instant and
 * the id, at full precision: `encodeInstantCursor`; or over another value and the id:
 * `encodeValueCursor`), and the shared query (a DTO, or read by a
 * route that reads its query itself).
 */
import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional, ApiQuery } from '@nestjs/swagger';
import { IsOptional, IsString } from 'class-validator';
import { isId } from './ids';
import { createValidationPipe, IsQueryInt, validationError } from './validation';

/** Every list's `limit`. */
const LIMIT = { minimum: 1, maximum: 100, default: 50 } as const;
const CURSOR_DOC = 'Opaque cursor from a previous page\'s next_cursor';

export class PageQuery {
  @ApiPropertyOptional(LIMIT)
  @IsOptional() @IsQueryInt(LIMIT.minimum, LIMIT.maximum)
  limit?: number;

  @ApiPropertyOptional({ description: CURSOR_DOC })
  @IsOptional() @IsString()
  cursor?: string;
}

/** Other parameters are left for the route (a page's `done`, a link's tracking ones), not refused. */
const PAGE_QUERY_PIPE = createValidationPipe({ unknownFields: 'drop' });

/**
 * `limit` and `cursor` of a route that reads its query itself (the account pages, which check it
 * after their sign-in check, as the API checks input after credentials): checked as PageQuery is
 * everywhere, 400 validation_error naming the field. Document them with ApiPageQuery.
 */
export function pageQueryOf(query: unknown): Promise<PageQuery> {
  return PAGE_QUERY_PIPE.transform({ ...(query as object) }, { type: 'query', metatype: PageQuery, data: undefined });
}

/** PageQuery's parameters in the OpenAPI document, for a route that reads them with pageQueryOf. */
export const ApiPageQuery = () =>
  applyDecorators(
    ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', ...LIMIT } }),
    ApiQuery({ name: 'cursor', required: false, schema: { type: 'string' }, description: CURSOR_DOC }),
  );

export interface Position {
  createdAt: string;
  id: string;
}

/**
 * The list a cursor was issued by: a cursor of one list is refused by another, where it would
 * name a position among rows it never came from.
 */
export type ListName =
  | 'audit' | 'audit_export' | 'blobs' | 'blocked_clients' | 'bulk_jobs' | 'client_grants' | 'clients' | 'connections' | 'deliveries' | 'edge_types' | 'edges' | 'events' | 'grants'
  | 'integrations' | 'items' | 'keys' | 'sessions' | 'tenant_edges' | 'tenants' | 'types' | 'users' | 'webhooks'
  // An item listing in another order than the default (items/listing-order.ts): a list of its own per order.
  | `items?sort=${string}`;

const encode = (parts: string[]): string => Buffer.from(JSON.stringify(parts)).toString('base64url');

export function encodeCursor(p: Position, list: ListName): string {
  return encode([p.createdAt, p.id, list]);
}

/**
 * Most bytes of JSON a page of a list holds before it stops short of its `limit`, with its
 * cursor to the rest: a page of 100 items of 1 MB was a 100 MB answer and 740 MB more of this
 * process's memory for one request.
 */
export const PAGE_BYTES = 8 * 1024 * 1024;

/** A row of `byteBoundedPage`: `more` is true on the last row of a page cut short with rows after it. */
export type Bounded<T> = T & { more: boolean | null };

/**
 * `page` (a `SELECT … ORDER BY … LIMIT`) with its rows kept only while the bytes before each,
 * summed over `bytes` (an SQL expression of its columns), are under `budget`: at least one row,
 * and the one that crosses the mark. The sums run over the page's rows alone (a window over the
 * WHERE would serialise every matching row). `order` is the page's ORDER BY, in its output
 * columns' names.
 */
export function byteBoundedPage(page: string, order: string, bytes: string, budget = PAGE_BYTES): string {
  return `SELECT * FROM (
      SELECT p.*, lead(true) OVER w AS more,
             coalesce(sum(${bytes}) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS bytes_before
        FROM (${page}) p
      WINDOW w AS (ORDER BY ${order})
    ) bounded
    WHERE bytes_before < ${budget}
    ORDER BY ${order}`;
}

/** Whether rows from `byteBoundedPage` stopped short of their LIMIT with rows after them. */
export const cutShort = (rows: Array<{ more?: boolean | null }>): boolean => rows.at(-1)?.more === true;

/**
 * Splits rows fetched with LIMIT `limit + 1` into the page and the cursor of the next one (made
 * by `cursorOf` from the page's last row), null on the last page. Rows from `byteBoundedPage`
 * say themselves when they were cut short of `limit` with more after them.
 */
export function pageWith<T extends { more?: boolean | null }>(rows: T[], limit: number, cursorOf: (last: T) => string): { page: T[]; next_cursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { page, next_cursor: (rows.length > limit || cutShort(rows)) && last ? cursorOf(last) : null };
}

/**
 * A row of a scan with a budget (items' property clauses, item-filter.ts `propertyScanSql`; a
 * member's `GET /edges`): the rows read in page order, at most a budget of them, each kept with
 * `hit` true, and the budget's last row read, kept or not, with `at_budget` true: where the next
 * page starts. Other listings' rows have neither field.
 */
export interface ScannedRow {
  hit?: boolean;
  at_budget?: boolean;
}

/**
 * Where a page of scanned rows (fetched with LIMIT `limit + 1`) ends, when its scan reached its
 * budget before the page was full: its rows (the last row read, unless it is kept, left out) and
 * that row, for the cursor. Undefined otherwise: the page is cut as any other.
 */
export function scanEndOf<T extends ScannedRow>(rows: T[], limit: number): { page: T[]; last: T } | undefined {
  const last = rows.at(-1);
  if (!last?.at_budget) return undefined;
  if (!last.hit) return { page: rows.slice(0, -1), last };
  return rows.length <= limit ? { page: rows, last } : undefined;
}

/** `pageWith` for a list ordered by (created_at, id), newest first. */
export function pageOf<T extends { id: string; more?: boolean | null }>(
  rows: T[],
  limit: number,
  createdAt: (row: T) => Date | string,
  list: ListName,
): { page: T[]; next_cursor: string | null } {
  return pageWith(rows, limit, (last) => encodeCursor({ createdAt: new Date(createdAt(last)).toISOString(), id: last.id }, list));
}

/**
 * The position `cursor` names in `list`. `validId`: what an id of the listed rows looks like
 * (UUIDs, but for OAuth clients' ids and type names). Cursors issued before they named their
 * list (two parts) still page any list.
 */
export function decodeCursor(cursor: string | undefined, list: ListName, validId: (id: string) => boolean = isId): Position | undefined {
  return decodeWith(cursor, (parts) => {
    const [createdAt, id, issuedBy = list] = parts;
    // A forged id or date must not reach SQL. Year 0000 is a date to JavaScript and none to
    // PostgreSQL (which goes from 1 BC to 1 AD).
    if (
      (parts.length === 2 || parts.length === 3) &&
      issuedBy === list &&
      validId(id) &&
      /^(?!0000)\d{4}-\d\d-\d\dT[\d:.]+Z$/.test(createdAt) &&
      new Date(createdAt).toISOString() === createdAt
    ) {
      return { createdAt, id };
    }
    return undefined;
  });
}

/**
 * What `read` makes of the cursor's parts, for a cursor that an encoder of this module made: a
 * base64url JSON array of strings that encodes back to it byte for byte, whose parts `read`
 * accepts; `undefined` for no cursor; else 400 `validation_error` naming `cursor` (a part that
 * `read` finds throwing, such as an impossible date, included).
 */
function decodeWith<T>(cursor: string | undefined, read: (parts: string[]) => T | undefined): T | undefined {
  if (cursor === undefined) return undefined;
  try {
    const parts: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(parts) && parts.every((part) => typeof part === 'string') && encode(parts) === cursor) {
      const position = read(parts);
      if (position !== undefined) return position;
    }
  } catch {
    // not a cursor
  }
  throw notACursor();
}

/**
 * A position at an instant's full precision, as PostgreSQL keeps a timestamptz (microseconds,
 * `2026-01-02T03:04:05.123456Z`), and an id: for a list ordered by a column that may hold
 * values finer than the millisecond of `encodeCursor`, where rows of one millisecond would fall
 * between pages (item listings sorted by `updated_at` or `timestamp`: rows written before writes
 * were cut to the millisecond hold microseconds).
 */
export interface InstantPosition {
  at: string;
  id: string;
}

const INSTANT = /^(?!0000)\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

export function encodeInstantCursor(p: InstantPosition, list: ListName): string {
  return encode([p.at, p.id, list]);
}

export function decodeInstantCursor(cursor: string | undefined, list: ListName, validId: (id: string) => boolean = isId): InstantPosition | undefined {
  return decodeWith(cursor, (parts) => {
    const [at, id, issuedBy] = parts;
    if (parts.length !== 3 || issuedBy !== list) return undefined;
    // A real date (JavaScript checks its millisecond part; the digits past it are any), so that
    // no cursor reaches SQL as a value PostgreSQL refuses (a 500).
    const millis = `${at.slice(0, 23)}Z`;
    return INSTANT.test(at) && new Date(millis).toISOString() === millis && validId(id) ? { at, id } : undefined;
  });
}

/**
 * A position at a value and an id, for a list ordered by values that are neither instants nor
 * numbers (item listings sorted by a property: listing-order.ts, whose `validValue` says which
 * values a cursor may carry, so that no forged one reaches SQL as one PostgreSQL refuses).
 */
export interface ValuePosition {
  value: string;
  id: string;
}

export function encodeValueCursor(p: ValuePosition, list: ListName): string {
  return encode([p.value, p.id, list]);
}

export function decodeValueCursor(cursor: string | undefined, list: ListName, validValue: (value: string) => boolean): ValuePosition | undefined {
  return decodeWith(cursor, (parts) => {
    const [value, id, issuedBy] = parts;
    return parts.length === 3 && issuedBy === list && isId(id) && validValue(value) ? { value, id } : undefined;
  });
}

/**
 * A position in a list read in transaction order (the audit log's export): the row's transaction id
 * and its number, both as PostgreSQL prints them (`xid8` and `bigint`).
 */
export interface TransactionPosition {
  txid: string;
  seq: string;
}

export function encodeTransactionCursor(p: TransactionPosition, list: ListName): string {
  return encode([p.txid, p.seq, list]);
}

export function decodeTransactionCursor(cursor: string | undefined, list: ListName): TransactionPosition | undefined {
  return decodeWith(cursor, (parts) => {
    const [txid, seq, issuedBy] = parts;
    // Within the types' ranges, so that no cursor reaches SQL as a value it refuses (a 500).
    if (
      parts.length === 3 &&
      issuedBy === list &&
      /^(0|[1-9]\d{0,19})$/.test(txid) && BigInt(txid) < 2n ** 64n &&
      /^(0|-?[1-9]\d{0,18})$/.test(seq) && BigInt(seq) < 2n ** 63n && BigInt(seq) >= -(2n ** 63n)
    ) {
      return { txid, seq };
    }
    return undefined;
  });
}

/** A position in a list read in publication order (the event history): a bigint as text. */
export function encodeSequenceCursor(seq: string, list: ListName): string {
  return encode([seq, list]);
}

export function decodeSequenceCursor(cursor: string | undefined, list: ListName): string | undefined {
  return decodeWith(cursor, ([seq, issuedBy, ...rest]) =>
    rest.length === 0 && issuedBy === list && /^(0|[1-9]\d{0,18})$/.test(seq) && BigInt(seq) < 2n ** 63n ? seq : undefined,
  );
}

const notACursor = () => validationError([{ field: 'cursor', message: 'is not a cursor this list issued' }]);

/**
 * `decodeCursor` for a list ordered by whole seconds since the epoch (the provider's OAuth
 * clients, grants and sessions): the position's seconds and id.
 */
export function decodeSecondsCursor(cursor: string | undefined, list: ListName, validId: (id: string) => boolean): { seconds: number; id: string } | undefined {
  const position = decodeCursor(cursor, list, validId);
  if (!position) return undefined;
  const seconds = Date.parse(position.createdAt) / 1000;
  // Such a list issues whole seconds only: a cursor with a fraction was not made here.
  if (!Number.isInteger(seconds)) throw notACursor();
  return { seconds, id: position.id };
}
