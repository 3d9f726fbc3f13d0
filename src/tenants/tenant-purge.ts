/**
 * Purges deleted tenants (DELETE /tenants/{id}): every row of the tenant in every table, in
 * batches, and its blobs' content from the store. A tenant is swept again on each pass until
 * no request that began before its deletion can still be writing (REQUEST_TIMEOUT_MS, and a
 * minute), since one authorised just before may commit rows after a sweep; then it is marked
 * purged, its row kept as a tombstone. Every instance sweeps, a pass a minute, and the instance
 * that took the deletion at once; two instances purging one tenant delete the same rows, which
 * at worst fails a pass on a deadlock, and the next one goes on.
 */
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { BlobsService } from '../blobs/blobs.service';
import { PeriodicTask } from '../common/periodic-task';
import { AppConfig } from '../config/app-config';
import { ClientsService } from '../oidc/clients.service';
import { UsersService } from '../users/users.service';

const SWEEP_INTERVAL_MS = 60_000;
const SETTLE_MARGIN_MS = 60_000;

/**
 * The tables holding a tenant's rows, in an order their foreign keys allow, with the rows a batch
 * deletes (fewer where a row takes others with it: a webhook its deliveries, an item its versions
 * and edges). Users and OAuth clients end through their services, blobs through the store.
 */
const TABLES: Array<[table: string, batch: number]> = [
  ['connections', 1000],
  ['webhooks', 100],
  ['bulk_jobs', 1000],
  ['idempotency_keys', 1000],
  ['blocked_clients', 1000],
  ['items', 200],
  ['edges', 1000],
  ['edge_types', 1000],
  ['item_types', 1000],
  ['events', 5000],
  ['audit_events', 5000],
  ['api_keys', 1000],
];
const BLOB_BATCH = 100;

@Injectable()
export class TenantPurge extends PeriodicTask {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
    private readonly users: UsersService,
    private readonly clients: ClientsService,
    private readonly blobs: BlobsService,
  ) {
    super(new Logger('Tenants'), 'a deleted tenant could not be purged');
  }

  protected intervalMs(): number {
    return SWEEP_INTERVAL_MS;
  }

  /** A pass now, for a tenant just deleted here. */
  start(): void {
    this.soon();
  }

  protected async pass(): Promise<number> {
    const tenants: Array<{ id: string; settled: boolean }> = await this.db.query(
      `SELECT id, deleted_at < now() - make_interval(secs => $1::float8 / 1000) AS settled
         FROM tenants WHERE deleted_at IS NOT NULL AND purged_at IS NULL ORDER BY deleted_at LIMIT 10`,
      [this.config.REQUEST_TIMEOUT_MS + SETTLE_MARGIN_MS],
    );
    let total = 0;
    for (const { id, settled } of tenants) {
      if (this.stopped) break;
      total += await this.purge(id);
      if (settled && !this.stopped) await this.db.query(`UPDATE tenants SET purged_at = now() WHERE id = $1`, [id]);
    }
    return total;
  }

  /**
   * What ends a tenant's access with its deletion, and each pass repeats for any a request in flight
   * added since: its users and OAuth clients with every grant, token and session, in `m`'s
   * transaction. Bump the OAuth token cache's generation once committed (ClientsService.tokensChanged).
   */
  async endAccess(m: EntityManager, tenantId: string): Promise<{ users: number; clients: number }> {
    return { users: await this.users.removeAll(m, tenantId), clients: await this.clients.removeAll(m, tenantId) };
  }

  /** Deletes what is left of the tenant: how many rows. */
  private async purge(tenantId: string): Promise<number> {
    const { users, clients } = await this.db.transaction((m) => this.endAccess(m, tenantId));
    if (users || clients) await this.clients.tokensChanged();
    let total = users + clients;
    for (const [table, batch] of TABLES) {
      total += await this.inBatches(batch, async () => {
        const [, n]: [unknown, number] = await this.db.query(
          `DELETE FROM ${table} WHERE ctid IN (SELECT ctid FROM ${table} WHERE tenant_id = $1 LIMIT ${batch})`,
          [tenantId],
        );
        return n;
      });
    }
    return total + (await this.inBatches(BLOB_BATCH, () => this.blobs.purgeTenant(tenantId, BLOB_BATCH)));
  }
}
