/**
 * `POST /items/bulk_action` and the jobs it starts. A request is checked whole before anything
 * is written (who may do it, the action's fields, the cap), its match set is fixed (ids, in
 * creation order), then:
 *   - `dry_run`: the ids and the count;
 *   - `async: true`, or more than BULK_SYNC_MAX matches: a `bulk_jobs` row and a Bull job
 *     (202; bulk-worker.ts runs it);
 *   - otherwise the action runs here, in one transaction, chunk by chunk (200 Bulk result).
 * A tenant may have BULK_JOBS_MAX_UNFINISHED_PER_TENANT jobs queued or running (`assertUnderJobCap`).
 * Job visibility: the credential that started it (for an OAuth token, its tokens with no scope the
 * starting one lacks: `ownsWork`), and the tenant's admins; 404 across tenants.
 */
import { InjectQueue } from '@nestjs/bull';
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Queue } from 'bull';
import { DataSource, EntityManager } from 'typeorm';
import { canMetadata, isAdmin } from '../auth/permissions';
import { ownerCredential, ownsWork, ownsWorkSql, type Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { newId } from '../common/ids';
import { Bounded, byteBoundedPage, decodeCursor, pageOf } from '../common/pagination';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { Outbox } from '../events/outbox';
import { ItemsService } from '../items/items.service';
import { JobPayloads, QUEUES } from '../jobs/job-catalogue';
import { tokenScopesOf } from '../oidc/scopes';
import { BulkFilter, BulkItemError, BulkRequest, BulkSpec, CHUNK_SIZE, MAX_ITEMS_CEILING, MAX_ITEMS_DEFAULT, requestOf, specOf } from './bulk-actions';
import { BulkActionDto, BulkJobDto, BulkJobList, BulkResultDto, ListBulkJobsQuery } from './bulk.dto';
import { ENDED_JOB_SET, JOB_COLUMNS, JOB_TOKEN_SCOPES_SQL, jobAudience, JobRow, toJob } from './bulk-job.model';
import { BulkRunner, limitLockWaits } from './bulk-runner';

/**
 * Retry-After of a job refused by the tenant's cap: when a place frees depends on the tenant's
 * own jobs, which the answer cannot know; about the time a chunk of a running job takes.
 */
const RETRY_AFTER_SECONDS = 5;

const jobNotFound = () => ApiError.notFound('bulk_job_not_found', 'No such bulk job');

@Injectable()
export class BulkService {
  private readonly logger = new Logger('Bulk');

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly items: ItemsService,
    private readonly runner: BulkRunner,
    private readonly outbox: Outbox,
    private readonly config: AppConfig,
    @InjectQueue(QUEUES.bulk) private readonly queue: Queue<JobPayloads['bulk.run']>,
  ) {}

  async submit(p: Principal, dto: BulkActionDto): Promise<{ result: BulkResultDto } | { job: BulkJobDto }> {
    if (dto.action === 'purge' && !isAdmin(p)) throw ApiError.forbidden('Only an admin credential may purge');
    const spec = specOf(dto);
    const maxItems = dto.max_items ?? MAX_ITEMS_DEFAULT;
    if (maxItems > MAX_ITEMS_CEILING) {
      throw ApiError.badRequest('bulk_cap_exceeded', `max_items may be at most ${MAX_ITEMS_CEILING}`, { max_items: maxItems, ceiling: MAX_ITEMS_CEILING });
    }
    if (spec.action === 'update_tags' && !canMetadata(p, 'write')) throw ApiError.forbidden('Writing tags needs the metadata:write scope');
    if (spec.properties) await this.items.assertBlobsExist(p, spec.properties);

    const { filter, ids } = await this.match(p, dto, maxItems);
    if (ids.length > maxItems) {
      // How many, up to the ceiling, so that the caller knows whether a larger max_items would do
      // (at least the ids read: a count made after them may find fewer).
      const matched = Math.max(ids.length, maxItems < MAX_ITEMS_CEILING ? await this.countUpTo(p, filter, MAX_ITEMS_CEILING + 1) : 0);
      throw ApiError.badRequest('bulk_cap_exceeded', `The filter matches more than max_items (${maxItems}) items; narrow it or raise max_items`, {
        max_items: maxItems,
        ceiling: MAX_ITEMS_CEILING,
        ...(matched > MAX_ITEMS_CEILING ? { more_than_ceiling: true } : { matched }),
      });
    }
    if (dto.dry_run) return { result: { action: spec.action, matched: ids.length, succeeded: 0, errored: 0, dry_run: true, ids } };
    const run: BulkSpec = { ...spec, filter };
    if (dto.async || ids.length > this.config.BULK_SYNC_MAX) return { job: await this.createJob(p, run, ids, requestOf(spec, dto.filter, maxItems)) };
    return { result: await this.runDirect(p, run, ids) };
  }

  /** How many items `filter` selects for `p`, counting no further than `max` (in no order: nothing is read but the count). */
  private async countUpTo(p: Principal, filter: BulkFilter, max: number): Promise<number> {
    const params: unknown[] = [];
    const where = this.runner.where(p, filter, params);
    params.push(max);
    const [{ n }]: Array<{ n: number }> = await this.db.query(`SELECT count(*)::int AS n FROM (SELECT 1 FROM items i WHERE ${where} LIMIT $${params.length}) s`, params);
    return n;
  }

  /**
   * The ids the filter selects, oldest first, at most `max + 1` (one more tells the cap was
   * passed): `GET /items`' filter, narrowed for members to the types they may write, and the
   * free text with `GET /search`'s engine. The filter goes with the run, whose chunks apply it
   * again (bulk-runner.ts).
   */
  private async match(p: Principal, dto: BulkActionDto, max: number): Promise<{ filter: BulkFilter; ids: string[] }> {
    const f = dto.filter ?? {};
    const items = await this.items.filterFor(
      p,
      {
        type: f.type, state: f.state, tier: f.tier, tags: f.tags?.join(','), source: f.source, source_id: f.source_id, since: f.since, until: f.until,
        updated_since: f.updated_since, updated_until: f.updated_until, property: f.property,
      },
      'write',
    );
    const filter: BulkFilter = { items, text: f.filter };
    const params: unknown[] = [];
    const where = this.runner.where(p, filter, params);
    params.push(max + 1);
    const rows: Array<{ id: string }> = await this.db.query(
      `SELECT i.id FROM items i WHERE ${where} ORDER BY i.created_at, i.id LIMIT $${params.length}`,
      params,
    );
    return { filter, ids: rows.map((r) => r.id) };
  }

  /** The direct path: every chunk in one transaction, so the result is all there or not at all. */
  private async runDirect(p: Principal, spec: BulkSpec, ids: string[]): Promise<BulkResultDto> {
    const succeeded: string[] = [];
    const errors: BulkItemError[] = [];
    const blobHashes = new Set<string>();
    await this.db.transaction(async (m) => {
      await limitLockWaits(m, this.config.DATABASE_STATEMENT_TIMEOUT_MS);
      await this.runner.lockAll(m, p, spec, ids);
      for (let at = 0; at < ids.length; at += CHUNK_SIZE) {
        const outcome = await this.runner.applyChunk(m, p, spec, ids.slice(at, at + CHUNK_SIZE));
        succeeded.push(...outcome.succeeded);
        errors.push(...outcome.errors);
        outcome.blobHashes.forEach((h) => blobHashes.add(h));
      }
    });
    return {
      action: spec.action,
      matched: ids.length,
      succeeded: succeeded.length,
      errored: errors.length,
      dry_run: false,
      ids: succeeded,
      errors,
      ...(spec.action === 'purge' ? { blob_hashes_referenced: blobHashes.size } : {}),
    };
  }

  private async createJob(p: Principal, spec: BulkSpec, ids: string[], request: BulkRequest): Promise<BulkJobDto> {
    // In a transaction of its own, which marks an Idempotency-Key applied as it commits (claim-applied.ts).
    const [row]: JobRow[] = await this.db.transaction(async (m) => {
      await this.assertUnderJobCap(m, p.tenantId);
      return m.query(
        `INSERT INTO bulk_jobs (tenant_id, id, action, spec, credential_id, principal, status, item_ids, matched, request)
         VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7::uuid[], $8, $9) RETURNING ${JOB_COLUMNS}`,
        [p.tenantId, newId(), spec.action, spec, p.credentialId, p, ids, ids.length, request],
      );
    });
    await this.enqueue({ tenantId: p.tenantId, jobId: row.id });
    return toJob(row);
  }

  /**
   * All tenants' jobs wait in one first-come-first-served queue, so a tenant may have at most
   * BULK_JOBS_MAX_UNFINISHED_PER_TENANT jobs queued or running: another tenant's job finds at
   * most that many of its jobs ahead of it. Counted under a lock of the tenant's job creations,
   * so creations at once cannot pass the cap together. 429 (not 409): the place frees as a job
   * ends, and a 429 is not kept for an Idempotency-Key, so the same request may be retried.
   */
  private async assertUnderJobCap(m: EntityManager, tenantId: string): Promise<void> {
    await m.query(`SELECT pg_advisory_xact_lock(hashtextextended('bulk_jobs:' || $1, 0))`, [tenantId]);
    const [{ n }]: Array<{ n: number }> = await m.query(
      `SELECT count(*)::int AS n FROM bulk_jobs WHERE tenant_id = $1 AND status IN ('queued', 'in_progress')`,
      [tenantId],
    );
    const limit = this.config.BULK_JOBS_MAX_UNFINISHED_PER_TENANT;
    if (n >= limit) {
      throw new ApiError(429, 'rate_limited', `The tenant has ${n} bulk jobs queued or running, the most it may have; retry once one has ended, or cancel one`, {
        limit,
        unfinished: n,
        retry_after: RETRY_AFTER_SECONDS,
      });
    }
  }

  /**
   * Queues a run of the job; if Redis cannot take it now, the sweeper will (bulk-sweeper.ts).
   * The Bull job's id is the bulk job's, so queuing twice queues once; a run handed on by a
   * worker that shuts down (`handOff`) gets an id of its own, as that worker's Bull job still
   * holds the bulk job's.
   */
  async enqueue(ref: JobPayloads['bulk.run'], handOff = false): Promise<void> {
    const jobId = handOff ? `${ref.jobId}:${newId()}` : ref.jobId;
    const added = this.queue.add('bulk.run', ref, { jobId, removeOnComplete: true, removeOnFail: true });
    if (!(await withinTimeout(added, 2000))) this.logger.warn({ jobId: ref.jobId }, 'bulk job not queued (Redis); the sweeper will pick it up');
  }

  async get(p: Principal, id: string): Promise<BulkJobDto> {
    return toJob(await this.visibleJob(this.db.manager, p, id));
  }

  async list(p: Principal, q: ListBulkJobsQuery): Promise<BulkJobList> {
    const limit = q.limit ?? 50;
    const params: unknown[] = [p.tenantId];
    let where = 'tenant_id = $1';
    if (!isAdmin(p)) {
      params.push(ownerCredential(p.credentialId), tokenScopesOf(p));
      where += ` AND ${ownsWorkSql('credential_id', JOB_TOKEN_SCOPES_SQL, params.length - 1)}`;
    }
    if (q.status) {
      params.push(q.status);
      where += ` AND status = $${params.length}`;
    }
    const after = decodeCursor(q.cursor, 'bulk_jobs');
    if (after) {
      params.push(after.createdAt, after.id);
      where += ` AND (created_at, id) < ($${params.length - 1}, $${params.length})`;
    }
    params.push(limit + 1);
    const rows: Array<Bounded<JobRow>> = await this.db.query(
      byteBoundedPage(
        `SELECT ${JOB_COLUMNS} FROM bulk_jobs WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
        'created_at DESC, id DESC',
        `octet_length(errors::text)`,
      ),
      params,
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'bulk_jobs');
    return { jobs: page.map(toJob), next_cursor };
  }

  /**
   * DELETE: a job no worker holds (queued, or started and its lease given up or lapsed: its
   * workers stopped, died or stalled past it) is cancelled at once, with its `bulk_job.cancelled` event; one a
   * worker holds is flagged, and the worker stops at the next chunk boundary; an ended one is
   * answered as it is. A worker claiming the job meanwhile waits for the row, then finds it ended.
   */
  async cancel(p: Principal, id: string): Promise<BulkJobDto> {
    const row = await this.db.transaction(async (m) => {
      const job = await this.visibleJob(m, p, id, ' FOR UPDATE');
      if (job.status === 'queued' || job.status === 'in_progress') {
        const [[cancelled]]: [JobRow[], number] = await m.query(
          `UPDATE bulk_jobs SET status = 'cancelled', cancel_requested = true, finished_at = now(), ${ENDED_JOB_SET},
                  lease_owner = NULL, lease_until = NULL, updated_at = now()
            WHERE tenant_id = $1 AND id = $2 AND (status = 'queued' OR lease_until IS NULL OR lease_until < now())
           RETURNING ${JOB_COLUMNS}`,
          [p.tenantId, id],
        );
        if (cancelled) {
          await this.outbox.record(m, p, 'bulk_job.cancelled', jobAudience(cancelled), { job: toJob(cancelled) });
          return cancelled;
        }
      }
      if (job.status === 'in_progress' && !job.cancel_requested) {
        const [[flagged]]: [JobRow[], number] = await m.query(
          `UPDATE bulk_jobs SET cancel_requested = true, updated_at = now() WHERE tenant_id = $1 AND id = $2 RETURNING ${JOB_COLUMNS}`,
          [p.tenantId, id],
        );
        return flagged;
      }
      return job;
    });
    return toJob(row);
  }

  /** The job if the caller may see it: 404 when absent (or in another tenant), 403 when it is another member's (or a wider token's of its client). */
  private async visibleJob(m: EntityManager, p: Principal, id: string, lock = ''): Promise<JobRow> {
    const [row]: JobRow[] = await m.query(`SELECT ${JOB_COLUMNS} FROM bulk_jobs WHERE tenant_id = $1 AND id = $2${lock}`, [p.tenantId, id]);
    if (!row) throw jobNotFound();
    if (!isAdmin(p) && !ownsWork(p.credentialId, tokenScopesOf(p), row.credential_id, row.job_scopes)) throw ApiError.forbidden('Only the credential that started this job, or an admin, may see or cancel it');
    return row;
  }
}
