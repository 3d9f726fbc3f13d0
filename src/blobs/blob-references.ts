/**
 * Which of a tenant's items refer to a blob, for DELETE /blobs/{hash}: any item in any state
 * whose properties hold the string `sha256:<hash>` anywhere (as item writes find references,
 * item-changes.ts blobReferences). Revisions are not looked at: a snapshot may name a deleted blob.
 *
 * No index leads from a blob to its items. The search vector leaves out unsearchable properties
 * and cuts long text, so it could miss a reference; an index over every string of the properties
 * would cost each item write for the sake of a rare admin operation. So the tenant's rows are
 * scanned (the indexes led by tenant_id keep other tenants' out), bounded by the statement
 * timeout: a LIKE on the properties' text first, cheap and a necessary condition (the reference
 * is hex, which JSON never escapes, so an equal string shows in the text quoted as it is), then
 * the exact test on the rows it lets through.
 */
import type { EntityManager } from 'typeorm';
import { ApiError } from '../common/api-error';
import { blobRef } from './blob-hash';

/** How many of the referring items a refusal names. */
export const IN_USE_SHOWN = 10;

export interface BlobUsers {
  /** Up to IN_USE_SHOWN of them, by id. */
  ids: string[];
  count: number;
}

export async function referencingItems(m: EntityManager, tenantId: string, hash: string): Promise<BlobUsers> {
  const ref = blobRef(hash);
  const rows: Array<{ id: string; total: string }> = await m.query(
    `SELECT id, count(*) OVER () AS total FROM items
      WHERE tenant_id = $1 AND properties::text LIKE $2 AND jsonb_path_exists(properties, '$.** ? (@ == $ref)', jsonb_build_object('ref', $3::text))
      ORDER BY id LIMIT ${IN_USE_SHOWN}`,
    [tenantId, `%"${ref}"%`, ref],
  );
  return { ids: rows.map((r) => r.id), count: rows.length ? Number(rows[0].total) : 0 };
}

export function blobInUse(hash: string, users: BlobUsers): ApiError {
  return ApiError.conflict('conflict', `Blob ${hash} is referred to by ${users.count} item(s); remove the references first`, {
    reason: 'blob_in_use',
    items: users.ids,
    item_count: users.count,
  });
}
