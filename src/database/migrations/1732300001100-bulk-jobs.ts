import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Bulk jobs (src/bulk): the row is the truth about a job; Bull only schedules it.
 * - `item_ids` is the match set fixed at submission, in processing order; `processed` is how
 *   far the committed chunks have come, advanced in each chunk's own transaction, so a worker
 *   that dies resumes exactly where the last commit left off (emptied once the job ends).
 * - `principal` is the submitting credential as it was then; a worker re-resolves API keys at
 *   each chunk, so a revoked key stops its jobs.
 * - `lease_owner`/`lease_until`: the worker running the job renews its lease while it works;
 *   another may take the job over only once the lease has lapsed.
 * - `errors` keeps the first per-item errors (bounded), `blob_hashes` the distinct blob
 *   references of purged items.
 * - `created_at` in whole milliseconds, the precision of the list's cursors.
 */
export class BulkJobs1732300001100 implements MigrationInterface {
  name = 'BulkJobs1732300001100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE bulk_jobs (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        id uuid NOT NULL,
        action text NOT NULL,
        spec jsonb NOT NULL,
        credential_id text NOT NULL,
        principal jsonb NOT NULL,
        status text NOT NULL CHECK (status IN ('queued', 'in_progress', 'completed', 'failed', 'cancelled')),
        item_ids uuid[] NOT NULL,
        matched integer NOT NULL,
        processed integer NOT NULL DEFAULT 0,
        succeeded integer NOT NULL DEFAULT 0,
        errored integer NOT NULL DEFAULT 0,
        errors jsonb NOT NULL DEFAULT '[]',
        blob_hashes text[] NOT NULL DEFAULT '{}',
        cancel_requested boolean NOT NULL DEFAULT false,
        lease_owner text,
        lease_until timestamptz,
        error text,
        created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
        started_at timestamptz,
        finished_at timestamptz,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, id)
      )`);
    await q.query(`CREATE INDEX bulk_jobs_listing ON bulk_jobs (tenant_id, created_at DESC, id DESC)`);
    await q.query(`CREATE INDEX bulk_jobs_unfinished ON bulk_jobs (lease_until) WHERE status IN ('queued', 'in_progress')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE bulk_jobs`);
  }
}
