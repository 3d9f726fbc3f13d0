/**
 * A small connection pool for the service's own bookkeeping of events: the outbox relay and
 * the webhook delivery records. Its sessions run with synchronous_commit=off: a commit returns
 * before its WAL reaches disk, so a database crash can lose the last fraction of a second of
 * these commits. That loses no event and no delivery, only the record of progress: an event
 * whose dispatch was lost is relayed again, an attempt whose outcome was lost is made again,
 * which at-least-once delivery (SPEC 6.3) allows. In exchange, a delivery costs no disk flush
 * (`npm run bench:webhooks`, docs/events.md). Client changes never go through this pool.
 */
import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { Pool, PoolClient } from 'pg';
import { AppConfig } from '../config/app-config';

export type Sql = <T = any>(text: string, params?: unknown[]) => Promise<T[]>; // eslint-disable-line @typescript-eslint/no-explicit-any

const POOL_SIZE = 4;

@Injectable()
export class BookkeepingDb implements OnModuleDestroy {
  private readonly pool: Pool;

  constructor(config: AppConfig) {
    this.pool = new Pool({ connectionString: config.DATABASE_URL, max: POOL_SIZE, options: '-c synchronous_commit=off' });
    this.pool.on('error', () => undefined); // an idle connection's failure; the next checkout reconnects
  }

  query: Sql = async (text, params) => (await this.pool.query(text, params)).rows;

  async transaction<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    const client: PoolClient = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(async (text, params) => (await client.query(text, params)).rows);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async onModuleDestroy(): Promise<void> {
    await this.pool.end();
  }
}
