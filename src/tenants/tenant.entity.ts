import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

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
