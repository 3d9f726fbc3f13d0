import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity('tenants')
export class TenantEntity {
  @PrimaryColumn('uuid') id: string;
  @Column('text') name: string;
  @Column('boolean', { name: 'is_root' }) isRoot: boolean;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz', default: () => "date_trunc('milliseconds', now())" }) createdAt: Date;
}
