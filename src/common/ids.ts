/** Resource ids are random UUIDs: never guessable, never sequential. */
import { ArgumentMetadata, Injectable, PipeTransform } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { ApiError } from './api-error';
import { cutText } from './input-policy';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const newId = (): string => randomUUID();
export const isId = (value: string): boolean => UUID_RE.test(value);

/** An id as it is stored and compared (UUIDs are read in either case); anything else as it is. */
export const canonicalId = (value: string): string => (isId(value) ? value.toLowerCase() : value);

/**
 * The refusal of a malformed id (400 `invalid_id`) rather than a pointless lookup, with
 * `details.field` naming the path parameter or body field it came in: every kind of id (a
 * UUID, a client id, a blob hash) is refused in these words, `what` saying what one looks like,
 * quoting at most `quoted` characters of it.
 */
export const invalidId = (field: string, value: unknown, what = 'a valid id', quoted = 64): ApiError =>
  ApiError.badRequest('invalid_id', `${field} "${cutText(String(value), quoted)}" is not ${what}`, { field });

/** Path parameter pipe for the UUID ids (invalidId). */
@Injectable()
export class ParseIdPipe implements PipeTransform<string, string> {
  transform(value: string, metadata?: ArgumentMetadata): string {
    if (!isId(value)) throw invalidId(metadata?.data ?? 'id', value);
    return canonicalId(value);
  }
}
