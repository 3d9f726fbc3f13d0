import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * Which blobs a tenant has. One row per (tenant, content hash): uploading the same bytes again
 * finds this row instead of storing a second copy. The bytes live in the BlobStore.
 */
@Entity('blobs')
export class BlobEntity {
  @PrimaryColumn('uuid', { name: 'tenant_id' }) tenantId: string;
  /** SHA-256 of the content, 64 lowercase hex digits. */
  @PrimaryColumn('text') hash: string;
  /** bigint: pg returns it as a string; the service converts. */
  @Column('bigint') size: string;
  /** The Content-Type of the first upload of these bytes. */
  @Column('text', { name: 'content_type' }) contentType: string;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
}
