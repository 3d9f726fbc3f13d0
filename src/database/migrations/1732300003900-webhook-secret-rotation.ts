import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A webhook's secret can be rotated (`POST /webhooks/{id}/secret`): the secret it replaces keeps
 * signing beside the new one until `previous_secret_expires_at`, so receivers can switch over
 * without refusing a delivery.
 */
export class WebhookSecretRotation1732300003900 implements MigrationInterface {
  name = 'WebhookSecretRotation1732300003900';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhooks ADD COLUMN previous_secret_sealed text, ADD COLUMN previous_secret_expires_at timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhooks DROP COLUMN previous_secret_sealed, DROP COLUMN previous_secret_expires_at`);
  }
}
