/**
 * Owns blob metadata (`blobs` table) and the upload flow: stage the body while hashing it,
 * de-duplicate per tenant, hand new content to the BlobStore, then record it. Also answers
 * the items module's "which of these blob references does this tenant lack?", the tenant's
 * blob listing and a blob's deletion (admins; refused while an item refers to it).
 *
 * Upload steps:
 *   1. reject a declared Content-Length over BLOB_MAX_BYTES before reading anything (413), and a
 *      Content-Encoding other than gzip, deflate, br or identity (415);
 *   2. stream the body, decoded as its Content-Encoding says, into `<BLOB_DIR>/.staging/<uuid>`
 *      through SHA-256, stopping past the limit (which counts the bytes sent and, apart, the
 *      decoded bytes);
 *   3. under the address's lock (blob-address-lock.ts), which serialises concurrent uploads
 *      of the same bytes and keeps a deletion's removal of the content out: if the tenant
 *      already has the hash (and the store has the bytes), 200 with that record;
 *   4. still under it, store the content, then INSERT the metadata row;
 *   5. remove the staging file, whatever happened.
 */
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { DataSource, EntityManager } from 'typeorm';
import { actorOf, AuditService } from '../audit/audit.service';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { AppConfig } from '../config/app-config';
import { lockBlobAddress } from './blob-address-lock';
import { BLOB_HASH_RE, blobRef, parseBlobHash } from './blob-hash';
import { blobInUse, referencingItems } from './blob-references';
import { BLOB_STORE, BlobContentMissing, BlobStore } from './blob-store';
import type { ByteRange } from './byte-range';
import { BlobList, BlobResponse, ListBlobsQuery } from './blobs.dto';
import { decodeCursor, pageOf } from '../common/pagination';
import { unsupportedEncoding } from '../common/body-parsing';
import { decodeUpload, isUploadEncoding, stageUpload, UploadAborted, UploadNotEncodedAsDeclared, UploadTooLarge } from './upload-staging';

/** Staging files untouched this long belong to uploads that died with a process (a live one writes on). */
const STALE_STAGING_MS = 60 * 60 * 1000;

interface BlobRow {
  hash: string;
  size: string;
  content_type: string;
  created_at: Date;
}

const COLUMNS = 'hash, size, content_type, created_at';
const isBlobHash = (id: string): boolean => BLOB_HASH_RE.test(id);

function toResponse(row: BlobRow): BlobResponse {
  return {
    hash: row.hash,
    ref: blobRef(row.hash),
    size: Number(row.size),
    content_type: row.content_type,
    created_at: row.created_at.toISOString(),
  };
}

export function blobTooLarge(maxBytes: number): ApiError {
  return new ApiError(413, 'blob_too_large', `Blobs may be at most ${maxBytes} bytes`, { max_bytes: maxBytes });
}

export const blobNotFound = (): ApiError => ApiError.notFound('blob_not_found', 'No such blob');

