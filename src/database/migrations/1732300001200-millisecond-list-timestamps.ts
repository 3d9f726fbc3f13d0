import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * List cursors (common/pagination.ts) carry `created_at` in milliseconds, JSON's and
 * JavaScript's precision. Rows whose `created_at` came from `now()` had microseconds, so two
 * rows in one millisecond could fall between pages. These tables now store whole milliseconds,
 * as the rows written from JavaScript (items, edges, keys) always have.
 */
const TABLES = ['webhooks', 'webhook_deliveries'];

export class MillisecondListTimestamps1732300001200 implements MigrationInterface {
  name = 'MillisecondListTimestamps1732300001200';

  async up(q: QueryRunner): Promise<void> {
    for (const table of TABLES) {
      await q.query(`ALTER TABLE ${table} ALTER COLUMN created_at SET DEFAULT date_trunc('milliseconds', now())`);
      await q.query(`UPDATE ${table} SET created_at = date_trunc('milliseconds', created_at) WHERE created_at <> date_trunc('milliseconds', created_at)`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of TABLES) await q.query(`ALTER TABLE ${table} ALTER COLUMN created_at SET DEFAULT now()`);
  }
}
