/** Keyset pagination: opaque cursors over (created_at, id), and the shared query DTO. */
import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString } from 'class-validator';
import { isId } from './ids';
import { IsQueryInt, validationError } from './validation';

export class PageQuery {
  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: 50 })
  @IsOptional() @IsQueryInt(1, 100)
  limit?: number;

  @ApiPropertyOptional({ description: 'Opaque cursor from a previous page\'s next_cursor' })
  @IsOptional() @IsString()
  cursor?: string;
}

export interface Position {
  createdAt: string;
  id: string;
}

export function encodeCursor(p: Position): string {
  return Buffer.from(JSON.stringify([p.createdAt, p.id])).toString('base64url');
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
 * Splits rows fetched with LIMIT `limit + 1` (newest first) into the page and the cursor of the
 * next one, null on the last page. Rows from `byteBoundedPage` say themselves when they were cut
 * short of `limit` with more after them.
 */
export function pageOf<T extends { id: string; more?: boolean | null }>(
  rows: T[],
  limit: number,
  createdAt: (row: T) => Date | string,
): { page: T[]; next_cursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const next_cursor = (rows.length > limit || cutShort(rows)) && last ? encodeCursor({ createdAt: new Date(createdAt(last)).toISOString(), id: last.id }) : null;
  return { page, next_cursor };
}

/** `validId`: what an id of the listed rows looks like (UUIDs, but for OAuth clients' ids). */
export function decodeCursor(cursor: string | undefined, validId: (id: string) => boolean = isId): Position | undefined {
  if (cursor === undefined) return undefined;
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    // Only what encodeCursor makes passes: a forged id or date must not reach SQL. Year 0000 is
    // a date to JavaScript and none to PostgreSQL (which goes from 1 BC to 1 AD).
    if (
      typeof createdAt === 'string' &&
      typeof id === 'string' &&
      validId(id) &&
      /^(?!0000)\d{4}-\d\d-\d\dT[\d:.]+Z$/.test(createdAt) &&
      new Date(createdAt).toISOString() === createdAt
    ) {
      return { createdAt, id };
    }
  } catch {
    // fall through
  }
  throw validationError([{ field: 'cursor', message: 'is not a cursor this service issued' }]);
}
