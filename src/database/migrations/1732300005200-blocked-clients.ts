import { MigrationInterface, QueryRunner } from 'typeorm';

/** Openly registered OAuth apps a tenant's admins blocked for its users (blocked-clients.ts). */
export class BlockedClients1732300005200 implements MigrationInterface {
  name = 'BlockedClients1732300005200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE blocked_clients (
        tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        client_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
        PRIMARY KEY (tenant_id, client_id)
      )`);
    await q.query(`CREATE INDEX blocked_clients_by_created ON blocked_clients (tenant_id, created_at DESC, client_id DESC)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE blocked_clients`);
  }
}
