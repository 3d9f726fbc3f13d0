/**
 * In-process cache of resolved API keys, keyed by key hash, so the hot path does not hit the
 * database for credentials.
 *
 * A revocation or change must hold on every instance from the very next request, which
 * pub/sub cannot promise (its message races that request). So every key change bumps one
 * deployment-wide generation counter in Redis before the change is acknowledged, every
 * lookup reads the counter (a Redis GET, shared by concurrent lookups, far cheaper than the
 * key query), and a cached entry counts only while the generation it was read under is still
 * the current one. An entry read while a change committed carries the older generation and is
 * dropped at the next lookup.
 * When Redis cannot answer, nothing is served from or put into the cache.
 */
import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import type { Principal } from '../auth/principal';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { REDIS } from '../redis/redis.module';

const MAX_ENTRIES = 10_000;
const GENERATION_TIMEOUT_MS = 500;

@Injectable()
export class KeyCache {
  private readonly entries = new Map<string, { principal: Principal | null; generation: string; expires: number }>();
  private readonly counter: string;
  /** The generation read now on the wire, and the one that callers arriving meanwhile share. */
  private inFlight?: Promise<string | undefined>;
  private queued?: Promise<string | undefined>;

  constructor(
    private readonly config: AppConfig,
    @Inject(REDIS) private readonly redis: Redis,
  ) {
    this.counter = `${config.REDIS_PREFIX}keys:generation`;
  }

  /**
   * The current generation of key changes, or undefined when Redis does not answer in time.
   *
   * Concurrent callers share reads, so a busy instance sends one GET per Redis round trip
   * rather than one per request. A caller may only share a read sent after it asked: a read
   * already on the wire may have been answered before a revocation that this caller has seen
   * acknowledged. So callers arriving while a read is in flight all wait for the next one,
   * which goes out as soon as the current one is answered.
   */
  generation(): Promise<string | undefined> {
    if (this.inFlight === undefined) return this.read();
    this.queued ??= this.inFlight.then(() => {
      this.queued = undefined;
      return this.read();
    });
    return this.queued;
  }

  private read(): Promise<string | undefined> {
    const read: Promise<string | undefined> = withinTimeout(
      this.redis.get(this.counter).then((v) => v ?? '0'),
      GENERATION_TIMEOUT_MS,
    ).finally(() => {
      if (this.inFlight === read) this.inFlight = undefined;
    });
    this.inFlight = read;
    return read;
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

  /** Caches what was read from the database under `generation` (read before the query). */
  set(hash: string, principal: Principal | null, generation: string | undefined): void {
    const ttl = this.config.KEY_CACHE_TTL_SECONDS * 1000;
    if (ttl === 0 || generation === undefined) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(hash, { principal, generation, expires: Date.now() + ttl });
  }

  /** Call after a key change commits and before it is acknowledged: every instance re-reads. */
  async invalidate(hash: string): Promise<void> {
    this.entries.delete(hash);
    await this.redis.incr(this.counter);
  }
}
