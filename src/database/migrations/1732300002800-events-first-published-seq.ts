import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `events.first_published_seq`: the place in the publication order an event was first published
 * at. An event taken up again after its relay died is published again at a later place
 * (`published_seq`); a stream resuming after it must resume from where its client saw it first,
 * or it skips every event published in between (src/events/event-stream.ts).
 */
export class EventsFirstPublishedSeq1732300002800 implements MigrationInterface {
  name = 'EventsFirstPublishedSeq1732300002800';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events ADD COLUMN first_published_seq bigint`);
    await q.query(`UPDATE events SET first_published_seq = published_seq WHERE published_seq IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events DROP COLUMN first_published_seq`);
  }
}
