import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Ended bulk jobs (completed, failed, cancelled) no longer keep what only a running job's worker
 * reads (src/bulk/bulk-job.model.ts `ENDED_JOB_SET`): `spec` becomes nullable and is emptied as a
 * job ends (an `update_properties` patch could hold a whole request body in every ended row), and
 * the starter's `principal` (its permission maps, up to some hundred KB) is cut to the `kind` and
 * `scopes` that decide who sees the job. The jobs that had already ended are cut here. The index
 * finds the ended jobs past BULK_JOB_RETENTION_DAYS for the bulk janitor, which deletes them.
 * `down` gives the emptied specs back as the action alone (what they held is gone); the
 * principals stay cut.
 */
export class BulkJobRetention1732300004200 implements MigrationInterface {
  name = 'BulkJobRetention1732300004200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE bulk_jobs ALTER COLUMN spec DROP NOT NULL`);
    await q.query(`
      UPDATE bulk_jobs
         SET item_ids = '{}', spec = NULL,
             principal = jsonb_strip_nulls(jsonb_build_object('kind', principal->'kind', 'scopes', principal->'scopes'))
       WHERE status IN ('completed', 'failed', 'cancelled')`);
    await q.query(`CREATE INDEX bulk_jobs_ended ON bulk_jobs (finished_at) WHERE status IN ('completed', 'failed', 'cancelled')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX bulk_jobs_ended`);
    await q.query(`UPDATE bulk_jobs SET spec = jsonb_build_object('action', action) WHERE spec IS NULL`);
    await q.query(`ALTER TABLE bulk_jobs ALTER COLUMN spec SET NOT NULL`);
  }
}
