/**
 * Applies a bulk action to one chunk of items inside the caller's transaction: locks the
 * rows that still match the filter, checks each item (still there, its type writable by the
 * credential now, the action's per-item rule; for update_properties, the blobs it names still
 * there, held against their deletion to the commit), and writes the changes through the items' one
 * write path (ItemWriter) in a few set-based statements. A direct run and a job's chunk are
 * the same call.
 */
import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { canMetadata } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { AppConfig, sizeBytes } from '../config/app-config';
import { blobReferences, tooLarge, typeNotPermitted } from '../items/item-changes';
import { itemWhere } from '../items/item-filter';
import { ITEM_COLUMNS_I, ITEM_WRITE_LOCK, ItemRow } from '../items/item.model';
import { Change, ItemWriter } from '../items/item-writer';
import { ItemsService } from '../items/items.service';
import { SearchService } from '../search/search.service';
import { BATCH_PATTERN_BUDGET_MS, withPatternBudget } from '../types/pattern-check';
import { TypeCatalogService } from '../types/type-catalog';
import { ResolvedType, TypesService } from '../types/types.service';
import { BulkFilter, BulkItemError, BulkSpec, planChange } from './bulk-actions';

export interface ChunkOutcome {
  succeeded: string[];
  errors: BulkItemError[];
  /** purge: the blob references of the purged items. */
  blobHashes: string[];
}

/**
 * How long a run waits for a lock on its items: below the statement timeout, so that the wait
 * ends as lock_not_available (55P03) and not as a statement cancelled for any reason, and short
 * enough that a job's cancel or a shutdown is noticed while the items stay locked. A job's chunk
 * then tries again (bulk-worker.ts); a direct run, which holds every row it locked meanwhile,
 * answers 409 `conflict` (send it again) instead of holding them for the statement timeout.
 */
export function lockWaitMs(statementTimeoutMs: number): number {
  return statementTimeoutMs > 0 ? Math.min(5000, Math.floor(statementTimeoutMs / 2)) : 5000;
}

/** Bounds each lock wait of the run's transaction `m` by lockWaitMs. */
export async function limitLockWaits(m: EntityManager, statementTimeoutMs: number): Promise<void> {
  await m.query(`SET LOCAL lock_timeout = ${lockWaitMs(statementTimeoutMs)}`);
}

/**
 * Rows are locked in id order, the one order of every bulk run and chunk, so that concurrent
 * runs cannot deadlock; a purge takes the lock its DELETE needs.
 */
const rowLock = (spec: BulkSpec) => (spec.action === 'purge' ? ' FOR UPDATE' : ITEM_WRITE_LOCK);

/**
 * A job stores up to MAX_KEPT_ERRORS per-item errors in its row, so an error's details are kept
 * short: a list in them (`fields`, naming each bad field) keeps its first entries, and details
 * still longer than this are left out (the code and message stay).
 */
const MAX_DETAIL_ENTRIES = 5;
const MAX_DETAILS_CHARS = 1024;

function boundedDetails(details: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!details) return undefined;
  const kept = Object.fromEntries(Object.entries(details).map(([k, v]) => [k, Array.isArray(v) ? v.slice(0, MAX_DETAIL_ENTRIES) : v]));
  return JSON.stringify(kept).length <= MAX_DETAILS_CHARS ? kept : undefined;
}

/** The item's error as a single write would answer it: its code, message and (bounded) details. */
const itemError = (id: string, err: ApiError): BulkItemError => {
  const details = boundedDetails(err.details);
  return { id, code: err.code, message: err.message, ...(details ? { details } : {}) };
};


/** The filter of a job stored without one (submitted before jobs kept theirs): any item. */
const ANY_ITEM: BulkFilter = { items: { state: 'all' } };

@Injectable()
export class BulkRunner {
  constructor(
    private readonly types: TypesService,
    private readonly typeCatalog: TypeCatalogService,
    private readonly items: ItemsService,
    private readonly writer: ItemWriter,
    private readonly search: SearchService,
    config: AppConfig,
  ) {
    this.maxItemBytes = sizeBytes(config.JSON_BODY_LIMIT)!;
  }

  private readonly maxItemBytes: number;

  /**
   * The filter as a condition on `items i`, with the credential's sight of tags as it is now:
   * the match set is taken with it, and each chunk applies it again.
   */
  where(p: Principal, f: BulkFilter, params: unknown[]): string {
    const where = itemWhere(p.tenantId, f.items, params);
    return f.text === undefined ? where : `${where} AND ${this.search.matchClause(f.text, p.tenantId, params, { tags: canMetadata(p, 'read') })}`;
  }

