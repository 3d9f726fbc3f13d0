import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `items.trashed_from`: the state a trashed item was in before it went to the trash, so that
 * restoring it can refuse a revoked one (src/items/lifecycle.ts: a revoked item is final apart
 * from being thrown away). Items already in the trash get it from their history: the state of
 * their latest revision before the trash.
 */
export class ItemsTrashedFrom1732300002500 implements MigrationInterface {
  name = 'ItemsTrashedFrom1732300002500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE items ADD COLUMN trashed_from text CHECK (trashed_from IN ('active', 'archived', 'revoked'))`);
    await q.query(`
      UPDATE items i SET trashed_from = (
               SELECT v.snapshot->>'state' FROM item_versions v
                WHERE v.tenant_id = i.tenant_id AND v.item_id = i.id AND v.snapshot->>'state' IN ('active', 'archived', 'revoked')
                ORDER BY v.version DESC LIMIT 1)
       WHERE i.state = 'trashed'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE items DROP COLUMN trashed_from`);
  }
}
