import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Indexes for two statements that read whole tables (found by an audit with EXPLAIN):
 * - the events janitor's retention delete of kept deliveries, which walked the whole of the
 *   deliveries' list index every 10 minutes on every instance to delete nothing;
 * - the lookups and deletes of a user's OAuth rows (their grants on every consent, the account
 *   pages' grants and sessions, DELETE /users), which scanned every tenant's tokens.
 */
export class RetentionAndAccountIndexes1732300003000 implements MigrationInterface {
  name = 'RetentionAndAccountIndexes1732300003000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX webhook_deliveries_expiry ON webhook_deliveries (created_at) WHERE status <> 'pending'`);
    await q.query(`CREATE INDEX oidc_models_account ON oidc_models ((payload->>'accountId'), model)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX oidc_models_account`);
    await q.query(`DROP INDEX webhook_deliveries_expiry`);
  }
}
