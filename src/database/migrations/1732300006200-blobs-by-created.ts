import { MigrationInterface, QueryRunner } from 'typeorm';
import { buildIndexConcurrently } from '../concurrent-index';

/** Rows a statement of the backfill makes whole milliseconds at a time (the blobs table may be large). */
const BATCH = 5000;

/**
 * `GET /blobs` pages a tenant's blobs newest first by (created_at, hash), with cursors that carry
 * milliseconds, as every listed table does (1732300001200-millisecond-list-timestamps.ts): blobs
 * are now stored in whole milliseconds (the upload and this backfill, in batches, no transaction
 * held across them), or one made in the same millisecond as the blob ending a page could fall
 * between pages. The table's only index was its key (tenant_id, hash), which would have every
 * page read and sort all of a tenant's blobs: the index is built CONCURRENTLY, as migration
 * 4600's, so that uploads go on while it builds.
 */
export class BlobsByCreated1732300006200 implements MigrationInterface {
  name = 'BlobsByCreated1732300006200';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    for (;;) {
      const [, changed]: [unknown, number] = await q.query(
        `UPDATE blobs SET created_at = date_trunc('milliseconds', created_at)
          WHERE (tenant_id, hash) IN (SELECT tenant_id, hash FROM blobs WHERE created_at <> date_trunc('milliseconds', created_at) LIMIT ${BATCH})`,
      );
      if (changed < BATCH) break;
    }
    await buildIndexConcurrently(q, 'blobs_by_created', `blobs (tenant_id, created_at DESC, hash DESC)`);
  }

  // Plain: TypeORM reverts inside a transaction, where CONCURRENTLY is refused (as 4600's down()).
  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS blobs_by_created`);
  }
}
