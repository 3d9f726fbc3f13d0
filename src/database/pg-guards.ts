/**
 * What every PostgreSQL pool of the service sets against network faults (the TypeORM pool, the
 * search pool, the bookkeeping pool):
 * - statement_timeout (DATABASE_STATEMENT_TIMEOUT_MS), enforced by the server;
 * - TCP keepalive, so an idle connection whose server vanished is found out and replaced;
 * - a client-side read timeout a little past the statement timeout. The server cannot end a
 *   statement it never received: a query that hears nothing back for longer than any statement
 *   may run is talking to a server that is gone or hung. Its connection is cut
 *   (`GuardedClient`), so the pool replaces it instead of handing it, still waiting on that
 *   query, to the next caller; measured with a proxy that stops forwarding, every request
 *   otherwise failed until the stuck sockets were reset.
 * - idle_in_transaction_session_timeout, twice the statement timeout: PostgreSQL ends the
 *   session of a transaction left open by a process that froze (a VM pause, SIGSTOP, a long GC
 *   pause) or was cut off, which otherwise keeps its row and advisory locks until the process
 *   comes back, if ever, and stalls everyone waiting on them (a bulk job taken over from it).
 *   No transaction of the service waits on anything slow: HTTP, Redis and password hashing
 *   happen outside them, and the longest idle stretch is the event relay's publish-lock
 *   session, idle while a claim, the fan-out's plan and a publication bounded at 2 s run.
 * With no statement timeout (0) there is no read timeout or idle timeout either: a statement
 * may then run for as long as it likes.
 */
import { Client, ClientConfig } from 'pg';

/** Time beyond the statement timeout for the server's own cancellation to reach the client. */
const READ_MARGIN_MS = 5000;

export interface PoolGuards {
  Client: typeof GuardedClient;
  statement_timeout?: number;
  query_timeout?: number;
  idle_in_transaction_session_timeout?: number;
  keepAlive: true;
  keepAliveInitialDelayMillis: number;
}

/** The pool options above, to spread into any pool's (pg's or TypeORM's `extra`). */
export function poolGuards(statementTimeoutMs: number): PoolGuards {
  return {
    Client: GuardedClient,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    ...(statementTimeoutMs > 0
      ? {
          statement_timeout: statementTimeoutMs,
          query_timeout: statementTimeoutMs + READ_MARGIN_MS,
          idle_in_transaction_session_timeout: idleInTransactionMs(statementTimeoutMs),
        }
      : {}),
  };
}

/** How long a session may sit idle inside a transaction before PostgreSQL ends it (0: no limit). */
export const idleInTransactionMs = (statementTimeoutMs: number): number => 2 * statementTimeoutMs;

/** pg's message for a query past `query_timeout` (pg/lib/client.js). */
const READ_TIMEOUT = 'Query read timeout';

/**
 * A pg client that cuts its connection when a query runs past `query_timeout`. pg answers the
 * caller with an error but keeps the connection waiting for that query's reply, and a pool
 * caller that releases it without the error (TypeORM does) would hand it on in that state.
 * `pool.query()` releases with the error, which the pool takes as "discard": the search and
 * bookkeeping pools need no more than that, but the same class does no harm there.
 */
export class GuardedClient extends Client {
  constructor(config?: string | ClientConfig) {
    super(config);
    // A connection's failure is an 'error' event, which kills the process if nobody listens.
    // The pool listens while the client is idle and its user once it has the client, but a
    // user that gets it through a promise (BookkeepingDb.underLock, TypeORM's query runners)
    // attaches its listener a microtask after the pool removed its own: a server's FATAL that
    // came in the same packet as the last reply fell in between (an audit terminating sessions
    // under load crashed an instance 5 times in 6). The failure is not lost: the client is no
    // longer queryable, so its next query fails and its release discards it.
    this.on('error', () => undefined);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  query(...args: any[]): any {
    const result = (super.query as (...a: unknown[]) => unknown)(...args);
    if (result instanceof Promise) result.catch((err: unknown) => this.cutAfter(err));
    return result;
  }

  private cutAfter(err: unknown): void {
    if ((err as Error)?.message !== READ_TIMEOUT) return;
    (this as unknown as { connection: { stream: { destroy(err?: Error): void } } }).connection.stream.destroy(err as Error);
  }
}
