import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Events get a publication number (`published_seq`), which the relay assigns from a sequence
 * when it claims them, one relay at a time, and publishes them in. `seq` is numbered when the
 * writer inserts the row, so a transaction that commits late (a bulk chunk) leaves a lower
 * `seq` behind events already streamed live; a replay in `seq` order then skipped or repeated
 * events. Replay (Last-Event-ID) follows `published_seq` instead: the order streams see live.
 *
 * Events a relay has already taken up (dispatched, or claimed under a lease) are numbered in
 * `seq` order, the order they were meant to be published in, so the Last-Event-IDs clients hold
 * keep working; the others get their number when a relay claims them. The replay's index
 * replaces the one on (tenant_id, seq), which nothing reads any more: the claim now changes an
 * indexed column, so every index of the table costs it a write.
 */
export class EventPublishOrder1732300002200 implements MigrationInterface {
  name = 'EventPublishOrder1732300002200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events ADD COLUMN published_seq bigint`);
    await q.query(`CREATE SEQUENCE events_published_seq AS bigint OWNED BY events.published_seq`);
    await q.query(`
      UPDATE events e SET published_seq = n.p
        FROM (SELECT tenant_id, id, row_number() OVER (ORDER BY seq) AS p FROM events
               WHERE dispatched_at IS NOT NULL OR relay_lease_until IS NOT NULL) n
       WHERE e.tenant_id = n.tenant_id AND e.id = n.id`);
    await q.query(`SELECT setval('events_published_seq', coalesce(max(published_seq), 0) + 1, false) FROM events`);
    await q.query(`CREATE INDEX events_tenant_published ON events (tenant_id, published_seq) WHERE published_seq IS NOT NULL`);
    await q.query(`DROP INDEX events_tenant_seq`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`CREATE UNIQUE INDEX events_tenant_seq ON events (tenant_id, seq)`);
    await q.query(`DROP INDEX events_tenant_published`);
    await q.query(`ALTER TABLE events DROP COLUMN published_seq`); // and its sequence, which it owns
  }
}
