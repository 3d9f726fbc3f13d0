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
import { GENERATION_WINDOW_MS, KeyCache, MAX_BYTES, SWEEP_INTERVAL_MS } from './key-cache';

const principal = { tenantId: 't', credentialId: 'k', role: 'admin' } as Principal;
/** A member key with the largest permission maps a key may have: 3 × 200 patterns of about 190 characters. */
const fullMaps = (() => {
  const map = (tag: string) => Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`${tag}${i}.${'a'.repeat(180)}.*`, 'read' as const]));
  return { ...principal, role: 'member', typePerms: map('t'), extensionPerms: map('x'), edgePerms: map('e') } as Principal;
})();
/** Only the sweep's setInterval is faked: Redis commands and the caches' waits keep real timers. */
const fakeInterval = () =>
  jest.useFakeTimers({
    doNotFake: ['Date', 'hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setTimeout', 'clearTimeout'],
  });
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
    jest.useRealTimers();
    a.onModuleDestroy();
    b.onModuleDestroy();
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

  describe('memory', () => {
    let now: number;
    beforeEach(() => {
      now = 1000;
      a.now = () => now;
    });

    it('drops entries past KEY_CACHE_TTL_SECONDS within a sweep, though they are never looked up again', () => {
      fakeInterval();
      a.set('h1', fullMaps, 'g');
      a.set('h2', null, 'g');
      expect(a.held().entries).toBe(2);
      now += 60_000;
      jest.advanceTimersByTime(SWEEP_INTERVAL_MS);
      expect(a.held().entries).toBe(2); // not yet past the TTL
      now += 1;
      jest.advanceTimersByTime(SWEEP_INTERVAL_MS);
      expect(a.held()).toEqual({ entries: 0, bytes: 0 });
    });

    it('drops an entry at the end of its maxAgeMs (a token that expires), not only at the TTL', () => {
      fakeInterval();
      a.set('h1', principal, 'g');
      a.set('h2', principal, 'g', 5_000);
      now += 5_001;
      jest.advanceTimersByTime(SWEEP_INTERVAL_MS);
      expect(a.held().entries).toBe(1);
      expect(a.get('h1', 'g')).toBe(principal);
    });

    it('drops every entry of an older generation once a newer one is read', async () => {
      fakeInterval();
      const g = await a.generation();
      a.set('h1', fullMaps, g);
      a.set('h2', principal, g);
      await b.invalidate(); // another key changed: neither entry can be served again
      now += GENERATION_WINDOW_MS + 1;
      const moved = await a.generation();
      expect(moved).not.toBe(g);
      jest.advanceTimersByTime(SWEEP_INTERVAL_MS);
      expect(a.held()).toEqual({ entries: 0, bytes: 0 });
      a.set('h3', principal, moved);
      expect(a.get('h3', moved)).toBe(principal);
    });

    it('a set drops the dead entries at the old end before adding its own', () => {
      a.set('h1', fullMaps, 'g');
      now += 60_001;
      a.set('h2', principal, 'g');
      expect(a.held().entries).toBe(1);
    });

    it('holds at most MAX_BYTES, estimated from the permission maps, dropping the oldest entries first', () => {
      const count = 1000; // about 160 MB were each counted in full
      for (let i = 0; i < count; i++) a.set(`h${i}`, fullMaps, 'g');
      const { entries, bytes } = a.held();
      expect(bytes).toBeLessThanOrEqual(MAX_BYTES);
      expect(bytes).toBeGreaterThan(MAX_BYTES - bytes / entries);
      expect(bytes / entries).toBeGreaterThan(150_000); // what V8 holds for such a principal (about 160 KB)
      expect(a.get('h0', 'g')).toBeUndefined();
      expect(a.get(`h${count - 1}`, 'g')).toBe(fullMaps);
      expect(a.get(`h${count - entries}`, 'g')).toBe(fullMaps);
    });

    it('setting a cached key again replaces its entry and its byte count', () => {
      a.set('h1', fullMaps, 'g');
      const once = a.held();
      a.set('h1', fullMaps, 'g');
      expect(a.held()).toEqual(once);
      a.set('h1', null, 'g');
      expect(a.held().bytes).toBeLessThan(once.bytes / 10);
    });
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
