import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tenants store `created_at` in whole milliseconds, as every other listed table does
 * (1732300001200-millisecond-list-timestamps.ts says why): `GET /tenants` pages with cursors that
 * carry milliseconds, and a sign-up's or the root tenant's `now()` had microseconds, so a tenant
 * made in the same millisecond as one ending a page could fall between pages.
 */
export class TenantsMillisecondCreated1732300004900 implements MigrationInterface {
  name = 'TenantsMillisecondCreated1732300004900';

  async up(q: QueryRunner): Promise<void> {
    // The rows first, which readers need not wait for; the ALTER's exclusive lock then lasts only to the commit.
    await q.query(`UPDATE tenants SET created_at = date_trunc('milliseconds', created_at) WHERE created_at <> date_trunc('milliseconds', created_at)`);
    await q.query(`ALTER TABLE tenants ALTER COLUMN created_at SET DEFAULT date_trunc('milliseconds', now())`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE tenants ALTER COLUMN created_at SET DEFAULT now()`);
  }
}
