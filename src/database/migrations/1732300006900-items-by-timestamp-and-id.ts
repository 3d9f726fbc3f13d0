import { MigrationInterface, QueryRunner } from 'typeorm';
import { buildIndexConcurrently } from '../concurrent-index';

/**
 * `items_by_timestamp` becomes (tenant_id, "timestamp", id) INCLUDE (created_at): migration 4700
 * built it with `id` as an included column only, which served the since/until window but not
 * `GET /items?sort=timestamp` (listing-order.ts) inside a run of equal timestamps, as an import
 * that stamps thousands of items with one instant makes. The page's keyset condition
 * ("timestamp", id) > (…) bounded only the timestamp, and an incremental sort ordered the run by
 * id, so each page inside it read the whole run: 5,000 items of one instant, a page of 10 at the
 * middle of the run, 5,000 rows read → 11 (test/list-indexes.e2e-spec.ts). With `id` a key
 * column the condition is a bound of the index.
 *
 * Built CONCURRENTLY under another name, then swapped in, so that writes and the window reads go on
 * meanwhile.
 */
export class ItemsByTimestampAndId1732300006900 implements MigrationInterface {
  name = 'ItemsByTimestampAndId1732300006900';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await buildIndexConcurrently(q, 'items_by_timestamp_and_id', `items (tenant_id, "timestamp", id) INCLUDE (created_at)`);
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS items_by_timestamp`);
    await q.query(`ALTER INDEX items_by_timestamp_and_id RENAME TO items_by_timestamp`);
  }

  // Keeps the new shape: it serves every statement of the release before (the same columns, id a
  // key rather than included), and building the old one again would have to happen inside
  // TypeORM's revert transaction, where CONCURRENTLY is refused: every item write of every tenant
  // would wait for the whole build. Migration 4700's down() drops it by name as before.
  async down(): Promise<void> {}
}
