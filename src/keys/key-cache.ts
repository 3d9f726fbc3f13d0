/**
 * In-process cache of resolved API keys, keyed by key hash, so the hot path does not hit the
 * database for credentials. Revocation and updates invalidate every instance at once through
 * Redis pub/sub; the TTL bounds staleness should a message ever be lost.
 */
import { Injectable, OnModuleInit } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { RedisPubSub } from '../redis/redis.module';
import type { Principal } from '../auth/principal';

const CHANNEL = 'keys:invalidate';
const MAX_ENTRIES = 10_000;

@Injectable()
export class KeyCache implements OnModuleInit {
  private readonly entries = new Map<string, { principal: Principal | null; expires: number }>();
  /** Bumped by every invalidation, local or from another instance (see `set`). */
  private invalidations = 0;

  constructor(
    private readonly config: AppConfig,
    private readonly pubsub: RedisPubSub,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.pubsub.subscribe(CHANNEL, (hash) => this.drop(hash));
  }

  /** Read before loading a key from the database, and pass to `set`. */
  get epoch(): number {
    return this.invalidations;
  }

  get(hash: string): Principal | null | undefined {
    const hit = this.entries.get(hash);
    if (!hit) return undefined;
    if (hit.expires < Date.now()) {
      this.entries.delete(hash);
      return undefined;
    }
    return hit.principal;
  }

  /**
   * Caches what was read from the database at `epoch`. Should any invalidation have come in
   * since, the row may predate a revocation that committed meanwhile, and caching it would
   * undo that revocation for a whole TTL: it is not cached (the next request will).
   */
  set(hash: string, principal: Principal | null, epoch: number = this.invalidations): void {
    const ttl = this.config.KEY_CACHE_TTL_SECONDS * 1000;
    if (ttl === 0 || epoch !== this.invalidations) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(hash, { principal, expires: Date.now() + ttl });
  }

  /** Drops the entry here at once and on every other instance. */
  async invalidate(hash: string): Promise<void> {
    this.drop(hash);
    await this.pubsub.publish(CHANNEL, hash);
  }

  private drop(hash: string): void {
    this.invalidations++;
    this.entries.delete(hash);
  }
}
