import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Users who sign in to the OAuth provider (src/users). An email signs in to exactly one
 * account, so it is unique across tenants (case-insensitively); `id` alone is the OIDC `sub`,
 * unique too. Passwords are scrypt hashes (src/users/password.ts).
 */
export class Users1732300001300 implements MigrationInterface {
  name = 'Users1732300001300';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE users (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        id uuid NOT NULL,
        email text NOT NULL,
        name text NOT NULL,
        role text NOT NULL CHECK (role IN ('admin', 'member')),
        picture text,
        password_hash text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
        PRIMARY KEY (tenant_id, id)
      )`);
    await q.query(`CREATE UNIQUE INDEX users_id ON users (id)`);
    await q.query(`CREATE UNIQUE INDEX users_email ON users (lower(email))`);
    await q.query(`CREATE INDEX users_listing ON users (tenant_id, created_at DESC, id DESC)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE users`);
  }
}
