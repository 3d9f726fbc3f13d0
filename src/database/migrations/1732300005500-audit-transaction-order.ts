import { MigrationInterface, QueryRunner } from 'typeorm';
import { buildIndexConcurrently } from '../concurrent-index';
import { withShortLockWaits } from '../short-lock-waits';

/** Rows numbered per statement of the backfill: each is its own short transaction. */
const BATCH = 5000;

/**
 * The audit log's export order (`GET /audit?order=asc`): each row's transaction (`txid`, from
 * `pg_current_xact_id()`) and its place in the order rows were written (`seq`), so that a reader
 * can take the rows of every transaction that has ended and continue from there without missing
 * one that commits late (audit.service.ts, `exportPage`). `created_at` cannot serve: a
 * transaction that waited commits its row after rows of later times were read.
 *
 * The log is never trimmed, so nothing here holds its table for long. The columns come with
 * their defaults for new rows only (no rewrite; the one ALTER waits for its lock a little at a
 * time, `withShortLockWaits`). Rows written before are numbered below every later one
 * (transaction 0, negative places in `created_at, id` order) in batches, each its own
 * transaction, read in order through a partial index of the rows still unnumbered: one UPDATE of
 * every row wrote the whole table again in one transaction, which held back every export (and
 * vacuum) until it ended. The columns stay nullable: SET NOT NULL reads the whole table under
 * the exclusive lock, and the export's `txid <` test leaves out a row without one. Not in a
 * transaction: indexes are built and dropped CONCURRENTLY.
 */
export class AuditTransactionOrder1732300005500 implements MigrationInterface {
  name = 'AuditTransactionOrder1732300005500';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE SEQUENCE IF NOT EXISTS audit_events_seq AS bigint`);
    // One statement: a row written between the columns and their defaults would be left unnumbered.
    await withShortLockWaits(
      q,
      `ALTER TABLE audit_events ADD COLUMN IF NOT EXISTS txid xid8, ADD COLUMN IF NOT EXISTS seq bigint,
         ALTER COLUMN txid SET DEFAULT pg_current_xact_id(), ALTER COLUMN seq SET DEFAULT nextval('audit_events_seq')`,
    );
    await q.query(`ALTER SEQUENCE audit_events_seq OWNED BY audit_events.seq`);
    await buildIndexConcurrently(q, 'audit_events_unnumbered', `audit_events (created_at, id) WHERE txid IS NULL`);
    // After a run cut short, the rows left are numbered above those done before: still in order.
    const [{ total }]: Array<{ total: number }> = await q.query(`SELECT count(*)::int AS total FROM audit_events WHERE txid IS NULL`);
    for (let done = 0; done < total; ) {
      const [, numbered]: [unknown, number] = await q.query(
        `UPDATE audit_events a SET txid = '0', seq = o.n + $1::bigint - $2::bigint - 1
           FROM (SELECT ctid, row_number() OVER (ORDER BY created_at, id) AS n FROM audit_events WHERE txid IS NULL ORDER BY created_at, id LIMIT ${BATCH}) o
          WHERE a.ctid = o.ctid`,
        [done, total],
      );
      if (numbered === 0) break;
      done += numbered;
    }
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS audit_events_unnumbered`);
    await buildIndexConcurrently(q, 'audit_events_in_transaction_order', `audit_events (tenant_id, txid, seq)`);
  }

  async down(q: QueryRunner): Promise<void> {
    // TypeORM reverts in a transaction, whatever `transaction` says: no CONCURRENTLY here.
    await withShortLockWaits(
      q,
      `DROP INDEX IF EXISTS audit_events_in_transaction_order;
       DROP INDEX IF EXISTS audit_events_unnumbered;
       ALTER TABLE audit_events DROP COLUMN IF EXISTS seq, DROP COLUMN IF EXISTS txid`,
    );
  }
}
