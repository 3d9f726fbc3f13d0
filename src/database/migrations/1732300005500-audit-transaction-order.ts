import { MigrationInterface, QueryRunner } from 'typeorm';
import { withShortLockWaits } from '../short-lock-waits';

/**
 * The audit log's export order (`GET /audit?order=asc`): each row's transaction (`txid`, from
 * `pg_current_xact_id()`) and its place in the order rows were written (`seq`), so that a reader
 * can take the rows of every transaction that has ended and continue from there without missing
 * one that commits later (audit.service.ts, `exportPage`). `created_at` cannot serve: a
 * transaction that waited commits its row after rows of later times were read.
 *
 * The columns come with their defaults for new rows only, which does not rewrite the table; rows
 * written before then are numbered below every later one (transaction 0, negative places in
 * `created_at, id` order), in one UPDATE that takes no lock a writer of new rows waits for. The
 * two ALTERs take the table's exclusive lock, briefly (SET NOT NULL scans the table: about a
 * second a million rows), and wait for it a little at a time (`withShortLockWaits`). Not in a
 * transaction: the index is built CONCURRENTLY.
 */
export class AuditTransactionOrder1732300005500 implements MigrationInterface {
  name = 'AuditTransactionOrder1732300005500';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE SEQUENCE IF NOT EXISTS audit_events_seq AS bigint`);
    // One statement: a row written between the columns and their defaults would be left out of the backfill below.
    await withShortLockWaits(
      q,
      `ALTER TABLE audit_events ADD COLUMN IF NOT EXISTS txid xid8, ADD COLUMN IF NOT EXISTS seq bigint,
         ALTER COLUMN txid SET DEFAULT pg_current_xact_id(), ALTER COLUMN seq SET DEFAULT nextval('audit_events_seq')`,
    );
    await q.query(`ALTER SEQUENCE audit_events_seq OWNED BY audit_events.seq`);
    await q.query(`
      UPDATE audit_events a SET txid = '0', seq = o.n - o.total - 1
        FROM (SELECT ctid, row_number() OVER (ORDER BY created_at, id) AS n, count(*) OVER () AS total FROM audit_events WHERE txid IS NULL) o
       WHERE a.ctid = o.ctid`);
    await withShortLockWaits(q, `ALTER TABLE audit_events ALTER COLUMN txid SET NOT NULL, ALTER COLUMN seq SET NOT NULL`);
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS audit_events_in_transaction_order`);
    await q.query(`CREATE INDEX CONCURRENTLY audit_events_in_transaction_order ON audit_events (tenant_id, txid, seq)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS audit_events_in_transaction_order`);
    await withShortLockWaits(q, `ALTER TABLE audit_events DROP COLUMN seq, DROP COLUMN txid`);
  }
}
