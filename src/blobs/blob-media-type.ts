/**
 * The Content-Type stored with an upload and sent back on download. It is kept as the client
 * sent it (trimmed), but must be a well-formed media type that is safe to send as a header.
 */
import { ApiError } from '../common/api-error';
import { headerText } from '../common/input-policy';

export const DEFAULT_BLOB_TYPE = 'application/octet-stream';
const MAX_LENGTH = 255;
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
// type "/" subtype, then optional parameters in printable ASCII (no control characters).
const MEDIA_TYPE_RE = new RegExp(`^${TOKEN}/${TOKEN}(\\s*;[\\x20-\\x7e]*)?$`);

export function uploadMediaType(header: string | undefined): string {
  const value = (header ?? '').trim();
  if (value === '') return DEFAULT_BLOB_TYPE;
  if (value.length > MAX_LENGTH || !MEDIA_TYPE_RE.test(value)) {
    throw ApiError.badRequest('invalid_request', 'Content-Type must be a media type such as image/png', {
      content_type: headerText(value, MAX_LENGTH),
    });
  }
  return value;
}
