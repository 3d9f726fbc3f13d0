/**
 * A small connection pool for the service's own bookkeeping of events: the outbox relay and
 * the webhook delivery records. Its sessions run with synchronous_commit=off: a commit returns
 * before its WAL reaches disk, so a database crash can lose the last fraction of a second of
 * these commits. That loses no event and no delivery, only the record of progress: an event
 * whose dispatch was lost is relayed again, an attempt whose outcome was lost is made again,
 * which at-least-once delivery (SPEC 6.3) allows. In exchange, a delivery costs no disk flush
 * (`npm run bench:webhooks`, docs/events.md). Client changes never go through this pool.
 *
 * Its queries take the first rows of queue-like partial indexes (undispatched events, due
 * deliveries) whose entries die fast. Bitmap scans are off for its sessions: an ordered index
 * scan marks the dead entries it passes, so the next pass skips them, where a bitmap scan
 * visits every one of their heap pages again until vacuum (5 ms against 0.03 ms per pass after
 * a few thousand events, measured in docs/events.md).
 *
 * Two pools, so that later attempts cannot hold up first ones. `query` (POOL_SIZE) serves the
 * relay and first attempts: the claim and its publish lock, the fan-out's plan, and the records
 * of first attempts. `later` (LATER_POOL_SIZE) serves everything a retry does: its claim, its
 * re-check, its record, and the sweeper's passes. Sharing one pool of 4, 20 webhooks whose
 * receivers answered 500 (retries 2 s apart) put their claims and records in the queue ahead of
 * the relay's and the healthy webhook's: its first attempts went out 2.6 s (p50) after the write
 * instead of 0.24 s, its rows lagged further, and with thousands of retries due the queue's
 * 5 s connect timeout failed attempts by the thousand. A retry that cannot get a connection
 * waits for its pool alone.
 */
import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { Pool } from 'pg';
import { AppConfig } from '../config/app-config';
import { poolGuards } from './pg-guards';

type Sql = <T = any>(text: string, params?: unknown[]) => Promise<T[]>; // eslint-disable-line @typescript-eslint/no-explicit-any

const POOL_SIZE = 4;
/**
 * Later attempts' connections (retries, the sweeper, admins' retries): all they may hold, however
 * many are due. As many as the first attempts': with 2, retries of 20 failing webhooks went at
 * about two thirds of the pace they had with the one shared pool of 4 (one run, a loaded machine).
 */
export const LATER_POOL_SIZE = 4;
/** How the two pools name their sessions (pg_stat_activity.application_name). */
export const BOOKKEEPING_APP = { first: 'svc-bookkeeping', later: 'svc-bookkeeping-later' } as const;

@Injectable()
export class BookkeepingDb implements OnApplicationShutdown {
  private readonly pool: Pool;
  private readonly laterPool: Pool;

  constructor(config: AppConfig) {
    const open = (max: number, application_name: string) => {
      const pool = new Pool({
        connectionString: config.DATABASE_URL,
        max,
        application_name,
        connectionTimeoutMillis: 5000,
        options: '-c synchronous_commit=off -c enable_bitmapscan=off',
        ...poolGuards(config.DATABASE_STATEMENT_TIMEOUT_MS),
      });
      pool.on('error', () => undefined); // an idle connection's failure; the next checkout reconnects
      return pool;
    };
    this.pool = open(POOL_SIZE, BOOKKEEPING_APP.first);
    this.laterPool = open(LATER_POOL_SIZE, BOOKKEEPING_APP.later);
  }

  /** The relay's and first attempts' statements. */
  query: Sql = async (text, params) => (await this.pool.query(text, params)).rows;

  /** Later attempts' statements (retries, the sweeper, admins' retries): never on `query`'s connections. */
  later: Sql = async (text, params) => (await this.laterPool.query(text, params)).rows;

  /**
   * Runs `work` holding a transaction-level advisory lock on a connection of its own, so that
   * what `work` writes through `query` commits (on other connections) while the lock is held.
   */
  async underLock<T>(lockId: number, work: () => Promise<T>): Promise<T> {
    if (!Number.isSafeInteger(lockId)) throw new Error(`not a lock id: ${lockId}`);
    const client = await this.pool.connect();
    // A checked-out client's connection can fail while `work` runs (a restarted server): pg
    // reports it as an 'error' event, which must not go unheard, and the client is not reused.
    let failed: Error | undefined;
    const onError = (err: Error) => (failed = err);
    client.on('error', onError);
    try {
      // One round trip: on a busy machine each one can wait for a core.
      await client.query(`BEGIN; SELECT pg_advisory_xact_lock(${lockId})`).catch((err: Error) => {
        throw (failed = err);
      });
      return await work();
    } finally {
      // Ending the transaction releases the lock. Not waited for: the connection runs its
      // statements in order, so the next user of it (or of the lock) comes after.
      if (!failed) client.query('ROLLBACK').catch(() => undefined);
      client.removeListener('error', onError);
      client.release(failed);
    }
  }

  /** After the HTTP server has closed and the relay and dispatcher have stopped (their beforeApplicationShutdown). */
  async onApplicationShutdown(): Promise<void> {
    await Promise.all([this.pool.end(), this.laterPool.end()]);
  }
}
