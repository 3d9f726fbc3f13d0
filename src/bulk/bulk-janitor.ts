/**
 * Retention: bulk jobs that ended (completed, failed, cancelled) more than
 * BULK_JOB_RETENTION_DAYS ago are deleted; `GET /items/bulk_action/jobs/{id}` is then 404, as for
 * any unknown job. Queued and running jobs are never touched, however old: the status test is in
 * the DELETE itself, and an ended job never runs again. The events of a job's end live on their
 * own retention (EVENT_RETENTION_DAYS). Every instance sweeps; the batched deletes are harmless
 * when they overlap.
 */
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { PeriodicTask } from '../common/periodic-task';
import { AppConfig } from '../config/app-config';

const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
const BATCH = 1000;

@Injectable()
export class BulkJanitor extends PeriodicTask {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
  ) {
    super(new Logger('Bulk'), 'expired bulk jobs could not be deleted');
  }

  protected intervalMs(): number {
    return SWEEP_INTERVAL_MS;
  }

  /** Returns how many jobs it deleted. */
  protected pass(): Promise<number> {
    // Found through the partial index on ended jobs (migration 1732300004200).
    const sql = `DELETE FROM bulk_jobs WHERE ctid IN (
      SELECT ctid FROM bulk_jobs WHERE status IN ('completed', 'failed', 'cancelled')
         AND finished_at < now() - make_interval(days => $1) LIMIT ${BATCH})`;
    return this.inBatches(BATCH, async () => (await this.db.query(sql, [this.config.BULK_JOB_RETENTION_DAYS]))[1]);
  }
}
