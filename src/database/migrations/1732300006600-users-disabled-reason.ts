import { MigrationInterface, QueryRunner } from 'typeorm';
import { withShortLockWaits } from '../short-lock-waits';

/**
 * `users.disabled_reason`: why an admin disabled the user, for the tenant's admins (never shown to
 * the user, whose sign-in is refused as a wrong password is). Null for every existing user, so no
 * table rewrite; the lock is waited for a little at a time (`withShortLockWaits`), hence no
 * transaction.
 */
export class UsersDisabledReason1732300006600 implements MigrationInterface {
  name = 'UsersDisabledReason1732300006600';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE users ADD COLUMN IF NOT EXISTS disabled_reason text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE users DROP COLUMN IF EXISTS disabled_reason`);
  }
}
