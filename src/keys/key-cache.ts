/**
 * In-process cache of resolved API keys, keyed by key hash, so the hot path does not hit the
 * database for credentials.
 *
 * A revocation or change must hold on every instance from the very next request, which
 * pub/sub cannot promise (its message races that request). So every key change bumps one
 * deployment-wide generation counter in Redis, and a cached entry counts only while the
 * generation it was read under is still the current one. An entry read while a change
 * committed carries the older generation and is dropped at the next lookup.
 *
 * Lookups share reads of the counter: a lookup may use a read sent at most
 * GENERATION_WINDOW_MS before it began, and a change, after bumping the counter, waits that
 * long (and a margin) before it is acknowledged. A request that arrives after the
 * acknowledgement therefore uses a read sent after the bump, on every instance, while a busy
 * instance reads the counter once per window rather than once per request (README,
 * "Scale-out notes"). Each instance compares its own monotonic clock with itself only, so
 * clock skew between machines does not matter.
 * When Redis cannot answer, nothing is served from or put into the cache; when it is back, the
 * cache starts empty (a change made meanwhile may not have bumped the counter). A change whose
 * bump Redis did not take is still answered (it is committed): this instance keeps bumping until
 * Redis takes it, so instances that never lost Redis drop their entries too.
 */
import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Principal } from '../auth/principal';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { onReconnect, OptionalRedis, REDIS } from '../redis/redis.module';

const MAX_ENTRIES = 10_000;
/** How old a read of the counter a lookup may use; key changes take this much longer. */
export const GENERATION_WINDOW_MS = 50;
/** Added to a change's wait, for timer granularity (the clocks' drift over 50 ms is far below it). */
const WAIT_MARGIN_MS = 5;
/** How long a change waits for its bump before answering anyway; then the bump is retried this often. */
const BUMP_TIMEOUT_MS = 1000;
const BUMP_RETRY_MS = 1000;

/** The Redis counters of credential changes: API keys, and OAuth tokens and grants. */
export const KEYS_GENERATION = 'keys:generation';
export const OAUTH_GENERATION = 'oauth:generation';

/**
 * A counter that never returns to a value it had. Were a lost counter (Redis flushed, the key
 * evicted) to start again at 0, the bumps after it would climb back through values that entries
 * were cached under before it was lost, and a key revoked in between would be served again. So a
 * missing counter starts at the time in milliseconds times 2^20: past any value of an earlier
 * start, unless that one saw more than a million bumps a millisecond.
 */
const READ_COUNTER = `local v = redis.call('GET', KEYS[1]) if v then return v end redis.call('SET', KEYS[1], ARGV[1]) return ARGV[1]`;
const BUMP_COUNTER = `if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1]) end return redis.call('INCR', KEYS[1])`;
const freshStart = () => String(BigInt(Date.now()) << 20n);

const bumpCounter = (redis: Redis, counter: string) => redis.eval(BUMP_COUNTER, 1, counter, freshStart());

/**
 * Bumps a generation counter and resolves once every lookup that begins afterwards, on any
 * instance, reads the new value (see the header).
 */
export async function bumpGeneration(redis: Redis, counter: string): Promise<void> {
  await bumpCounter(redis, counter);
  await sleep(GENERATION_WINDOW_MS + WAIT_MARGIN_MS);
}

@Injectable()
export class KeyCache {
  private readonly entries = new Map<string, { principal: Principal | null; generation: string; expires: number }>();
  /** The Redis counter of this cache's changes (under REDIS_PREFIX). */
  protected readonly counterName: string = KEYS_GENERATION;
  /** The newest read of the counter (resolved or still on the wire), and when it was sent. */
  private newest?: { sentAt: number; value: Promise<string | undefined> };
  /** Monotonic milliseconds (a test stands in its own clock). */
  now: () => number = () => performance.now();
  private readonly optional: OptionalRedis;
  /** A bump Redis has not taken yet, being retried. */
  private bumping?: Promise<void>;

  constructor(
    private readonly config: AppConfig,
    @Inject(REDIS) private readonly redis: Redis,
  ) {
    onReconnect(redis, () => this.entries.clear());
    this.optional = new OptionalRedis(redis, () => this.now());
  }

  private get counter(): string {
    return `${this.config.REDIS_PREFIX}${this.counterName}`;
  }

  /**
   * The current generation of key changes, or undefined when Redis does not answer in time
   * (`OptionalRedis`: every request of an outage would otherwise wait for it).
   */
  generation(): Promise<string | undefined> {
    if (!this.optional.asking) return Promise.resolve(undefined);
    const now = this.now();
    if (this.newest === undefined || now - this.newest.sentAt > GENERATION_WINDOW_MS) {
      this.newest = { sentAt: now, value: this.optional.ask((redis) => redis.eval(READ_COUNTER, 1, this.counter, freshStart()).then(String)) };
    }
    return this.newest.value;
  }

  get(hash: string, generation: string | undefined): Principal | null | undefined {
    const hit = this.entries.get(hash);
    if (!hit) return undefined;
    if (generation === undefined || hit.generation !== generation || hit.expires < Date.now()) {
      this.entries.delete(hash);
      return undefined;
    }
    return hit.principal;
  }

  /** Caches what was read from the database under `generation` (read before the query), for at most `maxAgeMs`. */
  set(hash: string, principal: Principal | null, generation: string | undefined, maxAgeMs = Infinity): void {
    const ttl = Math.min(this.config.KEY_CACHE_TTL_SECONDS * 1000, maxAgeMs);
    if (ttl <= 0 || generation === undefined) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(hash, { principal, generation, expires: Date.now() + ttl });
  }

  /**
   * Call after a key change commits and before it is acknowledged: resolves once every lookup
   * that begins afterwards, on any instance, sees the new generation.
   */
  async invalidate(hash?: string): Promise<void> {
    if (hash !== undefined) this.entries.delete(hash);
    if (await withinTimeout(bumpGeneration(this.redis, this.counter).then(() => true), BUMP_TIMEOUT_MS)) return;
    // Redis is away: no instance serves from its cache meanwhile (`generation`), and this one
    // empties its own; the bump follows once Redis takes it.
    this.entries.clear();
    this.bumping ??= this.bumpUntilTaken().finally(() => (this.bumping = undefined));
  }

  private async bumpUntilTaken(): Promise<void> {
    for (;;) {
      await sleep(BUMP_RETRY_MS);
      if (await withinTimeout(bumpCounter(this.redis, this.counter).then(() => true), BUMP_TIMEOUT_MS)) return;
    }
  }
}
