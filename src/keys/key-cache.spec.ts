import type { Principal } from '../auth/principal';
import { AppConfig } from '../config/app-config';
import type { RedisPubSub } from '../redis/redis.module';
import { KeyCache } from './key-cache';

/** An in-memory stand-in for Redis pub/sub: publishing reaches every subscribed cache. */
class FakePubSub {
  private readonly handlers: Array<(m: string) => void> = [];
  async subscribe(_channel: string, handler: (m: string) => void): Promise<void> {
    this.handlers.push(handler);
  }
  async publish(_channel: string, message: string): Promise<void> {
    for (const h of this.handlers) h(message);
  }
}

const principal = { tenantId: 't', credentialId: 'k', role: 'admin' } as Principal;

async function makeCaches(ttlSeconds = 60): Promise<[KeyCache, KeyCache]> {
  const config = Object.assign(new AppConfig(), { KEY_CACHE_TTL_SECONDS: ttlSeconds });
  const bus = new FakePubSub() as unknown as RedisPubSub;
  const a = new KeyCache(config, bus);
  const b = new KeyCache(config, bus);
  await a.onModuleInit();
  await b.onModuleInit();
  return [a, b];
}

describe('KeyCache', () => {
  it('caches and invalidates on every instance', async () => {
    const [a, b] = await makeCaches();
    a.set('h1', principal);
    b.set('h1', principal);
    expect(a.get('h1')).toBe(principal);
    expect(b.get('h1')).toBe(principal);
    await a.invalidate('h1');
    expect(a.get('h1')).toBeUndefined();
    expect(b.get('h1')).toBeUndefined();
  });

  it('caches negative results (revoked keys) as null', async () => {
    const [a] = await makeCaches();
    a.set('h1', null);
    expect(a.get('h1')).toBeNull();
  });

  it('does not cache a row read before an invalidation that arrived while it was read', async () => {
    const [a, b] = await makeCaches();
    const epochA = a.epoch;
    const epochB = b.epoch;
    // ... the SELECT is in flight on both instances when the key is revoked ...
    await a.invalidate('h1');
    a.set('h1', principal, epochA);
    b.set('h1', principal, epochB);
    expect(a.get('h1')).toBeUndefined();
    expect(b.get('h1')).toBeUndefined();
    // A read that starts afterwards is cached again.
    a.set('h1', null, a.epoch);
    expect(a.get('h1')).toBeNull();
  });

  it('caches nothing with a TTL of 0', async () => {
    const [a] = await makeCaches(0);
    a.set('h1', principal);
    expect(a.get('h1')).toBeUndefined();
  });
});
