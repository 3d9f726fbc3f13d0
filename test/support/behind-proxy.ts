/**
 * Apps whose PostgreSQL or Redis is behind a TcpProxy the tests control, for fault tests: the
 * proxy decides when the dependency is away (`cut`, `stall`, `restore`), and the shared servers
 * are never touched.
 */
import { PG_SERVER, REDIS_URL, startApp, TestApp, uniqueName } from './app';
import { TcpProxy } from './tcp-proxy';
import { waitFor } from './wait';

export interface BehindProxy {
  /** The app whose dependencies go through the proxies. */
  t: TestApp;
  /** Set when PostgreSQL is proxied. */
  pg: TcpProxy;
  /** Set when Redis is proxied. */
  redis: TcpProxy;
  /** Further instances of the same deployment (database and Redis prefix), their Redis not proxied. */
  others: TestApp[];
}

async function proxied(url: string, defaultPort: number): Promise<{ proxy: TcpProxy; url: URL }> {
  const via = new URL(url);
  const proxy = await new TcpProxy(via.hostname, Number(via.port || defaultPort)).start();
  via.port = String(proxy.port);
  return { proxy, url: via };
}

/** Waits until the app's Redis connection answers again (after a test took it away). */
export const redisUp = (t: TestApp) => waitFor(async () => (await t.http.get('/health')).body.checks?.redis === 'up', 'Redis connected');

/**
 * Inside a describe: starts, before its tests, an app whose `dependencies` go through proxies
 * (through PostgreSQL, a database of its own), with `env` on top of the test defaults, and one
 * more instance of the same deployment per entry of `others`; closes them all after the tests.
 */
export function appBehindProxy(dependencies: Array<'postgres' | 'redis'>, env: Record<string, string> = {}, others: Array<Record<string, string>> = []): BehindProxy {
  const ctx = { others: [] as TestApp[] } as BehindProxy;
  beforeAll(async () => {
    const overrides: Record<string, string> = {};
    if (dependencies.includes('postgres')) {
      const via = await proxied(PG_SERVER, 5432);
      via.url.pathname = `/${uniqueName('svc_behind')}`;
      ctx.pg = via.proxy;
      overrides.DATABASE_URL = via.url.toString();
      // The client's read timeout is the statement timeout + 5 s: a silent server is noticed soon.
      overrides.DATABASE_STATEMENT_TIMEOUT_MS = '1000';
    }
    if (dependencies.includes('redis')) {
      const via = await proxied(REDIS_URL, 6379);
      ctx.redis = via.proxy;
      overrides.REDIS_URL = via.url.toString();
    }
    ctx.t = await startApp({ ...overrides, ...env });
    for (const more of others) ctx.others.push(await startApp({ DATABASE_URL: ctx.t.databaseUrl, REDIS_PREFIX: ctx.t.config.REDIS_PREFIX, ...more }));
  });
  afterAll(async () => {
    for (const other of ctx.others) await other.app.close(); // the database and prefix are the first app's to drop
    // PostgreSQL away first: connections a test left silent would hold the pools' ending up.
    await ctx.pg?.stop();
    // Redis back on fresh connections, the app reconnected: a silent connection would hold the
    // client's quit, a lost one its reconnection timer.
    if (ctx.redis && ctx.t) {
      await ctx.redis.cut();
      await ctx.redis.restore();
      await redisUp(ctx.t);
    }
    await ctx.t?.close();
    await ctx.redis?.stop();
  });
  return ctx;
}
