import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The relay claims events with a lease instead of holding a transaction: an event stays
 * undispatched until the first attempt of every delivery it owes is recorded (one row written
 * per delivery instead of an insert and an update), and a relay that dies meanwhile lets the
 * lease lapse, so another takes the event up again (src/events/event-relay.ts).
 */
export class EventRelayLease1732300001900 implements MigrationInterface {
  name = 'EventRelayLease1732300001900';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events ADD COLUMN relay_lease_until timestamptz`);
    // Room on each page for the claim's new row version: an update that changes no indexed
    // column and fits on its page leaves the indexes alone (HOT).
    await q.query(`ALTER TABLE events SET (fillfactor = 80)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events RESET (fillfactor)`);
    await q.query(`ALTER TABLE events DROP COLUMN relay_lease_until`);
  }
}
