import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Idempotency keys get the state `applied`: the request's work committed, with the key marked so
 * in the same transaction (src/idempotency/claim-applied.ts), and its response not kept yet. A
 * key left `in_progress` by an instance that died after its work committed could be taken over
 * when its lease ran out, and the work ran twice.
 */
export class IdempotencyApplied1732300002700 implements MigrationInterface {
  name = 'IdempotencyApplied1732300002700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_state_check, DROP CONSTRAINT idempotency_keys_check`);
    await q.query(`
      ALTER TABLE idempotency_keys
        ADD CONSTRAINT idempotency_keys_state_check CHECK (state IN ('in_progress', 'applied', 'completed')),
        ADD CONSTRAINT idempotency_keys_check CHECK (state <> 'completed' OR (response_status IS NOT NULL AND response_body IS NOT NULL))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM idempotency_keys WHERE state = 'applied'`);
    await q.query(`ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_state_check, DROP CONSTRAINT idempotency_keys_check`);
    await q.query(`
      ALTER TABLE idempotency_keys
        ADD CONSTRAINT idempotency_keys_state_check CHECK (state IN ('in_progress', 'completed')),
        ADD CONSTRAINT idempotency_keys_check CHECK (state = 'in_progress' OR (response_status IS NOT NULL AND response_body IS NOT NULL))`);
  }
}
