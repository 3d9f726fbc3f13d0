import { MigrationInterface, QueryRunner } from 'typeorm';
import { buildIndexConcurrently } from '../concurrent-index';

/**
 * `GET /edges` (EdgesService.list) pages the tenant's edges newest first: `edges_by_created`
 * (tenant_id, created_at DESC, id DESC) is that order, and `edges_by_type_created` (tenant_id,
 * edge_type, created_at DESC, id DESC) is it for one edge type (`type=acme.depends_on`), which
 * would otherwise walk the tenant's edges of every type to find a page of a rare one. A pattern
 * (`acme.*`) walks the first and tests each edge's type. The cursor's row comparison is each
 * index's condition, so an admin's page at any depth reads about a page; a member's tests the
 * edges in that order, at most MEMBER_SCAN_EDGES a page (test/list-indexes.e2e-spec.ts).
 *
 * Built CONCURRENTLY, as migration 4400's, so that writes go on while they build.
 */
const INDEXES: Array<[name: string, definition: string]> = [
  ['edges_by_created', `edges (tenant_id, created_at DESC, id DESC)`],
  ['edges_by_type_created', `edges (tenant_id, edge_type, created_at DESC, id DESC)`],
];

export class EdgesByCreated1732300007000 implements MigrationInterface {
  name = 'EdgesByCreated1732300007000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    for (const [name, definition] of INDEXES) await buildIndexConcurrently(q, name, definition);
  }

  // Plain: TypeORM reverts inside a transaction, where CONCURRENTLY is refused (as 6500's down()).
  async down(q: QueryRunner): Promise<void> {
    for (const [name] of INDEXES) await q.query(`DROP INDEX IF EXISTS ${name}`);
  }
}
