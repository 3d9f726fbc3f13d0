import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * api_keys.created_by_user_id: the user who made the key on the account pages (POST /auth/keys),
 * so that deleting or demoting the user revokes the admin keys they made, which an admin could not
 * otherwise tell apart (their label is the user's choice). Keys made before stay unattributed
 * (null), as keys made with POST /keys are. No foreign key: a revoked key keeps naming its
 * deleted maker. The index serves the revocation's lookup.
 */
export class KeysCreatedByUser1732300003200 implements MigrationInterface {
  name = 'KeysCreatedByUser1732300003200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE api_keys ADD COLUMN created_by_user_id uuid`);
    await q.query(`CREATE INDEX api_keys_created_by_user ON api_keys (tenant_id, created_by_user_id) WHERE created_by_user_id IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE api_keys DROP COLUMN created_by_user_id`);
  }
}
