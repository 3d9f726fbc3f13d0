import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * webhooks.user_id: the user whose OAuth grant registered the webhook, so that one user's
 * webhooks are counted together (WEBHOOKS_MAX_PER_USER) however many apps they granted, and
 * those of grants since revoked still count: revoking a grant and consenting again makes a new
 * grant, which must not bring a fresh allowance. Webhooks registered before are attributed
 * through their grant where it still exists. Null for API keys and client credentials. No
 * foreign key: the rows of a deleted user receive nothing and go with the tenant's clean-up.
 */
export class WebhooksUser1732300003300 implements MigrationInterface {
  name = 'WebhooksUser1732300003300';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhooks ADD COLUMN user_id uuid`);
    await q.query(
      `UPDATE webhooks w SET user_id = (g.payload->>'accountId')::uuid
         FROM oidc_models g
        WHERE g.model = 'Grant' AND g.id = w.credential_id
          AND g.payload->>'accountId' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhooks DROP COLUMN user_id`);
  }
}
