/**
 * Runs bulk jobs from the Bull queue, BULK_CONCURRENCY at a time per instance, on any instance.
 *
 * A run claims the job's row under a lease (BULK_JOB_LEASE, renewed while it works), then
 * works through the match set a chunk at a time. Each chunk is one transaction holding the
 * items' changes and the job's progress (`processed` and the counters), and it commits only if
 * the job is still this worker's and still where the worker thought it was; so whatever
 * happens (a SIGKILL, a lost Redis, two workers handed the same job) every item is changed
 * exactly once, and a resumed job starts after the last committed chunk. A chunk whose items
 * another session holds locked (a worker that froze mid-chunk, whose job was then taken over)
 * waits for them a bounded time at once, then tries again: it never fails the job for that,
 * and PostgreSQL ends a frozen session's transaction (pg-guards.ts). The cancel flag and
 * the credential (one revoked since submission, or a purge's no longer admin, fails the job)
 * are checked between chunks. On shutdown the instance takes no more jobs, and a run stops at
 * the next chunk boundary, gives up its lease and queues the job again, so another instance
 * resumes it without waiting.
 */
import { InjectQueue } from '@nestjs/bull';
import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Queue } from 'bull';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import type { Principal } from '../auth/principal';
import { isAdmin } from '../auth/permissions';
import { withinTimeout } from '../common/timeout';
import { isDependencyUnavailable, isLockNotAvailable, isWriteCollision } from '../common/unavailable';
import { AppConfig } from '../config/app-config';
import { Outbox } from '../events/outbox';
import { JobPayloads, QUEUES } from '../jobs/job-catalogue';
import { tokenScopesOf, withinTokenScopes } from '../oidc/scopes';
import { CredentialsService } from '../auth/credentials.service';
import { BulkSpec, CHUNK_SIZE, MAX_KEPT_ERRORS } from './bulk-actions';
import { ENDED_JOB_SET, JOB_COLUMNS, jobAudience, JobRow, toJob } from './bulk-job.model';
import { BulkRunner, limitLockWaits } from './bulk-runner';
import { BulkService } from './bulk.service';

type JobRef = JobPayloads['bulk.run'];

interface Claimed {
  spec: BulkSpec;
  principal: Principal;
  credential_id: string;
  item_ids: string[];
  processed: number;
  cancel_requested: boolean;
  errors_kept: number;
}

type EndStatus = 'completed' | 'failed' | 'cancelled';

/** Attempts of one chunk before the job is failed. */
const CHUNK_ATTEMPTS = 3;
/** Times a chunk that lost to concurrent writes (a deadlock) goes again, within half a lease, before that counts as an attempt. */
const CHUNK_COLLISIONS = 10;

/** The chunk's rows (or another lock it needs) are held by another session: try again. */
const BLOCKED = 'blocked';

/** The job is no longer this worker's to advance (taken over, cancelled while queued, ended). */
class LostJob extends Error {}

