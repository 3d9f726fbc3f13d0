import { Column, CreateDateColumn, Entity, EntityManager, PrimaryColumn } from 'typeorm';
import { newId } from '../common/ids';

@Entity('tenants')
export class TenantEntity {
  @PrimaryColumn('uuid') id: string;
  @Column('text') name: string;
  @Column('boolean', { name: 'is_root' }) isRoot: boolean;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz', default: () => "date_trunc('milliseconds', now())" }) createdAt: Date;
  /** Set by DELETE /tenants/{id}; its rows are purged after (tenant-purge.ts). */
  @Column('timestamptz', { name: 'deleted_at', nullable: true }) deletedAt: Date | null;
  @Column('timestamptz', { name: 'purged_at', nullable: true }) purgedAt: Date | null;
}

export interface NewTenant {
  id: string;
  name: string;
  created_at: Date;
}

/**
 * The one way a tenant row is made (bootstrap's root tenant, `POST /tenants`, sign-up), inside the
 * caller's transaction, which also makes its first credential: `created_at` from the database's
 * clock in whole milliseconds, as `GET /tenants`' cursors need.
 */
export async function insertTenant(m: EntityManager, name: string, isRoot = false): Promise<NewTenant> {
  const [row]: NewTenant[] = await m.query(`INSERT INTO tenants (id, name, is_root) VALUES ($1, $2, $3) RETURNING id, name, created_at`, [newId(), name, isRoot]);
  return row;
}
