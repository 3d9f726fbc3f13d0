/**
 * Runs the search engine's statements (search.sql.ts) prepared and generically planned, on a
 * connection pool of its own.
 *
 * Parsing and planning a search statement cost PostgreSQL about as much as executing it for a
 * query of a few hundred matches (0.5-0.8 ms of planning alone). A statement shape is
 * therefore prepared once per connection, under a name derived from its text, and its
 * sessions run with plan_cache_mode=force_generic_plan: the statements are written for their
 * generic plan (every query-derived value is an InitPlan, see search-query.ts), while the
 * default mode would keep planning them anew, because an unknown LIMIT makes the generic
 * plan's estimate slightly dearer than a custom one's. The setting stays on this pool: on the
 * service's main pool it would apply to every parameterised statement, which are not written
 * for it.
 *
 * Prepared statements live in each server session, so the shapes that get a name are
 * bounded (filters with many edge clauses make many shapes); any other statement runs
 * unnamed, still generically planned, only parsed and planned each time.
 */
import type { OnApplicationShutdown } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { Pool, QueryConfig } from 'pg';
import { poolGuards } from '../database/pg-guards';
import type { Statement } from './search.sql';

/** Statement shapes prepared per connection at most. */
const MAX_PREPARED = 32;

export class SearchStatements implements OnApplicationShutdown {
  private readonly pool: Pool;
  private readonly names = new Map<string, string>();

  /**
   * `max`: the pool's size (SEARCH_DB_POOL_SIZE). Searches are CPU-bound in PostgreSQL, and
   * beyond its cores more at once only share them: every search in flight then takes as long
   * as the slowest, while a short queue here serves them in turn (README, "Searches queue in
   * the service", has the measurements).
   */
  constructor(databaseUrl: string, max: number, statementTimeoutMs = 0) {
    this.pool = new Pool({
      connectionString: databaseUrl,
      max,
      connectionTimeoutMillis: 5000,
      // Named, so that pg_stat_activity tells the searches apart from the rest.
      application_name: 'svc-search',
      options: '-c plan_cache_mode=force_generic_plan',
      ...poolGuards(statementTimeoutMs),
    });
    // An idle connection's failure (a restarted server): the pool drops it and the next search reconnects.
    this.pool.on('error', () => undefined);
  }

  async query<T>(s: Statement): Promise<T[]> {
    const config: QueryConfig = { text: s.sql, values: s.params };
    const name = this.nameOf(s.sql);
    if (name !== undefined) config.name = name;
    return (await this.pool.query(config)).rows as T[];
  }

  end(): Promise<void> {
    return this.pool.end();
  }

  /** After the HTTP server has closed: searches in flight finish first. */
  onApplicationShutdown(): Promise<void> {
    return this.end();
  }

  private nameOf(sql: string): string | undefined {
    let name = this.names.get(sql);
    if (name === undefined && this.names.size < MAX_PREPARED) {
      name = `search_${createHash('sha256').update(sql).digest('hex').slice(0, 32)}`;
      this.names.set(sql, name);
    }
    return name;
  }
}
