import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `users.updated_at`, as every other resource has: when a user's name, role, picture or password
 * last changed. Existing users take their `created_at`, which is the last change anyone can tell;
 * the default serves an older release still inserting users during a rolling upgrade.
 */
export class UsersUpdatedAt1732300004800 implements MigrationInterface {
  name = 'UsersUpdatedAt1732300004800';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE users ADD COLUMN updated_at timestamptz`);
    await q.query(`UPDATE users SET updated_at = created_at`);
    await q.query(`ALTER TABLE users ALTER COLUMN updated_at SET DEFAULT date_trunc('milliseconds', now()), ALTER COLUMN updated_at SET NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE users DROP COLUMN updated_at`);
  }
}
