import { Column, Entity, PrimaryColumn } from 'typeorm';

export type Access = 'read' | 'write';
export type PermissionMap = Record<string, Access>;
export type Role = 'admin' | 'member';
export type Tier = 'library' | 'feed';

@Entity('api_keys')
export class ApiKeyEntity {
  @PrimaryColumn('uuid', { name: 'tenant_id' }) tenantId: string;
  @PrimaryColumn('uuid') id: string;
  @Column('text') label: string;
  @Column('text') role: Role;
  @Column('text') source: string;
  @Column('text', { name: 'default_tier' }) defaultTier: Tier;
  @Column('jsonb', { name: 'type_permissions' }) typePermissions: PermissionMap;
  @Column('jsonb', { name: 'extension_permissions' }) extensionPermissions: PermissionMap;
  @Column('jsonb', { name: 'edge_permissions' }) edgePermissions: PermissionMap;
  /** SHA-256 of the plaintext key; the plaintext is never stored. */
  @Column('text', { name: 'key_hash', select: false }) keyHash: string;
  /** First characters of the key, so people can tell keys apart in listings. */
  @Column('text', { name: 'key_hint' }) keyHint: string;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
  @Column('timestamptz', { name: 'updated_at' }) updatedAt: Date;
  @Column('timestamptz', { name: 'revoked_at', nullable: true }) revokedAt: Date | null;
  /** When the key stops working by itself, as a revoked one does; null: never. */
  @Column('timestamptz', { name: 'expires_at', nullable: true }) expiresAt: Date | null;
  /** When the key last authenticated a request, kept to the minute (KeysService `noteUse`); null: not since it was made. */
  @Column('timestamptz', { name: 'last_used_at', nullable: true }) lastUsedAt: Date | null;
  /** The user who made the key on the account pages (POST /auth/keys); null for POST /keys and tenant provisioning. */
  @Column('uuid', { name: 'created_by_user_id', nullable: true }) createdByUserId: string | null;
}
