/**
 * Blob identity: a blob is named by the SHA-256 of its bytes, written as 64 lowercase hex
 * digits. Paths accept an optional `sha256:` prefix; items refer to blobs as `sha256:<hex>`.
 */
import { ArgumentMetadata, Injectable, PipeTransform } from '@nestjs/common';
import { invalidId } from '../common/ids';

export const BLOB_HASH_RE = /^[0-9a-f]{64}$/;
/** A blob reference as it appears in item properties. */
export const BLOB_REF_RE = /^sha256:[0-9a-f]{64}$/;
export const BLOB_REF_PREFIX = 'sha256:';

/** `abc…` or `sha256:abc…` to `abc…`; undefined when it is neither. */
export function parseBlobHash(value: string): string | undefined {
  const hex = value.startsWith(BLOB_REF_PREFIX) ? value.slice(BLOB_REF_PREFIX.length) : value;
  return BLOB_HASH_RE.test(hex) ? hex : undefined;
}

export const blobRef = (hash: string): string => `${BLOB_REF_PREFIX}${hash}`;

/** Path parameter pipe: anything but a (prefixed) lowercase SHA-256 hex is 400 `invalid_id`. */
@Injectable()
export class ParseBlobHashPipe implements PipeTransform<string, string> {
  transform(value: string, metadata?: ArgumentMetadata): string {
    const hash = parseBlobHash(value);
    if (!hash) throw invalidId(metadata?.data ?? 'hash', value, 'a blob hash (64 lowercase hex digits, optionally prefixed "sha256:")', 80);
    return hash;
  }
}
