/**
 * KeyCache against a real Redis (a key prefix of its own): two caches stand for two
 * instances of the service sharing one Redis.
 */
import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import type { Principal } from '../auth/principal';
import { AppConfig } from '../config/app-config';
import { REDIS_QUIET_MS } from '../redis/redis.module';
import { TcpProxy } from '../../test/support/tcp-proxy';
import { GENERATION_WINDOW_MS, KeyCache } from './key-cache';

const principal = { tenantId: 't', credentialId: 'k', role: 'admin' } as Principal;
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

describe('KeyCache', () => {
  let redis: Redis;
  let prefix: string;
  let a: KeyCache;
  let b: KeyCache;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    redis.setMaxListeners(0); // each test's caches watch the one connection
    await redis.ping(); // connected, as the service is before it serves (a cache does not wait on a Redis that is away)
  });
  afterAll(() => redis.disconnect());

  beforeEach(() => {
    prefix = `svct_${randomBytes(6).toString('hex')}:`;
    const config = Object.assign(new AppConfig(), { KEY_CACHE_TTL_SECONDS: 60, REDIS_PREFIX: prefix });
    a = new KeyCache(config, redis);
    b = new KeyCache(config, redis);
  });
  afterEach(async () => {
    await redis.del(`${prefix}keys:generation`);
  });

  it('serves a cached entry while the generation holds', async () => {
    const g = await a.generation();
    a.set('h1', principal, g);
    expect(a.get('h1', await a.generation())).toBe(principal);
  });

  it('caches revoked keys as null', async () => {
    const g = await a.generation();
    a.set('h1', null, g);
    expect(a.get('h1', await a.generation())).toBeNull();
  });

  it('an invalidation on one instance holds on the other at its very next lookup', async () => {
    // b's read of the counter is still within its window when the change is made: the change
    // is acknowledged only once that read may no longer be used.
    b.set('h1', principal, await b.generation());
    await a.invalidate('h1');
    expect(b.get('h1', await b.generation())).toBeUndefined();
  });

  it('never serves an entry again once the counter was lost (Redis flushed), however often it is bumped since', async () => {
    await b.invalidate();
    await b.invalidate();
    const g = await a.generation();
    a.set('h1', principal, g);
    await redis.del(`${prefix}keys:generation`);
    // The key is revoked, and other changes follow: as many bumps as it took to reach `g` before.
    for (let i = 0; i < 2; i++) await b.invalidate('h1');
    expect(a.get('h1', await a.generation())).toBeUndefined();
  });

  it('does not serve a row read under a generation that a change has since moved past', async () => {
    const before = await a.generation(); // the SELECT starts ...
    await b.invalidate('h1'); // ... a revocation commits elsewhere ...
    a.set('h1', principal, before); // ... and the stale row lands in the cache
    expect(a.get('h1', await a.generation())).toBeUndefined();
  });

  it('neither serves nor stores entries when the generation is unknown (Redis unavailable)', async () => {
    a.set('h1', principal, undefined);
    expect(a.get('h1', await a.generation())).toBeUndefined();
    a.set('h2', principal, await a.generation());
    expect(a.get('h2', undefined)).toBeUndefined();
  });

  it('caches nothing with a TTL of 0', async () => {
    const config = Object.assign(new AppConfig(), { KEY_CACHE_TTL_SECONDS: 0, REDIS_PREFIX: prefix });
    const c = new KeyCache(config, redis);
    const g = await c.generation();
    c.set('h1', principal, g);
    expect(c.get('h1', g)).toBeUndefined();
  });

  it('lookups share one read of the counter for GENERATION_WINDOW_MS, then read it again', async () => {
    let now = 1000;
    a.now = () => now;
    const read = jest.spyOn(redis, 'eval');
    try {
      const values = await Promise.all(Array.from({ length: 10 }, () => a.generation()));
      expect(read).toHaveBeenCalledTimes(1);
      now += GENERATION_WINDOW_MS;
      expect(await a.generation()).toBe(values[0]);
      expect(read).toHaveBeenCalledTimes(1);
      now += 1;
      await a.generation();
      expect(read).toHaveBeenCalledTimes(2);
    } finally {
      read.mockRestore();
    }
  });

  it('a Redis that went silent is waited for once, then not asked for REDIS_QUIET_MS', async () => {
    const url = new URL(REDIS_URL);
    const proxy = await new TcpProxy(url.hostname, Number(url.port || 6379)).start();
    const silent = new Redis({ host: url.hostname, port: proxy.port });
    try {
      await silent.ping();
      const config = Object.assign(new AppConfig(), { KEY_CACHE_TTL_SECONDS: 60, REDIS_PREFIX: prefix });
      const c = new KeyCache(config, silent);
      let now = 1000;
      c.now = () => now;
      const read = jest.spyOn(silent, 'eval');
      proxy.stall();
      expect(await c.generation()).toBeUndefined();
      expect(read).toHaveBeenCalledTimes(1);
      for (const step of [GENERATION_WINDOW_MS + 1, REDIS_QUIET_MS / 2]) {
        now += step;
        expect(await c.generation()).toBeUndefined();
      }
      expect(read).toHaveBeenCalledTimes(1);
      now += REDIS_QUIET_MS;
      await c.generation();
      expect(read).toHaveBeenCalledTimes(2);
    } finally {
      silent.disconnect();
      await proxy.stop();
    }
  });
});
