import { MigrationInterface, QueryRunner } from 'typeorm';

export class TenantsAndKeys1732300000000 implements MigrationInterface {
  name = 'TenantsAndKeys1732300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tenants (
        id uuid PRIMARY KEY,
        name text NOT NULL,
        is_root boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    // At most one root tenant: the second of two racing bootstraps fails here even if the
    // advisory lock were bypassed.
    await q.query(`CREATE UNIQUE INDEX tenants_single_root ON tenants (is_root) WHERE is_root`);
    await q.query(`
      CREATE TABLE api_keys (
        tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        id uuid NOT NULL,
        label text NOT NULL DEFAULT '',
        role text NOT NULL CHECK (role IN ('admin', 'member')),
        source text NOT NULL,
        default_tier text NOT NULL CHECK (default_tier IN ('library', 'feed')),
        type_permissions jsonb NOT NULL DEFAULT '{}',
        extension_permissions jsonb NOT NULL DEFAULT '{}',
        edge_permissions jsonb NOT NULL DEFAULT '{}',
        key_hash text NOT NULL,
        key_hint text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz,
        PRIMARY KEY (tenant_id, id)
      )`);
    // A revoked key's source may be taken by its replacement (rotation keeps natural keys).
    await q.query(`CREATE UNIQUE INDEX api_keys_tenant_source ON api_keys (tenant_id, source) WHERE revoked_at IS NULL`);
    await q.query(`CREATE UNIQUE INDEX api_keys_key_hash ON api_keys (key_hash)`);
    await q.query(`CREATE INDEX api_keys_tenant_created ON api_keys (tenant_id, created_at DESC, id DESC)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE api_keys`);
    await q.query(`DROP TABLE tenants`);
  }
}
