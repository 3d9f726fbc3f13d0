import { MigrationInterface, QueryRunner } from 'typeorm';
import { withShortLockWaits } from '../short-lock-waits';

/**
 * `users.disabled_until`: when an admin's disablement of the user ends by itself (null: when an
 * admin enables them). Null for every existing user, so no table rewrite; the lock is waited for a
 * little at a time (`withShortLockWaits`), hence no transaction. A disablement whose end has
 * passed is read as none without its row being written (usable-user.ts `DISABLED_NOW`), so the
 * revert first writes those users as enabled, lest they be disabled again without it; every
 * disablement still in force then lasts until an admin enables the user (docs/operations.md).
 */
export class UsersDisabledUntil1732300006800 implements MigrationInterface {
  name = 'UsersDisabledUntil1732300006800';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE users ADD COLUMN IF NOT EXISTS disabled_until timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE users SET disabled = false, disabled_reason = NULL, disabled_until = NULL WHERE disabled AND disabled_until <= statement_timestamp()`);
    await withShortLockWaits(q, `ALTER TABLE users DROP COLUMN IF EXISTS disabled_until`);
  }
}
