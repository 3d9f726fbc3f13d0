/** Owns tenants: provisioning a new tenant together with its first admin key. */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { newId } from '../common/ids';
import { keyLabel } from '../keys/keys.dto';
import { KeysService } from '../keys/keys.service';
import { TenantEntity } from './tenant.entity';
import { CreatedTenantResponse } from './tenants.dto';

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
      return { tenant: { id: tenant.id, name: tenant.name, created_at: tenant.createdAt.toISOString() }, admin_key: adminKey };
    });
  }
}
