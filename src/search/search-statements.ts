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
 *
 * The pool is shared by every tenant, and one search can be made to cost seconds (a long
 * phrase over long items): an audit's four 15 s phrase searches from one member key had another
 * tenant's searches wait 5 s for a connection and fail 503. So one tenant runs at most
 * SEARCH_DB_POOL_SIZE searches at once, and the pool holds one connection more, which another
 * tenant's search always finds in turn; a lone tenant still has the whole pool size.
 */
import type { OnApplicationShutdown } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { Pool, QueryConfig } from 'pg';
import { ApiError } from '../common/api-error';
import { KeyedLimiter } from '../common/keyed-limiter';
import { poolGuards } from '../database/pg-guards';
import type { Statement } from './search.sql';

/** Statement shapes prepared per connection at most. */
const MAX_PREPARED = 32;
/** Longest a search waits for a connection, or for its tenant's turn at one, before it is refused. */
const MAX_WAIT_MS = 5000;

export class SearchStatements implements OnApplicationShutdown {
  private readonly pool: Pool;
  private readonly names = new Map<string, string>();
  private readonly tenants: KeyedLimiter;

  /**
   * `perTenant`: the searches one tenant runs at once (SEARCH_DB_POOL_SIZE); the pool holds one
   * more. Searches are CPU-bound in PostgreSQL, and beyond its cores more at once only share
   * them: every search in flight then takes as long as the slowest, while a short queue here
   * serves them in turn (docs/search.md, "Searches queue in the service", has the measurements).
   */
  constructor(databaseUrl: string, private readonly perTenant: number, statementTimeoutMs = 0) {
    this.pool = new Pool({
      connectionString: databaseUrl,
      max: perTenant + 1,
      connectionTimeoutMillis: MAX_WAIT_MS,
      // Named, so that pg_stat_activity tells the searches apart from the rest.
      application_name: 'svc-search',
      options: '-c plan_cache_mode=force_generic_plan',
      ...poolGuards(statementTimeoutMs),
    });
    // An idle connection's failure (a restarted server): the pool drops it and the next search reconnects.
    this.pool.on('error', () => undefined);
    this.tenants = new KeyedLimiter(perTenant);
  }

  /**
   * Runs a statement of tenant `tenantId`'s search. One that waited MAX_WAIT_MS for its tenant's
   * turn is 429 `rate_limited` (its tenant is using its share); one that waited as long for a
   * connection, 503 (the pool is full).
   */
  async query<T>(tenantId: string, s: Statement): Promise<T[]> {
    const config: QueryConfig = { text: s.sql, values: s.params };
    const name = this.nameOf(s.sql);
    if (name !== undefined) config.name = name;
    return this.tenants.run(
      tenantId,
      async () => (await this.pool.query(config)).rows as T[],
      MAX_WAIT_MS,
      () =>
        new ApiError(429, 'rate_limited', `This tenant already runs ${this.perTenant} searches at once here; retry shortly`, {
          limit: this.perTenant,
          retry_after: 1,
        }),
    );
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
