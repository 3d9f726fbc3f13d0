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
 * Path parameter pipe: a malformed id is 400 `invalid_id` rather than a pointless lookup, with
 * `details.field` naming the parameter, as a malformed id in a body names its field.
 */
@Injectable()
export class ParseIdPipe implements PipeTransform<string, string> {
  transform(value: string, metadata?: ArgumentMetadata): string {
    const field = metadata?.data ?? 'id';
    if (!isId(value)) throw ApiError.badRequest('invalid_id', `${field} "${cutText(value, 64)}" is not a valid id`, { field });
    return canonicalId(value);
  }
}
