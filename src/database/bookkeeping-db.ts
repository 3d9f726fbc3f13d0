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
 */
import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { Pool } from 'pg';
import { AppConfig } from '../config/app-config';
import { poolGuards } from './pg-guards';

type Sql = <T = any>(text: string, params?: unknown[]) => Promise<T[]>; // eslint-disable-line @typescript-eslint/no-explicit-any

const POOL_SIZE = 4;

@Injectable()
export class BookkeepingDb implements OnApplicationShutdown {
  private readonly pool: Pool;

  constructor(config: AppConfig) {
    this.pool = new Pool({
      connectionString: config.DATABASE_URL,
      max: POOL_SIZE,
      connectionTimeoutMillis: 5000,
      options: '-c synchronous_commit=off -c enable_bitmapscan=off',
      ...poolGuards(config.DATABASE_STATEMENT_TIMEOUT_MS),
    });
    this.pool.on('error', () => undefined); // an idle connection's failure; the next checkout reconnects
  }

  query: Sql = async (text, params) => (await this.pool.query(text, params)).rows;

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
    await this.pool.end();
  }
}
