/**
 * The rolling window of SPEC 8.1: a bucket lets a request through while fewer than its limit
 * passed in the last WINDOW_MS. Each bucket is a sorted set in Redis of the requests it let
 * through, scored by Redis's own clock, so that instances agree whatever their clocks say; one
 * script prunes, counts and adds, so concurrent requests on every instance count exactly. A
 * refused request is not added: a caller that keeps knocking is not kept out longer.
 *
 * A fixed window would let a caller send its limit at the end of one minute and again at the
 * start of the next: twice the limit within a few seconds.
 */
import type Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { OptionalRedis } from '../redis/redis.module';

export const WINDOW_MS = 60_000;

const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
local allowed = 0
if n < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  n = n + 1
  allowed = 1
end
redis.call('PEXPIRE', KEYS[1], window)
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
return {allowed, n, now, tonumber(oldest or now)}
`;

export interface WindowState {
  allowed: boolean;
  /** Requests the bucket holds in its window, this one included when it was let through. */
  count: number;
  /** Milliseconds until the oldest of them leaves the window, freeing a place. */
  msBeforeNext: number;
}

type WithTake = Redis & { svcTakeFromWindow(key: string, limit: number, windowMs: number, member: string): Promise<number[]> };

/**
 * The script as a command of the client, which runs it by its hash (EVALSHA; the text goes to
 * Redis only when Redis does not know it yet): every request runs it.
 */
function withTake(redis: Redis): WithTake {
  if (!('svcTakeFromWindow' in redis)) redis.defineCommand('svcTakeFromWindow', { numberOfKeys: 1, lua: TAKE });
  return redis as WithTake;
}

/** Takes a place in `key`'s window of `limit` requests, if one is free. */
export async function takeFromWindow(redis: Redis, key: string, limit: number): Promise<WindowState> {
  const member = randomBytes(9).toString('base64url');
  const [allowed, count, now, oldest] = await withTake(redis).svcTakeFromWindow(key, limit, WINDOW_MS, member);
  return { allowed: allowed === 1, count, msBeforeNext: Math.max(0, oldest + WINDOW_MS - now) };
}

/**
 * Windows in Redis, shared by every instance, counted in memory instead (a fixed window of the
 * same size, per instance) whenever Redis is not asked or does not answer (`OptionalRedis`; a
 * command run late once it answers again would count twice): neither everything let through nor
 * every request failed while Redis is away.
 */
export class RollingWindows {
  private readonly optional: OptionalRedis;
  private readonly fallbacks = new Map<number, RateLimiterMemory>();

  constructor(
    redis: Redis,
    private readonly redisPrefix: string,
  ) {
    this.optional = new OptionalRedis(redis);
  }

  /** A place in `key`'s window of `limit` requests, if one is free. */
  async take(key: string, limit: number): Promise<WindowState> {
    const state = await this.optional.ask((redis) => takeFromWindow(redis, `${this.redisPrefix}rlw:${key}`, limit));
    if (state) return state;
    let fallback = this.fallbacks.get(limit);
    if (!fallback) this.fallbacks.set(limit, (fallback = new RateLimiterMemory({ points: limit, duration: WINDOW_MS / 1000 })));
    try {
      const res = await fallback.consume(key);
      return { allowed: true, count: res.consumedPoints, msBeforeNext: res.msBeforeNext };
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      return { allowed: false, count: limit, msBeforeNext: rejection.msBeforeNext };
    }
  }
}

/** The X-RateLimit-* headers of a window's answer (SPEC 8.1). */
export function limitHeaders(limit: number, state: WindowState): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(limit),
    'X-RateLimit-Remaining': String(Math.max(0, limit - state.count)),
    // When the window next frees a place: the oldest request it holds leaves it.
    'X-RateLimit-Reset': String(Math.ceil((Date.now() + state.msBeforeNext) / 1000)),
  };
}
