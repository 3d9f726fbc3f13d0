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
    // What `down` stores in place of a body not kept: 'null', and before, '' (which no attempt
    // could cast to JSON, an admin's retry included).
    await q.query(`UPDATE webhook_deliveries SET body = NULL WHERE body IN ('null', '')`);
    await q.query(`CREATE INDEX webhook_deliveries_pending_events ON webhook_deliveries (tenant_id, event_id) WHERE status = 'pending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX webhook_deliveries_pending_events`);
    // The code before this migration renders each attempt's body from the event too, and sends
    // the stored one only once the event is gone; the item type it reads from the stored body
    // is absent from JSON null, as from no body here. So a delivery without a body gets 'null'
    // and stays as it was, a pending one pending (its event is kept, see above). Only should
    // that code's janitor delete the event (at EVENT_RETENTION_DAYS, pending deliveries or not)
    // would it send the body `null`.
    // A validated NOT NULL costs one pass over the table however it is added, little beside
    // this UPDATE. A NOT VALID check instead would outlive the up() of earlier releases, which
    // only drops the NOT NULL, and refuse every delivery without a body.
    await q.query(`UPDATE webhook_deliveries SET body = 'null' WHERE body IS NULL`);
    await q.query(`ALTER TABLE webhook_deliveries ALTER COLUMN body SET NOT NULL`);
  }
}
