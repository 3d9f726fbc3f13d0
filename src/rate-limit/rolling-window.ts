/**
 * The rolling window of SPEC 8.1: a bucket lets a request through while fewer than its limit
 * passed in the last WINDOW_MS. Each bucket is a sorted set in Redis of the requests it let
 * through, scored by Redis's own clock, so that instances agree whatever their clocks say; one
 * script prunes, counts and adds, so concurrent requests on every instance count exactly. A
 * refused request is not added: a caller that keeps knocking is not kept out longer.
 *
 * A fixed window would let a caller send its limit at the end of one minute and again at the
 * start of the next: twice the limit within a few seconds. The sign-in throttle counts failed
 * sign-ins in windows of its own length by the same script (sign-in-throttle.ts).
 */
import type Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { OptionalRedis } from '../redis/redis.module';

export const WINDOW_MS = 60_000;

/**
 * KEYS: the windows; ARGV: their length, the member a request is added as, then each window's
 * limit. The request is added to every window or to none, so that one counted under several (the
 * sign-in throttle's) is refused by any of them without being counted in the others. Answers
 * whether it was, Redis's time, then for each window the requests it holds and when the one
 * whose leaving lets the next request through came: the oldest, unless a limit was lowered.
 */
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local counts = {}
local allowed = 1
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  counts[i] = redis.call('ZCARD', key)
  if counts[i] >= tonumber(ARGV[i + 2]) then allowed = 0 end
end
local answer = {allowed, now}
for i, key in ipairs(KEYS) do
  if allowed == 1 then
    redis.call('ZADD', key, now, ARGV[2])
    counts[i] = counts[i] + 1
  end
  redis.call('PEXPIRE', key, window)
  local at = math.max(0, counts[i] - tonumber(ARGV[i + 2]))
  local freeing = redis.call('ZRANGE', key, at, at, 'WITHSCORES')[2]
  table.insert(answer, counts[i])
  table.insert(answer, tonumber(freeing or now))
end
return answer
`;

export interface WindowState {
  allowed: boolean;
  /** Requests the bucket holds in its window, this one included when it was let through. */
  count: number;
  /** Milliseconds until the oldest of them leaves the window, freeing a place. */
  msBeforeNext: number;
}

/** A window's answer, and what gives back the place it gave (nothing when it refused). */
export type Place = WindowState & { giveBack(): Promise<void> };

/** A place taken in windows, or refused by any of them. */
export interface Taken {
  allowed: boolean;
  /** Each window's state, in the order they were asked for. */
  windows: Array<{ count: number; msBeforeNext: number }>;
  /** What the request was added as in each window, when it was let through. */
  member: string;
}

type WithTake = Redis & { svcTakeFromWindows(numKeys: number, ...args: Array<string | number>): Promise<number[]> };

/**
 * The script as a command of the client, which runs it by its hash (EVALSHA; the text goes to
 * Redis only when Redis does not know it yet): every request runs it.
 */
function withTake(redis: Redis): WithTake {
  if (!('svcTakeFromWindows' in redis)) redis.defineCommand('svcTakeFromWindows', { lua: TAKE });
  return redis as WithTake;
}

/** Takes a place in each of `windows` (full Redis keys, with their limits) of `windowMs`: in all of them, if each has one free, or in none. */
export async function takeFromWindows(redis: Redis, windows: Array<{ key: string; limit: number }>, windowMs: number): Promise<Taken> {
  const member = randomBytes(9).toString('base64url');
  const keys = windows.map((w) => w.key);
  const [allowed, now, ...states] = await withTake(redis).svcTakeFromWindows(keys.length, ...keys, windowMs, member, ...windows.map((w) => w.limit));
  return {
    allowed: allowed === 1,
    windows: windows.map((_, i) => ({ count: states[2 * i], msBeforeNext: Math.max(0, states[2 * i + 1] + windowMs - now) })),
    member,
  };
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
  async take(key: string, limit: number): Promise<Place> {
    const redisKey = `${this.redisPrefix}rlw:${key}`;
    const taken = await this.optional.ask((redis) => takeFromWindows(redis, [{ key: redisKey, limit }], WINDOW_MS));
    if (taken) {
      const giveBack = async () => {
        if (taken.allowed) await this.optional.ask((redis) => redis.zrem(redisKey, taken.member));
      };
      return { allowed: taken.allowed, ...taken.windows[0], giveBack };
    }
    let fallback = this.fallbacks.get(limit);
    if (!fallback) this.fallbacks.set(limit, (fallback = new RateLimiterMemory({ points: limit, duration: WINDOW_MS / 1000 })));
    try {
      const res = await fallback.consume(key);
      return { allowed: true, count: res.consumedPoints, msBeforeNext: res.msBeforeNext, giveBack: async () => void (await fallback.reward(key)) };
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      return { allowed: false, count: limit, msBeforeNext: rejection.msBeforeNext, giveBack: async () => undefined };
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
