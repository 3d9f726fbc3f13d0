import { MigrationInterface, QueryRunner } from 'typeorm';
import { buildIndexConcurrently } from '../concurrent-index';

/**
 * `items_by_updated` (tenant_id, updated_at DESC, id DESC): `GET /items?sort=updated_at` (either
 * way, items/listing-order.ts) walks it in page order, and an `updated_since`/`updated_until`
 * window is a range of it: its count, and its keys when a listing in another order reads the
 * window (items/item-filter.ts). Without it, each page of that listing reads and sorts the whole
 * tenant. It includes no other column: the windows read from it hold recently changed
 * items, whose heap pages are seldom all-visible, so an index-only read would visit their rows
 * all the same.
 *
 * Measured on a tenant of 50,000 items plus one of 500 (docs/performance.md), EXPLAIN ANALYZE
 * of the listing's statement: `sort=-updated_at` 187 ms (a sequential scan, 45,000 rows sorted)
 * → 0.67 ms (51 rows; 0.50 ms at page 21, the cursor the index condition); a window of 2,000
 * items 11 hours back under the default order 28 ms → 6.3 ms.
 *
 * Every change of an item changes updated_at, which is now indexed: no item update is a HOT
 * update any more (one that left every indexed column as it was could be: a change of tier,
 * extensions, device, the capture place, or of properties outside the search text).
 *
 * Built CONCURRENTLY, as migration 4700's, so that writes go on while it builds.
 */
export class ItemsByUpdated1732300006500 implements MigrationInterface {
  name = 'ItemsByUpdated1732300006500';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await buildIndexConcurrently(q, 'items_by_updated', `items (tenant_id, updated_at DESC, id DESC)`);
  }

  // Plain: TypeORM reverts inside a transaction, where CONCURRENTLY is refused (as 6200's down()).
  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS items_by_updated`);
  }
}
