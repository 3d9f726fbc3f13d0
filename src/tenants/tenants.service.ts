/** Owns tenants: provisioning a new tenant together with its first admin key, and reading them back. */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ApiError } from '../common/api-error';
import { newId } from '../common/ids';
import { decodeCursor, PageQuery, pageOf } from '../common/pagination';
import { keyLabel } from '../keys/keys.dto';
import { KeysService } from '../keys/keys.service';
import { TenantEntity } from './tenant.entity';
import { CreatedTenantResponse, TenantList, TenantResponse } from './tenants.dto';

interface TenantRow {
  id: string;
  name: string;
  created_at: Date;
}

const toResponse = (r: TenantRow): TenantResponse => ({ id: r.id, name: r.name, created_at: r.created_at.toISOString() });

@Injectable()
export class TenantsService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly keys: KeysService,
  ) {}

  async create(name: string): Promise<CreatedTenantResponse> {
    // The tenant and its key in one transaction, the request's only one: it marks an
    // Idempotency-Key applied as it commits (claim-applied.ts).
    return this.db.transaction(async (m) => {
      const tenant = m.create(TenantEntity, { id: newId(), name, isRoot: false, createdAt: new Date() });
      await m.insert(TenantEntity, tenant);
      const adminKey = await this.keys.insert(m, tenant.id, { role: 'admin', label: keyLabel(`${name} admin`) });
      return { tenant: toResponse({ id: tenant.id, name: tenant.name, created_at: tenant.createdAt }), admin_key: adminKey };
    });
  }

  /** Every tenant, the root one included, newest first. */
  async list(page: PageQuery): Promise<TenantList> {
    const limit = page.limit ?? 50;
    const after = decodeCursor(page.cursor, 'tenants');
    const rows: TenantRow[] = await this.db.query(
      `SELECT id, name, created_at FROM tenants
        WHERE ($1::timestamptz IS NULL OR (created_at, id) < ($1, $2::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $3`,
      [after?.createdAt ?? null, after?.id ?? null, limit + 1],
    );
    const { page: tenants, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'tenants');
    return { tenants: tenants.map(toResponse), next_cursor };
  }

  async get(id: string): Promise<TenantResponse> {
    const [row]: TenantRow[] = await this.db.query(`SELECT id, name, created_at FROM tenants WHERE id = $1`, [id]);
    if (!row) throw ApiError.notFound('not_found', 'No such tenant');
    return toResponse(row);
  }
}