@Injectable()
export class BlobsService implements OnModuleInit {
  private readonly logger = new Logger(BlobsService.name);
  private readonly stagingDir: string;
  private readonly maxBytes: number;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    private readonly audit: AuditService,
    config: AppConfig,
  ) {
    // Under BLOB_DIR, so the disk store can rename a staged file into place.
    this.stagingDir = join(resolve(config.BLOB_DIR), '.staging');
    this.maxBytes = config.BLOB_MAX_BYTES;
  }

  /**
   * Deletes up to `limit` of a deleted tenant's blobs, content first, so that a removal that fails
   * leaves its row for the next pass rather than content no row names: how many; fewer than
   * `limit` once none is left, the tenant's place in the store gone too.
   */
  async purgeTenant(tenantId: string, limit: number): Promise<number> {
    const rows: Array<{ hash: string }> = await this.db.query(`SELECT hash FROM blobs WHERE tenant_id = $1 LIMIT $2`, [tenantId, limit]);
    for (const { hash } of rows) await this.store.remove(tenantId, hash);
    await this.db.query(`DELETE FROM blobs WHERE tenant_id = $1 AND hash = ANY($2::text[])`, [tenantId, rows.map((r) => r.hash)]);
    // The last batch: what the store keeps beside the content (the disk store's directories) goes too.
    if (rows.length < limit) await this.store.removeTenant(tenantId);
    return rows.length;
  }

  async onModuleInit(): Promise<void> {
    await this.removeStaleStaging();
  }

  /**
   * Removes the staging files left by uploads that died with a process (any instance's: they
   * may share BLOB_DIR), at start-up and then now and then (StagingJanitor); returns how many.
   * Creates nothing: an instance that never receives an upload leaves no trace on disk.
   */
  async removeStaleStaging(): Promise<number> {
    const names = await readdir(this.stagingDir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    const cutoff = Date.now() - STALE_STAGING_MS;
    let removed = 0;
    for (const name of names) {
      const file = join(this.stagingDir, name);
      const info = await stat(file).catch(() => undefined);
      if (info && info.mtimeMs < cutoff) {
        await rm(file, { force: true });
        removed++;
      }
    }
    return removed;
  }

  /**
   * Stores an upload for the tenant. `created` is false when the tenant already had these
   * bytes; the existing record (with its original content type) is returned then.
   */
  async upload(
    tenantId: string,
    body: Readable,
    contentType: string,
    declaredLength: number | undefined,
    contentEncoding = 'identity',
  ): Promise<{ blob: BlobResponse; created: boolean }> {
    const coding = contentEncoding.trim().toLowerCase();
    if (!isUploadEncoding(coding)) throw unsupportedEncoding();
    // The limit holds for the bytes sent whatever their encoding (decodeUpload counts them too).
    if (declaredLength !== undefined && declaredLength > this.maxBytes) throw blobTooLarge(this.maxBytes);
    const staged = join(this.stagingDir, randomUUID());
    try {
      await mkdir(this.stagingDir, { recursive: true });
      let hash: string;
      let size: number;
      const decoded = coding === 'identity' ? undefined : decodeUpload(body, coding, this.maxBytes);
      try {
        ({ hash, size } = await stageUpload(decoded?.content ?? body, staged, this.maxBytes));
      } catch (err) {
        decoded?.stop();
        if (err instanceof UploadTooLarge) throw blobTooLarge(this.maxBytes);
        if (err instanceof UploadNotEncodedAsDeclared) throw ApiError.badRequest('invalid_request', 'The request body does not match its Content-Encoding');
        if (err instanceof UploadAborted) throw ApiError.badRequest('invalid_request', 'The upload was interrupted');
        throw err;
      }
      const { row, created } = await this.db.transaction((m) => this.record(m, tenantId, hash, size, contentType, staged));
      return { blob: toResponse(row), created };
    } catch (err) {
      throw isFileSystemError(err) ? this.storeFailed(err) : err;
    } finally {
      await rm(staged, { force: true }).catch((err) => this.logger.warn({ err, staged }, 'could not remove a staging file'));
    }
  }

  /**
   * Steps 3 and 4 of an upload, under the address's lock: a deletion of the same blob is before
   * them or after, never between the content's storing and its row's.
   */
  private async record(
    m: EntityManager,
    tenantId: string,
    hash: string,
    size: number,
    contentType: string,
    staged: string,
  ): Promise<{ row: BlobRow; created: boolean }> {
    await lockBlobAddress(m, tenantId, hash);
    const existing = await this.find(tenantId, hash, m);
    // Self-healing: content lost behind a metadata row is stored again from this upload.
    if (!existing || !(await this.store.has(tenantId, hash, m))) await this.store.put(tenantId, hash, staged, m);
    if (existing) return { row: existing, created: false };
    const [inserted]: BlobRow[] = await m.query(
      `INSERT INTO blobs (tenant_id, hash, size, content_type, created_at) VALUES ($1, $2, $3, $4, date_trunc('milliseconds', now()))
       RETURNING ${COLUMNS}`,
      [tenantId, hash, size, contentType],
    );
    return { row: inserted, created: true };
  }

  /**
   * DELETE /blobs/{hash}: removes the record, audited `blob.deleted`, then the content. Refused
   * (409 `conflict`, `details.reason` `blob_in_use`) while an item of the tenant, in any state,
   * refers to it; revisions do not count. The row is locked first: an item write that checked
   * the blob holds a key-share lock on it to its commit (findMissing), so the deletion waits
   * for it and then sees its item. The content goes after the commit (removeUnrecorded).
   */
  async remove(p: Principal, hash: string): Promise<BlobResponse> {
    const row = await this.db.transaction(async (m) => {
      const [locked]: BlobRow[] = await m.query(`SELECT ${COLUMNS} FROM blobs WHERE tenant_id = $1 AND hash = $2 FOR UPDATE`, [p.tenantId, hash]);
      if (!locked) throw blobNotFound();
      const users = await referencingItems(m, p.tenantId, hash);
      if (users.count > 0) throw blobInUse(hash, users);
      await m.query('DELETE FROM blobs WHERE tenant_id = $1 AND hash = $2', [p.tenantId, hash]);
      const details = { actor: actorOf(p), hash, size: Number(locked.size), content_type: locked.content_type };
      await this.audit.record({ tenantId: p.tenantId, action: 'blob.deleted', details }, m);
      return locked;
    });
    await this.removeUnrecorded(p.tenantId, hash).catch((err) => this.logger.warn({ err, hash }, 'the content of a deleted blob could not be removed'));
    return toResponse(row);
  }

  /**
   * Removes content that no row names, under the address's lock: an upload that stored the same
   * bytes again meanwhile has its row by then, or waits to store them anew. Content this leaves
   * behind (the process died between the commit and here, or the store failed) is unreachable
   * (no row, so 404), taken up again by an upload of the same bytes, and removed with its tenant.
   */
  private async removeUnrecorded(tenantId: string, hash: string): Promise<void> {
    await this.db.transaction(async (m) => {
      await lockBlobAddress(m, tenantId, hash);
      if (!(await this.find(tenantId, hash, m))) await this.store.remove(tenantId, hash, m);
    });
  }

  /** The tenant's blobs, newest first, a page at a time. */
  async list(tenantId: string, q: ListBlobsQuery): Promise<BlobList> {
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'blobs', isBlobHash);
    const rows: Array<BlobRow & { id: string }> = await this.db.query(
      `SELECT ${COLUMNS}, hash AS id FROM blobs
        WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, hash) < ($2, $3::text)) AND ($4::text IS NULL OR content_type = $4)
        ORDER BY created_at DESC, hash DESC LIMIT $5`,
      [tenantId, after?.createdAt ?? null, after?.id ?? null, q.content_type ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'blobs');
    return { blobs: page.map(toResponse), next_cursor };
  }

  /** The metadata record, or 404 `blob_not_found` (also for another tenant's blob). */
  async get(tenantId: string, hash: string): Promise<BlobResponse> {
    const row = await this.find(tenantId, hash);
    if (!row) throw blobNotFound();
    return toResponse(row);
  }

  /**
   * The record and a stream of the bytes, or of the range `rangeOf` picks from the record (which
   * may throw to refuse it); nothing is sent yet, so errors can still be 404s.
   */
  async open(
    tenantId: string,
    hash: string,
    rangeOf: (blob: BlobResponse) => ByteRange | undefined,
  ): Promise<{ blob: BlobResponse; content: Readable; range?: ByteRange }> {
    const blob = await this.get(tenantId, hash);
    const range = rangeOf(blob);
    try {
      return { blob, content: await this.store.open(tenantId, hash, range), range };
    } catch (err) {
      if (err instanceof BlobContentMissing) throw this.contentMissing(err, hash);
      throw err;
    }
  }

  /** The record for HEAD, which answers as GET would: 503 when the store lacks the content. */
  async present(tenantId: string, hash: string): Promise<BlobResponse> {
    const blob = await this.get(tenantId, hash);
    if (!(await this.store.has(tenantId, hash))) throw this.contentMissing(new BlobContentMissing(tenantId, hash), hash);
    return blob;
  }

  /**
   * The store could not take an upload: a full disk, a read-only or misplaced BLOB_DIR, an I/O
   * error. Neither the client's fault nor a bug: 503 with Retry-After, logged for the operator.
   */
  private storeFailed(err: NodeJS.ErrnoException): ApiError {
    this.logger.error({ err }, 'the blob store could not take an upload');
    return new ApiError(503, 'service_unavailable', `The blob store cannot take uploads now (${err.code ?? 'I/O error'}); try again later`, { retry_after: 30 });
  }

  /**
   * A record whose content the store lacks: files lost from BLOB_DIR, or a store restored from
   * an older backup than the database. Not the client's fault nor a bug, and mendable: an
   * upload of the same bytes stores the content again (step 3). Logged as an error, for the
   * operator to restore the store; answered 503 `service_unavailable`, named for the client.
   */
  private contentMissing(err: BlobContentMissing, hash: string): ApiError {
    this.logger.error({ err }, err.message);
    return new ApiError(
      503,
      'service_unavailable',
      'The content of this blob is missing from the store; uploading the same bytes again restores it',
      { hash },
    );
  }

  /**
   * Of `refs` (`sha256:<hex>` or bare hex), those the tenant has no blob for, as given and
   * without repeats. A malformed reference is always missing. One query, none for no refs.
   * `within` an item write's transaction, the blobs found stay key-share locked until it ends,
   * so a deletion (which locks the row for update) waits for the item to commit and then sees it.
   */
  async findMissing(tenantId: string, refs: string[], within?: EntityManager): Promise<string[]> {
    const unique = [...new Set(refs)];
    const wanted = [...new Set(unique.map(parseBlobHash).filter((h): h is string => h !== undefined))];
    const found = new Set<string>();
    if (wanted.length > 0) {
      const rows: Array<{ hash: string }> = await (within ?? this.db.manager).query(
        `SELECT hash FROM blobs WHERE tenant_id = $1 AND hash = ANY($2::text[])${within ? ' FOR KEY SHARE' : ''}`,
        [tenantId, wanted],
      );
      for (const r of rows) found.add(r.hash);
    }
    return unique.filter((ref) => {
      const hash = parseBlobHash(ref);
      return hash === undefined || !found.has(hash);
    });
  }

  private async find(tenantId: string, hash: string, m: EntityManager = this.db.manager): Promise<BlobRow | undefined> {
    const rows: BlobRow[] = await m.query(`SELECT ${COLUMNS} FROM blobs WHERE tenant_id = $1 AND hash = $2`, [tenantId, hash]);
    return rows[0];
  }
}

/** An error of a file system call (it names its syscall), as the disk store and staging raise them. */
function isFileSystemError(err: unknown): err is NodeJS.ErrnoException {
  // Not `instanceof Error`: Node's own errors come from another realm under test runners' sandboxes.
  return typeof err === 'object' && err !== null && typeof (err as NodeJS.ErrnoException).syscall === 'string';
}