@Injectable()
export class BulkWorker implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Bulk');
  /** This process's name on the leases it holds. */
  private readonly owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private stopping = false;
  private readonly runs = new Set<Promise<void>>();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly runner: BulkRunner,
    private readonly bulk: BulkService,
    private readonly credentials: CredentialsService,
    private readonly outbox: Outbox,
    private readonly config: AppConfig,
    @InjectQueue(QUEUES.bulk) private readonly queue: Queue<JobRef>,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.BULK_CONCURRENCY === 0) return;
    this.queue
      .process('bulk.run', this.config.BULK_CONCURRENCY, (job) => this.track(this.run(job.data)))
      .catch((err: unknown) => this.logger.error({ err }, 'bulk worker stopped'));
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      // Here only, and without waiting for the runs: a job handed on (run) must go to another
      // instance. Once only: pausing a queue already closed would connect it again.
      await withinTimeout(this.queue.pause(true, true), 2000);
    }
    await Promise.allSettled([...this.runs]);
  }

  private track(run: Promise<void>): Promise<void> {
    this.runs.add(run);
    return run.finally(() => this.runs.delete(run));
  }

  /** Runs the job from where its last committed chunk left off, if no other worker holds it. */
  async run(ref: JobRef): Promise<void> {
    // Taken as shutdown began: straight on to another instance.
    if (this.stopping) return this.bulk.enqueue(ref, true);
    const job = await this.claim(ref);
    if (!job) return;
    const leaseMs = this.config.bulkJobLeaseMs;
    const heartbeat = setInterval(() => void this.renew(ref).catch(() => undefined), Math.floor(leaseMs / 3));
    heartbeat.unref();
    try {
      await this.work(ref, job);
    } finally {
      clearInterval(heartbeat);
      // Still held when the run stopped early (shutdown, database trouble): hand it on now.
      await this.db
        .query(`UPDATE bulk_jobs SET lease_owner = NULL, lease_until = NULL WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3`, [ref.tenantId, ref.jobId, this.owner])
        .catch(() => undefined);
    }
    // Stopped for shutdown: this run's Bull job completes as it returns, which would leave the
    // job to the next sweep; queued again, another instance takes it now (a no-op if it ended).
    if (this.stopping) await this.bulk.enqueue(ref, true);
  }

  private async claim(ref: JobRef): Promise<Claimed | undefined> {
    const [rows]: [Claimed[], number] = await this.db.query(
      `UPDATE bulk_jobs SET status = 'in_progress', started_at = coalesce(started_at, now()), lease_owner = $3,
              lease_until = now() + make_interval(secs => $4::float8 / 1000), updated_at = now()
        WHERE tenant_id = $1 AND id = $2 AND status IN ('queued', 'in_progress')
          AND (lease_until IS NULL OR lease_until < now() OR lease_owner = $3)
       RETURNING spec, principal, credential_id, item_ids, processed, cancel_requested, jsonb_array_length(errors) AS errors_kept`,
      [ref.tenantId, ref.jobId, this.owner, this.config.bulkJobLeaseMs],
    );
    return rows[0];
  }

  private async renew(ref: JobRef): Promise<void> {
    await this.db.query(
      `UPDATE bulk_jobs SET lease_until = now() + make_interval(secs => $4::float8 / 1000)
        WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3 AND status = 'in_progress'`,
      [ref.tenantId, ref.jobId, this.owner, this.config.bulkJobLeaseMs],
    );
  }

  private async work(ref: JobRef, job: Claimed): Promise<void> {
    let { processed, cancel_requested: cancel, errors_kept: kept } = job;
    for (;;) {
      // A cancel asked for while the job ran ends it cancelled, even one that came during its
      // last chunk (so also any job of one chunk): the counters tell how much was done.
      if (cancel) return this.finish(ref, job, 'cancelled');
      if (processed >= job.item_ids.length) return this.finish(ref, job, 'completed');
      if (this.stopping) return;
      const p = await this.principalOf(ref, job);
      if (!p) return this.finish(ref, job, 'failed', 'The credential that started this job has been revoked');
      if (job.spec.action === 'purge' && !isAdmin(p)) {
        return this.finish(ref, job, 'failed', 'The credential that started this job is no longer an admin, and only an admin may purge');
      }
      const chunk = job.item_ids.slice(processed, processed + CHUNK_SIZE);
      const step = await this.commitChunk(ref, job, p, chunk, processed, kept);
      if (step === BLOCKED) {
        const still = await this.stillMine(ref, processed);
        if (!still) return;
        cancel = still.cancel_requested;
        continue;
      }
      if (!step) return;
      processed += chunk.length;
      kept = step.kept;
      cancel = step.cancel;
    }
  }

  /**
   * The credential as it is now (an API key, or an OAuth grant), so a revocation is seen at the
   * next chunk, held to the scopes of the token that started the job (scopes.ts).
   */
  private async principalOf(ref: JobRef, job: Claimed): Promise<Principal | null> {
    const now = await this.credentials.principalById(ref.tenantId, job.credential_id);
    return now && withinTokenScopes(now, tokenScopesOf(job.principal));
  }

  /** The job's cancel flag, if it is still this worker's and still where the worker left it. */
  private async stillMine(ref: JobRef, at: number): Promise<{ cancel_requested: boolean } | undefined> {
    const rows: Array<{ cancel_requested: boolean }> = await this.db.query(
      `SELECT cancel_requested FROM bulk_jobs WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3 AND processed = $4 AND status = 'in_progress'`,
      [ref.tenantId, ref.jobId, this.owner, at],
    );
    return rows[0];
  }

  /**
   * One chunk and the job's progress in one transaction; BLOCKED when a lock it needs is held
   * elsewhere (nothing was changed: the transaction rolled back), undefined when the run must stop.
   */
  private async commitChunk(
    ref: JobRef, job: Claimed, p: Principal, chunk: string[], at: number, kept: number,
  ): Promise<{ cancel: boolean; kept: number } | typeof BLOCKED | undefined> {
    let attempt = 0;
    let away = 0;
    let collisions = 0;
    const since = Date.now();
    for (;;) {
      try {
        return await this.db.transaction(async (m) => {
          await limitLockWaits(m, this.config.DATABASE_STATEMENT_TIMEOUT_MS);
          const out = await this.runner.applyChunk(m, p, job.spec, chunk);
          const keep = out.errors.slice(0, Math.max(0, MAX_KEPT_ERRORS - kept));
          const [rows]: [Array<{ cancel_requested: boolean }>, number] = await m.query(
            `UPDATE bulk_jobs
                SET processed = processed + $5, succeeded = succeeded + $6, errored = errored + $7, errors = errors || $8::jsonb,
                    blob_hashes = CASE WHEN cardinality($9::text[]) = 0 THEN blob_hashes
                                       ELSE ARRAY(SELECT DISTINCT h FROM unnest(blob_hashes || $9::text[]) AS h) END,
                    lease_until = now() + make_interval(secs => $10::float8 / 1000), updated_at = now()
              WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3 AND processed = $4 AND status = 'in_progress'
             RETURNING cancel_requested`,
            [
              ref.tenantId, ref.jobId, this.owner, at, chunk.length, out.succeeded.length, out.errors.length,
              JSON.stringify(keep), out.blobHashes, this.config.bulkJobLeaseMs,
            ],
          );
          if (!rows.length) throw new LostJob();
          return { cancel: rows[0].cancel_requested, kept: kept + keep.length };
        });
      } catch (err) {
        if (err instanceof LostJob) return undefined;
        if (isLockNotAvailable(err)) {
          this.logger.warn({ jobId: ref.jobId }, 'bulk chunk waits for items locked by another session');
          return BLOCKED;
        }
        if (this.stopping) return undefined;
        // Lost to concurrent writes (a deadlock with a write to the same items), and rolled back:
        // the chunk's own doing no more than theirs, so it goes again without counting, a few times.
        if (isWriteCollision(err) && collisions++ < CHUNK_COLLISIONS && Date.now() - since < this.config.bulkJobLeaseMs / 2) {
          this.logger.warn({ jobId: ref.jobId }, 'bulk chunk collided with concurrent writes; trying it again');
          await delay(100 * collisions);
          if (this.stopping) return undefined;
          continue;
        }
        // The database away (a restart, a failover, sessions ended), not the chunk: waited out
        // without counting (two seconds of lost connections failed a 9,000-item job). Past half a
        // lease of it, a database that answers says the errors are the chunk's own, which count;
        // one that does not stops the run, the job unfailed, for the sweeper to hand on
        // (bulk-sweeper.ts) once it is back.
        if (isDependencyUnavailable(err)) {
          this.logger.warn({ err, jobId: ref.jobId }, 'bulk chunk could not reach the database');
          if (Date.now() - since < this.config.bulkJobLeaseMs / 2) {
            await delay(Math.min(5000, 500 * 2 ** away++));
            if (this.stopping) return undefined;
            continue;
          }
          if (!(await this.db.query('SELECT 1').then(() => true, () => false))) return undefined;
        }
        attempt++;
        this.logger.warn({ err, jobId: ref.jobId, attempt }, 'bulk chunk failed');
        if (attempt >= CHUNK_ATTEMPTS) {
          await this.finish(ref, job, 'failed', 'An internal error stopped the job; the items of its committed chunks were changed').catch((e: unknown) =>
            this.logger.error({ err: e, jobId: ref.jobId }, 'could not record the failure; the job will be resumed'),
          );
          return undefined;
        }
        await delay(attempt * 500);
      }
    }
  }

  /**
   * Ends the job, with its `bulk_job.<status>` event (the status it ended with) in the same
   * transaction. A job that would complete ends cancelled if a cancel was asked for: read by the
   * statement that ends it, which waits for a DELETE holding the row (bulk.service.ts `cancel`)
   * and then sees its flag, so a DELETE answered `in_progress` with `cancel_requested` is never
   * followed by `completed`, and one that comes after the end finds the job ended and leaves it.
   * The row keeps only what an ended job is read for (ENDED_JOB_SET); the event's actor is the
   * starter as claimed, the principal the row held until then.
   */
  private async finish(ref: JobRef, job: Claimed, status: EndStatus, error?: string): Promise<void> {
    await this.db.transaction(async (m) => {
      const [rows]: [Array<JobRow & { status: EndStatus }>, number] = await m.query(
        `UPDATE bulk_jobs
            SET status = CASE WHEN $4::text = 'completed' AND cancel_requested THEN 'cancelled' ELSE $4::text END,
                error = $5, finished_at = now(), ${ENDED_JOB_SET}, lease_owner = NULL, lease_until = NULL, updated_at = now()
          WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3 AND status = 'in_progress'
         RETURNING ${JOB_COLUMNS}`,
        [ref.tenantId, ref.jobId, this.owner, status, error ?? null],
      );
      const ended = rows[0];
      if (ended) await this.outbox.record(m, job.principal, `bulk_job.${ended.status}`, jobAudience(ended), { job: toJob(ended) });
    });
  }
}
