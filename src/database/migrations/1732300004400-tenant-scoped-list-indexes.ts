import { MigrationInterface, QueryRunner } from 'typeorm';
import { buildIndexConcurrently } from '../concurrent-index';

/**
 * Indexes for four listings that read rows of other tenants, other webhooks or other states to
 * find a page. Measured on one database holding a tenant of 220k items (110k tagged `inbox`),
 * 232k edges (150k into one hub) and 622k deliveries (106 failed), plus a tenant of 500 items
 * (EXPLAIN ANALYZE of the statements as the service runs them, before → after):
 *
 * - `items_tags_scoped` (tenant_id, tags) replaces `items_tags` (tags): the tags filter of a
 *   search or listing read every tenant's postings of the tag. A small tenant's
 *   `/search?q=…&tags=inbox` (generic plan) ANDed 110,166 postings with its 500 rows: 14.4 ms
 *   → 3.0 ms, reading its own 166. Every statement filtering by tags also filters by tenant
 *   (itemWhere), so nothing needs the unscoped index; the big tenant's own tag searches keep
 *   the same plan with either.
 * - `webhook_deliveries_by_status` (tenant_id, webhook_id, status, created_at DESC, id DESC):
 *   `deliveries?status=failed` walked the retention index over every tenant's deliveries,
 *   filtering 620k rows to find the 106: 113 ms → 0.6 ms, reading a page (deep cursors the
 *   same). `webhook_deliveries_list` stays: without a status the new one has no page order.
 * - `edges_by_source_created` / `edges_by_target_created` (tenant_id, source_id|target_id,
 *   created_at DESC, id DESC): a hub's edge listing, one branch per direction since
 *   EdgesService.listForItem reads each in page order, sorted all its 150k edges on every
 *   page (on disk): 115 ms → 0.5 ms (6 ms at a deep cursor). The (…, edge_type) ones stay, for
 *   the lookups by type (cardinality, outgoingFor, the filters' edge clauses).
 * - `items_by_created` (tenant_id, created_at DESC, id DESC): `GET /items?state=all` (the list
 *   orders by created_at, id) had no index in its order, as `items_listing` leads with the
 *   state: a parallel scan of the tenant and a top-N sort on every page, 117 ms → 0.1 ms.
 *   An index on "timestamp" for since/until was measured and left out: the planner keeps to
 *   the created_at order and does not use it.
 *
 * Built CONCURRENTLY (buildIndexConcurrently), so that writes go on while they build on large tables.
 * `down` cannot: TypeORM reverts in a transaction whatever the migration says.
 */
const INDEXES: Array<[name: string, definition: string]> = [
  ['items_tags_scoped', `items USING gin (tenant_id, tags)`],
  ['webhook_deliveries_by_status', `webhook_deliveries (tenant_id, webhook_id, status, created_at DESC, id DESC)`],
  ['edges_by_source_created', `edges (tenant_id, source_id, created_at DESC, id DESC)`],
  ['edges_by_target_created', `edges (tenant_id, target_id, created_at DESC, id DESC)`],
  ['items_by_created', `items (tenant_id, created_at DESC, id DESC)`],
];

export class TenantScopedListIndexes1732300004400 implements MigrationInterface {
  name = 'TenantScopedListIndexes1732300004400';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    for (const [name, definition] of INDEXES) await buildIndexConcurrently(q, name, definition);
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS items_tags`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX items_tags ON items USING gin (tags)`);
    for (const [name] of INDEXES) await q.query(`DROP INDEX ${name}`);
  }
}
