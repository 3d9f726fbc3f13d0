import { MigrationInterface, QueryRunner } from 'typeorm';
import { withShortLockWaits } from '../short-lock-waits';

/**
 * `bulk_jobs.request`: what a job was asked to do, as its submitter sent it (the filter, the
 * action's fields, property names rather than values), kept after the job ends, when its `spec`
 * is let go (bulk-job.model.ts). Jobs submitted before have none. Nullable without a default:
 * no table rewrite; the lock is waited for a little at a time, hence no transaction.
 */
export class BulkJobRequest1732300006100 implements MigrationInterface {
  name = 'BulkJobRequest1732300006100';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE bulk_jobs ADD COLUMN IF NOT EXISTS request jsonb`);
  }

  async down(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE bulk_jobs DROP COLUMN IF EXISTS request`);
  }
}
