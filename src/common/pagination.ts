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
 * Splits rows fetched with LIMIT `limit + 1` (newest first) into the page and the cursor of the
 * next one, null on the last page.
 */
export function pageOf<T extends { id: string }>(
  rows: T[],
  limit: number,
  createdAt: (row: T) => Date | string,
  /** The rows were cut short of `limit` (a byte budget), and more follow. */
  cutShort = false,
): { page: T[]; next_cursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const next_cursor = (rows.length > limit || cutShort) && last ? encodeCursor({ createdAt: new Date(createdAt(last)).toISOString(), id: last.id }) : null;
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
