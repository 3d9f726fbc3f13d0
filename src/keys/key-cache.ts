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

  constructor(
    private readonly config: AppConfig,
    private readonly pubsub: RedisPubSub,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.pubsub.subscribe(CHANNEL, (hash) => this.entries.delete(hash));
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

  set(hash: string, principal: Principal | null): void {
    const ttl = this.config.KEY_CACHE_TTL_SECONDS * 1000;
    if (ttl === 0) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(hash, { principal, expires: Date.now() + ttl });
  }

  /** Drops the entry here at once and on every other instance. */
  async invalidate(hash: string): Promise<void> {
    this.entries.delete(hash);
    await this.pubsub.publish(CHANNEL, hash);
  }
}
