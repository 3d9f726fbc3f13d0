import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `GET /blobs` pages a tenant's blobs newest first by (created_at, hash); the table's only index
 * is its key (tenant_id, hash), which would have every page read and sort all of a tenant's
 * blobs. Built CONCURRENTLY, as migration 4600's, so that uploads go on while it builds.
 */
export class BlobsByCreated1732300006200 implements MigrationInterface {
  name = 'BlobsByCreated1732300006200';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS blobs_by_created`);
    await q.query(`CREATE INDEX CONCURRENTLY blobs_by_created ON blobs (tenant_id, created_at DESC, hash DESC)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX blobs_by_created`);
  }
}
