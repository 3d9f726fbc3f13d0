import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A kept response's `Location` header (the job of a 202 from POST /items/bulk_action), so a
 * replay answers with it as the first response did.
 */
export class IdempotencyLocation1732300002900 implements MigrationInterface {
  name = 'IdempotencyLocation1732300002900';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_keys ADD COLUMN response_location text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_keys DROP COLUMN response_location`);
  }
}
