/**
 * The safety net under Bull for bulk jobs: every half lease, each instance looks for jobs that
 * are unfinished and held by no live worker (no lease, or a lapsed one) and makes sure Bull
 * has a job for each: one that Redis lost (flushed, failed over) is queued again, one a dead
 * worker left behind is resumed. Queuing is idempotent (the Bull job id is the bulk job's),
 * and the row's lease keeps a job to one worker, so sweeping too eagerly costs nothing.
 */
import { InjectQueue } from '@nestjs/bull';
import { Injectable, Logger } from '@nestjs/common';
import type { Queue } from 'bull';
import { PeriodicTask } from '../common/periodic-task';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { JobPayloads, QUEUES } from '../jobs/job-catalogue';
import { BulkService } from './bulk.service';

const BATCH = 100;

@Injectable()
export class BulkSweeper extends PeriodicTask {
  constructor(
    private readonly db: BookkeepingDb,
    private readonly config: AppConfig,
    private readonly bulk: BulkService,
    @InjectQueue(QUEUES.bulk) private readonly queue: Queue<JobPayloads['bulk.run']>,
  ) {
    super(new Logger('Bulk'), 'bulk sweep failed');
  }

  protected intervalMs(): number {
    return Math.floor(this.config.bulkJobLeaseMs / 2);
  }

  /** Returns how many jobs it queued again. */
  protected async pass(): Promise<number> {
    const orphans = await this.db.query<{ tenant_id: string; id: string }>(
      `SELECT tenant_id, id FROM bulk_jobs
        WHERE status IN ('queued', 'in_progress') AND (lease_until IS NULL OR lease_until < now())
        ORDER BY created_at LIMIT ${BATCH}`,
    );
    let queued = 0;
    for (const o of orphans) {
      // getJob answers null for no job; withinTimeout answers undefined when Redis is away.
      const existing = await withinTimeout(this.queue.getJob(o.id), 2000);
      if (existing === undefined) return queued;
      // A job Bull still holds (waiting, delayed, active) is left to Bull: its lock follows the lease.
      if (existing && !(await existing.isCompleted()) && !(await existing.isFailed())) continue;
      await existing?.remove();
      await this.bulk.enqueue({ tenantId: o.tenant_id, jobId: o.id });
      queued++;
    }
    return queued;
  }
}
