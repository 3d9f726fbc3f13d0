import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Connections (src/integrations): a tenant's tokens at an integration's upstream, from the
 * connector OAuth bootstrap. Tokens are sealed with SVC_ENCRYPTION_KEY (AES-256-GCM, bound to
 * the row), never stored or returned in clear.
 */
export class Connections1732300001800 implements MigrationInterface {
  name = 'Connections1732300001800';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE connections (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        id uuid NOT NULL,
        integration_id uuid NOT NULL REFERENCES integrations (id),
        provider text NOT NULL,
        access_token_sealed text NOT NULL,
        refresh_token_sealed text,
        token_type text,
        scope text,
        expires_at timestamptz,
        created_by text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
        refreshed_at timestamptz,
        PRIMARY KEY (tenant_id, id)
      )`);
    await q.query(`CREATE INDEX connections_listing ON connections (tenant_id, created_at DESC, id DESC)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE connections`);
  }
}
