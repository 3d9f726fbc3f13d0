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
 *
 * Memory: an entry can hold a principal of 600 permission patterns (about 160 KB), and a key is
 * rarely looked up again once its caller stops, so a dead entry cannot wait for its next lookup
 * to go. A sweep once a second while the cache is not empty drops entries past their expiry and,
 * once a newer generation was read, every entry of an older one (none can be served again). Each
 * cache is also capped by an estimate of the bytes it holds, made once when an entry is set, as
 * well as by count; past either the oldest entries go first.
 */
import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import Redis from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Principal } from '../auth/principal';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { onReconnect, OptionalRedis, REDIS } from '../redis/redis.module';
import { WeighedMap } from '../common/weighed-map';

const MAX_ENTRIES = 10_000;
/** The estimated bytes one cache may hold (`entryBytes`): about 400 keys with full permission maps. */
export const MAX_BYTES = 64 * 1024 * 1024;
/** How often expired entries and those of an older generation are dropped (`sweep`). */
export const SWEEP_INTERVAL_MS = 1000;
/**
 * What an entry costs beyond its permission patterns and scopes: the principal's other fields,
 * the cache key and the entry itself, rounded up.
 */
const ENTRY_BYTES = 1024;
/** What V8 spends on a property of a parsed permission map beyond its name's characters (one byte each, ASCII); measured 79. */
const PROPERTY_BYTES = 96;
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

/**
 * About what a cached principal holds in the heap, for the byte cap. Estimated once per `set`,
 * never on a lookup: walking the maps is cheap next to the database read that precedes a `set`.
 */
function entryBytes(key: string, principal: Principal | null): number {
  let bytes = ENTRY_BYTES + key.length;
  if (principal === null) return bytes;
  for (const map of [principal.typePerms, principal.extensionPerms, principal.edgePerms]) {
    for (const pattern in map) bytes += pattern.length + PROPERTY_BYTES;
  }
  for (const scope of principal.scopes ?? []) bytes += scope.length + PROPERTY_BYTES;
  return bytes;
}

interface Entry {
  principal: Principal | null;
  generation: string;
  /** On `now`'s clock. */
  expires: number;
}

@Injectable()
export class KeyCache implements OnModuleDestroy {
  /** In the order they were set, oldest first (a `set` of a present key moves it to the end). */
  private readonly entries = new WeighedMap<string, Entry>(MAX_ENTRIES, MAX_BYTES);
  /** No entry expires before this (`sweep` has nothing to drop for expiry until then). */
  private earliestExpiry = Infinity;
  /** The newest generation read (by the time its read was sent), which entries of another one cannot be served under again. */
  private current?: { sentAt: number; value: string };
  /** Whether `current` moved since the last sweep. */
  private generationMoved = false;
  private sweeper?: NodeJS.Timeout;
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
    onReconnect(redis, () => this.clear());
    this.optional = new OptionalRedis(redis, () => this.now());
  }

  onModuleDestroy(): void {
    this.stopSweeping();
  }

  /** What the cache holds now: entries, and their estimated bytes. */
  held(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.entries.bytes };
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
      const value = this.optional.ask((redis) => redis.eval(READ_COUNTER, 1, this.counter, freshStart()).then(String));
      // Noted before any caller's continuation runs (this callback was registered first).
      void value.then((read) => this.noteGeneration(now, read));
      this.newest = { sentAt: now, value };
    }
    return this.newest.value;
  }

  private noteGeneration(sentAt: number, value: string | undefined): void {
    // An unanswered read says nothing of the counter; a read overtaken by a newer one is older news.
    if (value === undefined || (this.current !== undefined && sentAt < this.current.sentAt)) return;
    if (this.current !== undefined && this.current.value !== value) this.generationMoved = true;
    this.current = { sentAt, value };
  }

  get(hash: string, generation: string | undefined): Principal | null | undefined {
    const hit = this.entries.get(hash);
    if (!hit) return undefined;
    if (generation === undefined || hit.generation !== generation || hit.expires < this.now()) {
      this.entries.delete(hash);
      return undefined;
    }
    return hit.principal;
  }

  /** Caches what was read from the database under `generation` (read before the query), for at most `maxAgeMs`. */
  set(hash: string, principal: Principal | null, generation: string | undefined, maxAgeMs = Infinity): void {
    const ttl = Math.min(this.config.KEY_CACHE_TTL_SECONDS * 1000, maxAgeMs);
    if (ttl <= 0 || generation === undefined) return;
    const now = this.now();
    this.entries.delete(hash);
    const entry: Entry = { principal, generation, expires: now + ttl };
    // Dead entries at the old end go first, so the caps evict live ones only when they must.
    for (const [oldest, old] of this.entries) {
      if (!this.dead(old, now)) break;
      this.entries.delete(oldest);
    }
    this.entries.set(hash, entry, entryBytes(hash, principal));
    this.earliestExpiry = Math.min(this.earliestExpiry, entry.expires);
    if (this.sweeper === undefined) {
      this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
      this.sweeper.unref(); // it does not keep the process alive
    }
  }

  /** Whether an entry can never be served again: expired, or of a generation older than the newest read. */
  private dead(entry: Entry, now: number): boolean {
    return entry.expires < now || (this.current !== undefined && entry.generation !== this.current.value);
  }

  private clear(): void {
    this.entries.clear();
    this.earliestExpiry = Infinity;
  }

  /**
   * Drops the dead entries (`dead`). Between expiries and generation changes a tick costs a
   * comparison, otherwise one pass over the entries; the timer stops while the cache is empty.
   */
  private sweep(): void {
    const now = this.now();
    if (this.generationMoved || this.earliestExpiry < now) {
      this.generationMoved = false;
      this.earliestExpiry = Infinity;
      for (const [hash, entry] of this.entries) {
        if (this.dead(entry, now)) this.entries.delete(hash);
        else this.earliestExpiry = Math.min(this.earliestExpiry, entry.expires);
      }
    }
    if (this.entries.size === 0) this.stopSweeping();
  }

  private stopSweeping(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
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
    this.clear();
    this.bumping ??= this.bumpUntilTaken().finally(() => (this.bumping = undefined));
  }

  private async bumpUntilTaken(): Promise<void> {
    for (;;) {
      await sleep(BUMP_RETRY_MS);
      if (await withinTimeout(bumpCounter(this.redis, this.counter).then(() => true), BUMP_TIMEOUT_MS)) return;
    }
  }
}
