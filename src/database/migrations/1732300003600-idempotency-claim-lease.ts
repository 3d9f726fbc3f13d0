import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An idempotency claim's lease (src/idempotency): until when its request is known to be alive.
 * The request renews it while it runs, so a claim whose instance died (or whose claiming reply
 * was lost) can be taken over by a retry after IDEMPOTENCY_LEASE_SECONDS instead of the fixed
 * 5 minutes from `created_at` that was the rule before, and which still holds for a row without
 * a lease (claimed by an instance not yet upgraded).
 */
export class IdempotencyClaimLease1732300003600 implements MigrationInterface {
  name = 'IdempotencyClaimLease1732300003600';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_keys ADD COLUMN lease_until timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_keys DROP COLUMN lease_until`);
  }
}
