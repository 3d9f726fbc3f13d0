import { MigrationInterface, QueryRunner } from 'typeorm';
import { withShortLockWaits } from '../short-lock-waits';

/**
 * `users.disabled`: an admin suspended the user (PATCH /users/{id}) without deleting them; they
 * neither sign in nor have a token resolve until enabled again. Every existing user stays enabled.
 * A constant default: no table rewrite; the lock it needs is waited for a little at a time
 * (`withShortLockWaits`), hence no transaction.
 */
export class UsersDisabled1732300005900 implements MigrationInterface {
  name = 'UsersDisabled1732300005900';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE users ADD COLUMN IF NOT EXISTS disabled boolean NOT NULL DEFAULT false`);
  }

  async down(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE users DROP COLUMN disabled`);
  }
}
