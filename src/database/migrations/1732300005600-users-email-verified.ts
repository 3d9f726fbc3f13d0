import { MigrationInterface, QueryRunner } from 'typeorm';
import { withShortLockWaits } from '../short-lock-waits';

/**
 * `users.email_verified`: whether the tenant's admins vouch for the user's address, the OIDC
 * `email_verified` claim (many relying parties link accounts by email only when it is true). The
 * service sends no mail, so only an admin sets it; every existing user keeps `false`, what the
 * claim said before. A constant default: no table rewrite; the lock it needs is waited for a little
 * at a time (`withShortLockWaits`), hence no transaction.
 */
export class UsersEmailVerified1732300005600 implements MigrationInterface {
  name = 'UsersEmailVerified1732300005600';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE users ADD COLUMN IF NOT EXISTS email_verified boolean NOT NULL DEFAULT false`);
  }

  async down(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE users DROP COLUMN email_verified`);
  }
}
