import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A delivery no longer stores its body: every attempt renders it from its event for the
 * registering credential (src/webhooks/webhook-fanout.ts), which kept one copy per webhook, a
 * megabyte item changed with a hundred webhooks subscribed stored a hundred megabytes. Rows
 * written before keep theirs. For that the events of pending deliveries must outlive the
 * retention period: the janitor finds them through the index below, which holds only pending
 * rows (few, where receivers keep up).
 */
export class DeliveryBodiesFromEvents1732300003700 implements MigrationInterface {
  name = 'DeliveryBodiesFromEvents1732300003700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_deliveries ALTER COLUMN body DROP NOT NULL`);
    await q.query(`CREATE INDEX webhook_deliveries_pending_events ON webhook_deliveries (tenant_id, event_id) WHERE status = 'pending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX webhook_deliveries_pending_events`);
    // The code before this migration sends a stored body: a pending delivery without one cannot go out.
    await q.query(
      `UPDATE webhook_deliveries SET status = CASE WHEN status = 'pending' THEN 'failed' ELSE status END, next_attempt_at = NULL,
              last_error = CASE WHEN status = 'pending' THEN 'Its body was not kept (migration 3700 rolled back)' ELSE last_error END, body = ''
        WHERE body IS NULL`,
    );
    await q.query(`ALTER TABLE webhook_deliveries ALTER COLUMN body SET NOT NULL`);
  }
}