  /**
   * Locks the rows of a whole run at its start (a direct run: one transaction over several
   * chunks), in the order each chunk locks its own.
   */
  async lockAll(m: EntityManager, p: Principal, spec: BulkSpec, ids: string[]): Promise<void> {
    await m.query(`SELECT 1 FROM items WHERE tenant_id = $1 AND id = ANY($2::uuid[]) ORDER BY id${rowLock(spec)}`, [p.tenantId, ids]);
  }

  /**
   * An item written since the match set was taken is acted on only if it still matches: the
   * filter is tested in the statement that locks the row, so against the row as it is locked.
   * One that no longer matches is left alone, neither succeeded nor an error.
   */
  applyChunk(m: EntityManager, p: Principal, spec: BulkSpec, ids: string[]): Promise<ChunkOutcome> {
    // The chunk's rows are locked while its items' properties are checked.
    return withPatternBudget(BATCH_PATTERN_BUDGET_MS, () => this.applyLocked(m, p, spec, ids));
  }

  private async applyLocked(m: EntityManager, p: Principal, spec: BulkSpec, ids: string[]): Promise<ChunkOutcome> {
    const params: unknown[] = [];
    const where = this.where(p, spec.filter ?? ANY_ITEM, params);
    params.push(ids);
    const rows: ItemRow[] = await m.query(
      `SELECT ${ITEM_COLUMNS_I} FROM items i WHERE ${where} AND i.id = ANY($${params.length}::uuid[]) ORDER BY i.id${rowLock(spec)}`,
      params,
    );
    const found = new Map(rows.map((r) => [r.id, r]));
    const unmatched = await this.existing(m, p, ids.filter((id) => !found.has(id)));
    const errors: BulkItemError[] = [];
    const writable: ItemRow[] = [];
    for (const id of ids) {
      const row = found.get(id);
      if (!row) {
        if (!unmatched.has(id)) errors.push({ id, code: 'item_not_found', message: 'The item no longer exists' });
      } else if (!(await this.typeCatalog.can(p, row.type, 'write'))) {
        errors.push(itemError(id, typeNotPermitted(row.type)));
      } else writable.push(row);
    }

    if (spec.action === 'purge') {
      await this.writer.purgeMany(m, p, writable, spec.emit_events);
      const blobHashes = new Set(writable.flatMap((r) => blobReferences(r.properties).map((b) => b.ref)));
      return { succeeded: writable.map((r) => r.id), errors, blobHashes: [...blobHashes] };
    }

    const blobsGone = await this.blobsGone(m, p, spec, writable.length);
    const typesByName = new Map<string, ResolvedType | undefined>();
    const succeeded: string[] = [];
    const changes: Change[] = [];
    for (const row of writable) {
      if (blobsGone) {
        errors.push(itemError(row.id, blobsGone));
        continue;
      }
      let type: ResolvedType | undefined;
      if (spec.action === 'update_properties') {
        if (!typesByName.has(row.type)) typesByName.set(row.type, await this.types.forWrite(p.tenantId, row.type, m));
        type = typesByName.get(row.type);
      }
      let plan = await planChange(spec, row, type);
      if (plan !== 'unchanged' && !(plan instanceof ApiError)) plan = tooLarge(row, plan.changes, this.maxItemBytes) ?? plan;
      if (plan instanceof ApiError) {
        errors.push(itemError(row.id, plan));
        continue;
      }
      succeeded.push(row.id);
      if (plan !== 'unchanged') changes.push({ current: row, changes: plan.changes });
    }
    await this.writer.updateMany(m, p, changes, spec.emit_events);
    return { succeeded, errors, blobHashes: [] };
  }

  /**
   * update_properties: the blobs its properties name, checked again in the chunk's transaction
   * (submit checked them first) and held to its commit, so that a deletion of one waits for the
   * chunk and then sees its items (BlobsService.remove). One deleted since submit is each
   * item's error (400 validation_error), the chunk changing none of them.
   */
  private async blobsGone(m: EntityManager, p: Principal, spec: BulkSpec, writable: number): Promise<ApiError | undefined> {
    if (spec.action !== 'update_properties' || !spec.properties || writable === 0) return undefined;
    try {
      await this.items.assertBlobsExist(p, spec.properties, m);
      return undefined;
    } catch (err) {
      if (err instanceof ApiError) return err;
      throw err;
    }
  }

  /** Of the ids the locking statement left out, those still there: they no longer match. */
  private async existing(m: EntityManager, p: Principal, ids: string[]): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const rows: Array<{ id: string }> = await m.query(`SELECT id FROM items WHERE tenant_id = $1 AND id = ANY($2::uuid[])`, [p.tenantId, ids]);
    return new Set(rows.map((r) => r.id));
  }
}
