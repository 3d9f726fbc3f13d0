/**
 * Indexes added to tables the running release keeps writing: `CREATE INDEX CONCURRENTLY` lets the
 * writes go on while it builds (so the migration runs outside a transaction, `transaction = false`).
 * A build that failed half way (a start-up cancelled, a deadlock, a statement timeout) leaves an
 * INVALID index of that name, which PostgreSQL maintains on every write and never reads, and which
 * makes a plain second CREATE fail: it is dropped and built again. A valid one is kept, as it is
 * when the start-up that built it failed at a later step: building it again would only repeat a
 * long build on a large table.
 */
import type { QueryRunner } from 'typeorm';

export async function buildIndexConcurrently(q: QueryRunner, name: string, definition: string): Promise<void> {
  const [existing] = (await q.query(`SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass($1)`, [name])) as Array<{ valid: boolean }>;
  if (existing?.valid) return;
  if (existing) await q.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
  await q.query(`CREATE INDEX CONCURRENTLY ${name} ON ${definition}`);
}
