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

export function decodeCursor(cursor: string | undefined): Position | undefined {
  if (cursor === undefined) return undefined;
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    // Only what encodeCursor makes passes: a forged id or date must not reach SQL.
    if (typeof createdAt === 'string' && typeof id === 'string' && isId(id) && /^\d{4}-\d\d-\d\dT[\d:.]+Z$/.test(createdAt) && new Date(createdAt).toISOString() === createdAt) {
      return { createdAt, id };
    }
  } catch {
    // fall through
  }
  throw validationError([{ field: 'cursor', message: 'is not a cursor this service issued' }]);
}
