/**
 * One lock per blob address (tenant, hash), held to the end of the caller's transaction: the
 * upload that stores content and records it, and the deletion that removes content no record
 * names any more, take it, so that neither can slip between the other's two steps (content
 * stored, its row not yet written: a deletion must not take the content away then). The
 * PostgreSQL store's put takes it too, which inside a caller's transaction is the same lock
 * again (advisory locks are re-entrant within a session).
 */
import type { EntityManager } from 'typeorm';

/** The advisory lock's name (hashed to its key). */
export const blobAddressKey = (tenantId: string, hash: string): string => `blob:${tenantId}:${hash}`;

export async function lockBlobAddress(m: EntityManager, tenantId: string, hash: string): Promise<void> {
  await m.query('SELECT pg_advisory_xact_lock(hashtext($1))', [blobAddressKey(tenantId, hash)]);
}
