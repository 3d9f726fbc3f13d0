/**
 * The main pool (TypeORM's), of which one tenant holds at most a share at once on an instance.
 *
 * The pool is shared by every tenant, and a tenant's requests can be made slow (an audit's 20
 * concurrent 0.9 s edge filters from one admin key): they held all 20 connections, and another
 * tenant's `GET /items?limit=10` waited 5 s for one and failed 503, or took 0.6-4.5 s instead
 * of 4-8 ms. So the requests of one tenant (its request context, src/common/tenant-context.ts)
 * hold at most the pool size less KEPT_FOR_OTHER_TENANTS connections; the rest wait their turn,
 * in order, as long as the pool's own connection timeout, and are then refused as a full pool's
 * are (503). Another tenant's request always finds those connections in turn; a lone tenant
 * still has nearly the whole pool. Work outside a request (background tasks, the credential
 * check) has no tenant and takes connections as before, as does the search pool, which has a
 * share of its own (src/search/search-statements.ts).
 *
 * The share counts requests, not connections: a request's first checkout waits for its
 * tenant's turn, and those it makes while it still holds one (a query beside its open
 * transaction) join that turn. Counting each connection would deadlock a tenant whose share is
 * all held by requests that each wait for a second connection, until the wait timed out; the
 * cost is that such requests may take a little more than the share for a moment.
 */
import { Pool, PoolClient, PoolConfig } from 'pg';
import { KeyedLimiter } from '../common/keyed-limiter';
import { requestTenant, RequestTenant } from '../common/tenant-context';

/** Connections of the main pool that one tenant's requests never hold all of: another tenant's request finds these. */
export const KEPT_FOR_OTHER_TENANTS = 4;

/** pg-pool's own message for a wait for a connection that ran out: answered 503 like it (common/unavailable.ts). */
const TIMEOUT_MESSAGE = 'timeout exceeded when trying to connect';

type Release = (err?: Error | boolean) => void;
type Callback = (err: Error | undefined, client: PoolClient | undefined, release: Release) => void;

/** A request's connections held or asked for, and its turn among its tenant's requests. */
interface Checkouts {
  count: number;
  turn?: Promise<() => void>;
}

export class TenantSharedPool extends Pool {
  private readonly tenants: KeyedLimiter;
  private readonly requests = new WeakMap<RequestTenant, Checkouts>();
  private readonly maxWaitMs: number | undefined;

  constructor(config: PoolConfig = {}) {
    super(config);
    this.tenants = new KeyedLimiter(tenantShare(config.max ?? 10));
    this.maxWaitMs = config.connectionTimeoutMillis || undefined;
  }

  /** Requests of `tenantId` waiting for their turn at a connection. */
  waiting(tenantId: string): number {
    return this.tenants.waiting(tenantId);
  }

  // Both of pg-pool's forms: TypeORM passes a callback, pool.query() too.
  connect(): Promise<PoolClient>;
  connect(callback: Callback): void;
  connect(callback?: Callback): Promise<PoolClient> | void {
    const request = requestTenant.getStore();
    if (!request) return callback ? super.connect(callback) : super.connect();
    const checkout = this.checkout(request);
    if (!callback) return checkout;
    checkout.then(
      (client) => callback(undefined, client, client.release),
      (err: Error) => callback(err, undefined, () => undefined),
    );
  }

  private async checkout(request: RequestTenant): Promise<PoolClient> {
    let held = this.requests.get(request);
    if (!held) this.requests.set(request, (held = { count: 0 }));
    held.count++;
    let client: PoolClient;
    try {
      held.turn ??= this.turn(request.tenantId);
      await held.turn;
      client = await super.connect();
    } catch (err) {
      this.checkedIn(held);
      throw err;
    }
    const release = client.release;
    let released = false;
    client.release = (err?: Error | boolean) => {
      if (!released) {
        released = true;
        this.checkedIn(held);
      }
      release(err); // throws on a second release, as pg-pool's does
    };
    return client;
  }

  /** Resolves, once the tenant has a free place, to the function that frees it. */
  private turn(tenantId: string): Promise<() => void> {
    return new Promise((granted, refused) => {
      this.tenants
        .run(tenantId, () => new Promise<void>((free) => granted(free)), this.maxWaitMs, () => new Error(TIMEOUT_MESSAGE))
        .catch(refused);
    });
  }

  private checkedIn(held: Checkouts): void {
    if (--held.count > 0) return;
    const turn = held.turn;
    held.turn = undefined;
    turn?.then(
      (free) => free(),
      () => undefined,
    );
  }
}

/** The connections one tenant's requests hold at most in a pool of `size`. */
export const tenantShare = (size: number): number => Math.max(1, size - KEPT_FOR_OTHER_TENANTS);
