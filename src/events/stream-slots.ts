/**
 * The cap on open `GET /events` streams: at most MAX_STREAMS_PER_CREDENTIAL per credential (an
 * API key, an OAuth grant, or `client:<id>:<secret tag>` for a client's tokens,
 * oidc/client-secret-claim.ts) and MAX_STREAMS_PER_TENANT per tenant, past which opening one is
 * 429 `rate_limited`. Each stream holds a slot from opening to closing.
 *
 * Counted across every instance, in Redis: a sorted set per credential and per tenant whose
 * members are the open streams, scored with when the slot lapses. The instance holding a stream
 * renews its slot every SLOT_RENEW_MS, so the slots of an instance that died without closing its
 * streams lapse after SLOT_TTL_MS instead of holding the cap forever. One script (trim the lapsed,
 * count, add) makes the check and the taking one step, so two instances cannot both take the
 * last slot. Should Redis fail, this instance's own count stands in, as the rate limiter does:
 * the cap then holds per instance; slots of streams that closed meanwhile are removed at the
 * next renewal that Redis takes.
 */
import { Inject, Injectable, Logger } from '@nestjs/common';
import Redis from 'ioredis';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { newId } from '../common/ids';
import { AppConfig } from '../config/app-config';
import { REDIS } from '../redis/redis.module';

export const MAX_STREAMS_PER_CREDENTIAL = 5;
export const MAX_STREAMS_PER_TENANT = 100;
/** How often the instance holding a stream renews its slot. */
export const SLOT_RENEW_MS = 10_000;
/** A slot not renewed for this long is taken to belong to a dead instance. */
const SLOT_TTL_MS = 30_000;

/** KEYS: the credential's set, the tenant's; ARGV: now, lapses at, slot, the two caps, key TTL. */
const TAKE = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 'credential' end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return 'tenant' end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return 'ok'`;

export interface StreamSlot {
  id: string;
  /** The Redis sets it is in: the credential's, the tenant's. */
  keys: [string, string];
  /** This instance's counts it is in (the stand-in when Redis fails). */
  local: [string, string];
}

@Injectable()
export class StreamSlots {
  private readonly logger = new Logger('Events');
  private readonly held = new Set<StreamSlot>();
  /** Slots of streams that closed while Redis could not be told. */
  private readonly unreleased: StreamSlot[] = [];
  /** Streams open on this instance, by `c:<tenant>:<credential>` and `t:<tenant>`. */
  private readonly counts = new Map<string, number>();

  constructor(
    private readonly config: AppConfig,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  /** A slot for a new stream of this credential, or 429 `rate_limited` when its credential or tenant is at the cap. */
  async take(p: Principal): Promise<StreamSlot> {
    // A hash tag of the tenant keeps both sets in one slot of a Redis cluster, as the script needs.
    const tenantKey = `${this.config.REDIS_PREFIX}events:streams:{${p.tenantId}}`;
    const slot: StreamSlot = {
      id: newId(),
      keys: [`${tenantKey}:${p.credentialId}`, tenantKey],
      local: [`c:${p.tenantId}:${p.credentialId}`, `t:${p.tenantId}`],
    };
    let verdict: string;
    try {
      const now = Date.now();
      verdict = String(await this.redis.eval(TAKE, 2, ...slot.keys, now, now + SLOT_TTL_MS, slot.id, MAX_STREAMS_PER_CREDENTIAL, MAX_STREAMS_PER_TENANT, SLOT_TTL_MS));
    } catch (err) {
      this.logger.warn({ err }, 'stream slots: Redis failed, counting this instance\'s streams only');
      verdict =
        (this.counts.get(slot.local[0]) ?? 0) >= MAX_STREAMS_PER_CREDENTIAL ? 'credential'
          : (this.counts.get(slot.local[1]) ?? 0) >= MAX_STREAMS_PER_TENANT ? 'tenant'
            : 'ok';
    }
    if (verdict === 'credential') throw full('credential', MAX_STREAMS_PER_CREDENTIAL);
    if (verdict === 'tenant') throw full('tenant', MAX_STREAMS_PER_TENANT);
    this.held.add(slot);
    for (const key of slot.local) this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    return slot;
  }

  /** Gives the slot back; a second call for the same slot does nothing. */
  async release(slot: StreamSlot): Promise<void> {
    if (!this.held.delete(slot)) return;
    for (const key of slot.local) {
      const n = (this.counts.get(key) ?? 1) - 1;
      if (n > 0) this.counts.set(key, n);
      else this.counts.delete(key);
    }
    try {
      await this.remove([slot]);
    } catch {
      this.unreleased.push(slot); // Redis is away: removed at the next renewal, else it lapses after SLOT_TTL_MS
    }
  }

  private async remove(slots: StreamSlot[]): Promise<void> {
    const batch = this.redis.multi();
    for (const slot of slots) batch.zrem(slot.keys[0], slot.id).zrem(slot.keys[1], slot.id);
    await batch.exec();
  }

  /** Keeps the slots of this instance's open streams from lapsing (every SLOT_RENEW_MS), and frees those closed while Redis was away. */
  async renew(): Promise<void> {
    if (this.unreleased.length) {
      const slots = this.unreleased.splice(0);
      await this.remove(slots).catch((err: unknown) => {
        this.unreleased.push(...slots);
        throw err;
      });
    }
    if (!this.held.size) return;
    const lapsesAt = Date.now() + SLOT_TTL_MS;
    const batch = this.redis.pipeline();
    for (const slot of this.held) {
      for (const key of slot.keys) batch.zadd(key, lapsesAt, slot.id).pexpire(key, SLOT_TTL_MS);
    }
    await batch.exec();
  }
}

function full(scope: 'credential' | 'tenant', limit: number): ApiError {
  // A slot frees when a stream closes, or within a renewal period once its instance stops renewing it.
  const retryAfter = SLOT_RENEW_MS / 1000;
  return new ApiError(429, 'rate_limited', `At most ${limit} event streams may be open at once per ${scope}; close one first`, { limit, scope, retry_after: retryAfter });
}
