import { MigrationInterface, QueryRunner } from 'typeorm';
import { withShortLockWaits } from '../short-lock-waits';

/**
 * `api_keys.expires_at`: when a key stops working by itself (null: never), and
 * `api_keys.last_used_at`: when it last authenticated a request, kept to the minute (KeysService
 * `noteUse`). Both nullable without a default: no table rewrite; the lock is waited for a little
 * at a time (`withShortLockWaits`), hence no transaction. Every existing key keeps working as
 * before (no expiry) and reads as never used until its next request.
 */
export class KeysExpiryLastUsed1732300005700 implements MigrationInterface {
  name = 'KeysExpiryLastUsed1732300005700';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS expires_at timestamptz, ADD COLUMN IF NOT EXISTS last_used_at timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await withShortLockWaits(q, `ALTER TABLE api_keys DROP COLUMN IF EXISTS expires_at, DROP COLUMN IF EXISTS last_used_at`);
  }
}
