import { MigrationInterface, QueryRunner } from 'typeorm';

/** The audit log (src/audit): who granted or revoked what, for `GET /audit` (SPEC 6.4). */
export class Audit1732300001600 implements MigrationInterface {
  name = 'Audit1732300001600';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE audit_events (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        id uuid NOT NULL,
        action text NOT NULL,
        client_id text,
        user_id uuid,
        grant_id text,
        details jsonb NOT NULL DEFAULT '{}',
        created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
        PRIMARY KEY (tenant_id, id)
      )`);
    await q.query(`CREATE INDEX audit_events_listing ON audit_events (tenant_id, created_at DESC, id DESC)`);
    await q.query(`CREATE INDEX audit_events_action ON audit_events (tenant_id, action, created_at DESC, id DESC)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE audit_events`);
  }
}
