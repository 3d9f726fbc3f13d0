/**
 * The contract every blob content store meets (disk and PostgreSQL today; an S3-compatible
 * store would be a third implementation of these four members and nothing else).
 *
 * Content is addressed by (tenant id, SHA-256 hex), so it is immutable: writing the same
 * address twice writes the same bytes, and a store may skip the second write. Two tenants'
 * copies of the same bytes are two addresses: removing one never touches the other. Stores hold
 * bytes only; the `blobs` metadata table (owned by BlobsService) says which blobs exist, so
 * a store need not be transactional with it. The service writes content before metadata,
 * hence a metadata row always points at complete content, and removes content only once no
 * row names it. `within` is the service's transaction, which holds the address's lock
 * (blob-address-lock.ts): a store in the database works in it, so that one request uses one
 * connection; another store ignores it.
 */
import type { Readable } from 'node:stream';
import type { EntityManager } from 'typeorm';
import type { ByteRange } from './byte-range';

export const BLOB_STORE = Symbol('BLOB_STORE');

export interface BlobStore {
  /** Stores the content of `file`, a complete staged upload whose SHA-256 is `hash`.
   *  Atomic: a concurrent or later `open` sees all of it or nothing. May move `file` away;
   *  the caller removes it afterwards if it is still there. */
  put(tenantId: string, hash: string, file: string, within?: EntityManager): Promise<void>;

  /** The content as a stream, never buffered whole (only `range` of it when given: offsets
   *  within the content, both included). Resolves only once the content is known to exist, so
   *  a caller can still answer with an error status before sending headers; rejects with
   *  BlobContentMissing when it does not. */
  open(tenantId: string, hash: string, range?: ByteRange): Promise<Readable>;

  /** Whether the content is present (used to re-store content lost behind a metadata row). */
  has(tenantId: string, hash: string, within?: EntityManager): Promise<boolean>;

  /** Deletes the content; a no-op when absent (a deleted blob, a deleted tenant's purge). */
  remove(tenantId: string, hash: string, within?: EntityManager): Promise<void>;

  /** Deletes whatever is left of a deleted tenant's content, and its place in the store. */
  removeTenant(tenantId: string): Promise<void>;
}

export class BlobContentMissing extends Error {
  constructor(tenantId: string, hash: string) {
    super(`blob content ${hash} of tenant ${tenantId} is missing from the store`);
  }
}
