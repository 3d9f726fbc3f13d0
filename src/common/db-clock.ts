/**
 * Instants judged by the database's clock, the one clock every instance shares (an instance's own
 * may be off by any amount): how far a time is ahead of it, in SQL and from a request, and the one
 * rule for a time a caller gives to end something later (a key's `expires_at`, a user's
 * `disabled_until`).
 */
import type { EntityManager } from 'typeorm';

/**
 * SQL: how many milliseconds the timestamptz `instant` is ahead of the database's clock as of the
 * statement (`statement_timestamp()`: one instant for the whole statement), negative once it has
 * passed; null for null.
 */
export const msUntilSql = (instant: string): string => `floor(extract(epoch FROM ${instant} - statement_timestamp()) * 1000)::float8`;

/** How far `at` (an RFC 3339 instant, or a Date) is ahead of the database's clock, in milliseconds, read in `m`. */
export async function msAheadOfDatabase(m: Pick<EntityManager, 'query'>, at: string | Date): Promise<number> {
  const [{ ahead_ms }]: Array<{ ahead_ms: number }> = await m.query(`SELECT ${msUntilSql('$1::timestamptz')} AS ahead_ms`, [at]);
  return ahead_ms;
}

/**
 * What is wrong with a time `aheadMs` ahead of now as the end of something, or undefined: it must
 * be in the future, and at most `maxDays` ahead.
 */
export function laterInstantIssue(aheadMs: number, maxDays: number): string | undefined {
  if (!(aheadMs > 0)) return 'must be in the future';
  if (aheadMs > maxDays * 86_400_000) return `must be at most ${maxDays} days (about ${Math.round(maxDays / 365.25)} years) ahead`;
  return undefined;
}

/**
 * SQL: the instant a write stamps on what it writes (an item's `created_at`, `updated_at`, a
 * defaulted `timestamp`; an edge's `created_at`). One clock for inserts and updates, whichever
 * instance writes: the database's. The statement's time, not the transaction's: an upsert that
 * waited for a racing insert of its natural key updates after that insert, though its transaction
 * may have begun before it, and `updated_at` must not come before `created_at`. To the
 * millisecond, the precision of the API and of list cursors.
 */
export const WRITE_INSTANT = `date_trunc('milliseconds', statement_timestamp())`;
