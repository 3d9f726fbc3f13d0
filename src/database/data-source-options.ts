/** Owns how the service talks to PostgreSQL: connection options, migrations, database creation. */
import { setTimeout as delay } from 'node:timers/promises';
import pg, { Client } from 'pg';
import { DataSource, DataSourceOptions, MigrationExecutor } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { ClaimAppliedSubscriber } from '../idempotency/claim-applied';
import { entities } from './entities';
import { migrations } from './migrations';
import { poolGuards } from './pg-guards';
import { StartupError, redactUrl } from '../common/startup-error';
import { TenantSharedPool } from './tenant-shared-pool';

/**
 * Connections of the main pool. One tenant's requests hold all but KEPT_FOR_OTHER_TENANTS of
 * them at most (tenant-shared-pool.ts), so that another tenant's request always finds one.
 */
export const POOL_SIZE = 20;

/** pg, whose Pool TypeORM creates is the one with a share per tenant. */
const sharedPg = Object.create(pg, { Pool: { value: TenantSharedPool } }) as typeof pg;

export function dataSourceOptions(config: AppConfig): DataSourceOptions {
  return {
    type: 'postgres',
    url: config.DATABASE_URL,
    entities,
    migrations,
    subscribers: [ClaimAppliedSubscriber],
    // Migrations are run by runMigrations() below, under a lock, never by TypeORM at connect.
    migrationsRun: false,
    migrationsTransactionMode: 'each',
    synchronize: false,
    logging: false,
    driver: sharedPg,
    // A statement past the timeout is cancelled by PostgreSQL: a runaway query cannot hold a
    // backend (and a pool connection) after its caller has long gone; a server that stopped
    // answering loses the connection (pg-guards.ts).
    extra: { max: POOL_SIZE, connectionTimeoutMillis: 5000, ...poolGuards(config.DATABASE_STATEMENT_TIMEOUT_MS) },
  };
}

/**
 * The connection migrations run and revert on, at start-up (runMigrations) and through the
 * `typeorm` CLI (ormconfig.ts): without the pool guards' statement, read and idle-in-transaction
 * limits, which are sized for a request's statements. A migration rewriting a large table may
 * run for minutes, and one cancelled part-way is rolled back whole, to fail the same way at the
 * next try.
 */
export function migrationDataSourceOptions(config: AppConfig): DataSourceOptions {
  return { ...dataSourceOptions(config), extra: { max: 2 } };
}

/** Creates the database named in the URL when it does not exist yet. */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  url.pathname = '/postgres';
  const client = new Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (err) {
    const code = (err as { code?: string }).code;
    const reason = `${(err as Error).message || code}`;
    // SQLSTATE class 28: the server answered and refused the role or its password.
    if (code?.startsWith('28')) throw new StartupError(`PostgreSQL at ${redactUrl(databaseUrl)} refused the connection (${reason}); set DATABASE_URL's user and password`);
    throw new StartupError(`cannot reach PostgreSQL at ${redactUrl(databaseUrl)} (${reason}); start it (pg_ctlcluster <version> main start) or set DATABASE_URL`);
  }
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) {
      await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
        // Created by a concurrent starter: duplicate_database, or, when both CREATEs ran at
        // once, the unique index of pg_database (unique_violation).
        if (err.code !== '42P04' && err.code !== '23505') throw err;
      });
    }
  } finally {
    await client.end();
  }
}

const MIGRATION_LOCK = 727_002;
/** How often a runner that found the migration lock taken tries again. */
const MIGRATION_LOCK_RETRY_MS = 200;

/**
 * The DataSource migrations run and revert on, at start-up and through the `typeorm` CLI
 * (ormconfig.ts): both hold one session advisory lock, so instances starting together, or a
 * CLI run beside them, apply each migration once (TypeORM itself does not lock its migrations
 * table, and a migration building an index CONCURRENTLY runs outside any transaction).
 */
export class MigrationDataSource extends DataSource {
  override runMigrations(options?: Parameters<DataSource['runMigrations']>[0]): ReturnType<DataSource['runMigrations']> {
    return this.locked(() => super.runMigrations(options));
  }

  override undoLastMigration(options?: Parameters<DataSource['undoLastMigration']>[0]): Promise<void> {
    return this.locked(() => super.undoLastMigration(options));
  }

  /**
   * Tries for the lock rather than waiting in `pg_advisory_lock`: a statement waiting there
   * holds a snapshot, which CREATE INDEX CONCURRENTLY in the holder's migration waits out, so
   * two runners starting together on a database owing such a migration waited for each other
   * for good (PostgreSQL sees no deadlock: the lock and the build are on different connections
   * of the holder). Between tries the waiting connection is idle, outside any transaction.
   */
  private async locked<T>(work: () => Promise<T>): Promise<T> {
    const lock = this.createQueryRunner();
    try {
      await lock.connect();
      while (!(await lock.query('SELECT pg_try_advisory_lock($1) AS taken', [MIGRATION_LOCK]))[0].taken) {
        await delay(MIGRATION_LOCK_RETRY_MS);
      }
      return await work();
    } finally {
      await lock.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
      await lock.release();
    }
  }
}

/** Applies pending migrations, each in its own transaction, under the migration lock. */
export async function runMigrations(config: AppConfig): Promise<void> {
  const ds = new MigrationDataSource(migrationDataSourceOptions(config));
  await ds.initialize();
  try {
    await ds.runMigrations({ transaction: 'each' });
  } finally {
    await ds.destroy();
  }
}

/**
 * With MIGRATIONS_RUN=false, refuses to start on a database that lacks migrations this code
 * needs: the service would otherwise answer /health 200 and then 500 on every request
 * (missing tables), and its background tasks would log an error every second. Read-only: the
 * migrations table is not created when missing (then every migration is pending).
 */
export async function requireMigrated(config: AppConfig): Promise<void> {
  const ds = new DataSource({ ...dataSourceOptions(config), extra: { max: 1 } });
  await ds.initialize();
  let pending: number;
  try {
    pending = (await new MigrationExecutor(ds).getPendingMigrations()).length;
  } finally {
    await ds.destroy();
  }
  if (pending === 0) return;
  const what = pending === 1 ? '1 migration is' : `${pending} migrations are`;
  throw new StartupError(
    `${what} pending in ${redactUrl(config.DATABASE_URL)} and MIGRATIONS_RUN=false; ` +
      `run them (npm run migration:run, or in the Docker image npx typeorm -d dist/ormconfig.js migration:run) or start with MIGRATIONS_RUN=true`,
  );
}
