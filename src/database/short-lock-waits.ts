/**
 * Schema changes that wait for their table's lock a little at a time. An `ALTER TABLE` queued
 * behind a long transaction that touched its table (a `pg_dump`, an idle session, a report) makes
 * every later reader and writer of the table queue behind it in turn: with no limit, an upgrade
 * stalled every audited write of the running release for as long as that transaction lasted. Each
 * try waits at most `waitMs` for the lock, then lets the queue through and tries again; the last
 * refusal fails the migration, and with it the start-up of the new release, the old one serving on.
 * Inside a transaction (TypeORM reverts in one) a refusal aborts it, so there is one try: the
 * revert fails at once (`lock_not_available`), to be run again, rather than stall the table.
 */
import type { QueryRunner } from 'typeorm';
import { isLockNotAvailable } from '../common/unavailable';

export async function withShortLockWaits(q: QueryRunner, sql: string, { waitMs = 2000, tries = 30 } = {}): Promise<void> {
  if (q.isTransactionActive) {
    await q.query(`SET LOCAL lock_timeout = ${Math.round(waitMs)}`);
    await q.query(sql);
    return;
  }
  for (let attempt = 1; ; attempt++) {
    await q.query(`SET lock_timeout = ${Math.round(waitMs)}`);
    try {
      await q.query(sql);
      return;
    } catch (err) {
      if (!isLockNotAvailable(err) || attempt >= tries) throw err;
    } finally {
      await q.query('RESET lock_timeout');
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(100 * attempt, 1000)));
  }
}
