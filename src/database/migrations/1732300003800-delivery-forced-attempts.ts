import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * How many of a delivery's attempts an admin forced (`POST …/retry`): those do not count against
 * WEBHOOK_RETRY_SCHEDULE, which before this took one scheduled retry per forced attempt (seven
 * forced attempts into a receiver's outage left a delivery `failed` within seconds).
 */
export class DeliveryForcedAttempts1732300003800 implements MigrationInterface {
  name = 'DeliveryForcedAttempts1732300003800';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_deliveries ADD COLUMN forced_attempts integer NOT NULL DEFAULT 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_deliveries DROP COLUMN forced_attempts`);
  }
}
