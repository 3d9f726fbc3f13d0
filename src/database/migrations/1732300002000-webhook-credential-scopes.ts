import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The scopes of the OAuth token that registered a webhook (null for an API key). Fan-out
 * re-checks the registering credential as it is now, which for an OAuth client or grant can be
 * wider than that token; deliveries keep to the intersection (src/oidc/oauth-tokens.ts,
 * `withinTokenScopes`). Webhooks registered before this column have no record of the token's
 * scopes and keep following their client or grant as a whole.
 */
export class WebhookCredentialScopes1732300002000 implements MigrationInterface {
  name = 'WebhookCredentialScopes1732300002000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhooks ADD COLUMN credential_scopes text[]`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhooks DROP COLUMN credential_scopes`);
  }
}
