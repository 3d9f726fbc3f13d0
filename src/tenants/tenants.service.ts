/**
 * Owns tenants: provisioning a new tenant together with its first admin key, reading them back,
 * and deleting one.
 *
 * A new tenant is audited `tenant.created` twice, in the same transaction: in the creator's
 * (root) tenant's log, where the operators see who made which tenant, and in the new tenant's,
 * whose admins see where their tenant and first key (`key.created`) came from; there the actor
 * carries the root tenant's id, as its credential is none of theirs.
 *
 * A deletion ends the tenant at once: its keys stop resolving (they join the tenant), its users
 * and OAuth clients are deleted with every grant, token and session, so no credential of it works
 * from the next request on any instance, and webhooks, jobs and event streams, which act for those
 * credentials, stop with them; its rows are then purged in the background (tenant-purge.ts).
 * Audited `tenant.deleted` in the root tenant's log; the tenant's own log goes with it.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { actorOf, AuditService } from '../audit/audit.service';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { decodeCursor, PageQuery, pageOf } from '../common/pagination';
import { keyLabel } from '../keys/keys.dto';
import { KeysService } from '../keys/keys.service';
import { ClientsService } from '../oidc/clients.service';
import { TenantPurge } from './tenant-purge';
import { insertTenant } from './tenant.entity';
import { CreatedTenantResponse, DeletedTenantResponse, TenantList, TenantResponse } from './tenants.dto';

interface TenantRow {
  id: string;
  name: string;
  created_at: Date;
}

const notFound = () => ApiError.notFound('not_found', 'No such tenant');

const toResponse = (r: TenantRow): TenantResponse => ({ id: r.id, name: r.name, created_at: r.created_at.toISOString() });

@Injectable()
export class TenantsService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly keys: KeysService,
    private readonly audit: AuditService,
    private readonly clients: ClientsService,
    private readonly purge: TenantPurge,
  ) {}

  async create(p: Principal, name: string): Promise<CreatedTenantResponse> {
    // The tenant and its key in one transaction, the request's only one: it marks an
    // Idempotency-Key applied as it commits (claim-applied.ts).
    return this.db.transaction(async (m) => {
      const tenant = await insertTenant(m, name);
      const actor = actorOf(p);
      const theirs = { ...actor, tenant_id: p.tenantId };
      const adminKey = await this.keys.insert(m, tenant.id, { role: 'admin', label: keyLabel(`${name} admin`) }, undefined, theirs);
      const details = { tenant_id: tenant.id, name };
      // The first key's id only in the new tenant's own log: keys are its business, not the creator's.
      await this.audit.record({ tenantId: p.tenantId, action: 'tenant.created', details: { actor, ...details } }, m);
      await this.audit.record({ tenantId: tenant.id, action: 'tenant.created', details: { actor: theirs, ...details, admin_key_id: adminKey.id } }, m);
      return { tenant: toResponse(tenant), admin_key: adminKey };
    });
  }

  /** Deletes a tenant other than the root one (see the header): 404 for one unknown or deleted already. */
  async remove(p: Principal, id: string): Promise<DeletedTenantResponse> {
    const deleted = await this.db.transaction(async (m) => {
      // Locked against a deletion at the same moment, which then finds it deleted.
      const [row]: Array<TenantRow & { is_root: boolean; deleted_at: Date | null }> = await m.query(
        `SELECT id, name, created_at, is_root, deleted_at FROM tenants WHERE id = $1 FOR UPDATE`,
        [id],
      );
      if (!row || row.deleted_at) throw notFound();
      if (row.is_root) throw ApiError.conflict('conflict', 'The root tenant cannot be deleted: its admin keys manage every other tenant');
      const [[{ deleted_at }]]: [[{ deleted_at: Date }], number] = await m.query(
        `UPDATE tenants SET deleted_at = date_trunc('milliseconds', now()) WHERE id = $1 RETURNING deleted_at`,
        [id],
      );
      const { users, clients } = await this.purge.endAccess(m, id);
      const details = { actor: actorOf(p), tenant_id: id, name: row.name, users_deleted: users, clients_deleted: clients };
      await this.audit.record({ tenantId: p.tenantId, action: 'tenant.deleted', details }, m);
      return { ...toResponse(row), deleted_at: deleted_at.toISOString() };
    });
    await this.keys.keysChanged();
    await this.clients.tokensChanged();
    this.purge.start();
    return deleted;
  }

  /** Every live tenant, the root one included, newest first. */
  async list(page: PageQuery): Promise<TenantList> {
    const limit = page.limit ?? 50;
    const after = decodeCursor(page.cursor, 'tenants');
    const rows: TenantRow[] = await this.db.query(
      `SELECT id, name, created_at FROM tenants
        WHERE deleted_at IS NULL AND ($1::timestamptz IS NULL OR (created_at, id) < ($1, $2::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $3`,
      [after?.createdAt ?? null, after?.id ?? null, limit + 1],
    );
    const { page: tenants, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'tenants');
    return { tenants: tenants.map(toResponse), next_cursor };
  }

  async get(id: string): Promise<TenantResponse> {
    const [row]: TenantRow[] = await this.db.query(`SELECT id, name, created_at FROM tenants WHERE id = $1 AND deleted_at IS NULL`, [id]);
    if (!row) throw notFound();
    return toResponse(row);
  }
}
