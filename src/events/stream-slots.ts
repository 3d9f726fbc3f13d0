/**
 * The cap on open `GET /events` streams: at most MAX_STREAMS_PER_CREDENTIAL per credential (an
 * API key, an OAuth grant, or `client:<id>:<secret tag>` for a client's tokens,
 * oidc/client-secret-claim.ts), MAX_STREAMS_PER_USER per user whose OAuth grants open them (one
 * person consenting to many apps must not take the tenant's every slot), and
 * MAX_STREAMS_PER_TENANT per tenant, past which opening one is 429 `rate_limited`. Each stream
 * holds a slot from opening to closing.
 *
 * Counted across every instance, in Redis: a sorted set per credential, user and tenant whose
 * members are the open streams, scored with when the slot lapses. The instance holding a stream
 * renews its slot every SLOT_RENEW_MS, so the slots of an instance that died without closing its
 * streams lapse after SLOT_TTL_MS instead of holding the cap forever. One script (trim the lapsed,
 * count, add) makes the check and the taking one step, so two instances cannot both take the
 * last slot. Where Redis is not asked, fails or does not answer in time (`OptionalRedis`, as for
 * the rate limiter), this instance's own count stands in:
 * the cap then holds per instance; slots of streams that closed meanwhile are removed at the
 * next renewal that Redis takes.
 */
import { Inject, Injectable, Logger } from '@nestjs/common';
import Redis from 'ioredis';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { newId } from '../common/ids';
import { AppConfig } from '../config/app-config';
import { OptionalRedis, REDIS } from '../redis/redis.module';

export const MAX_STREAMS_PER_CREDENTIAL = 5;
export const MAX_STREAMS_PER_USER = 10;
export const MAX_STREAMS_PER_TENANT = 100;
/** How often the instance holding a stream renews its slot. */
export const SLOT_RENEW_MS = 10_000;
/** A slot not renewed for this long is taken to belong to a dead instance. */
const SLOT_TTL_MS = 30_000;

type Scope = 'credential' | 'user' | 'tenant';

/** KEYS: the sets the slot goes in; ARGV: now, lapses at, slot, key TTL, then each set's cap. The first full set's index (1-based), or 0 once taken. */
const TAKE = `
local now = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZCARD', key) >= tonumber(ARGV[4 + i]) then return i end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, ARGV[2], ARGV[3])
  redis.call('PEXPIRE', key, ARGV[4])
end
return 0`;

export interface StreamSlot {
  id: string;
  /** What it counts against, narrowest first: the Redis set and this instance's count (the stand-in when Redis fails) of each. */
  sets: Array<{ scope: Scope; key: string; local: string; limit: number }>;
}

@Injectable()
export class StreamSlots {
  private readonly logger = new Logger('Events');
  private readonly held = new Set<StreamSlot>();
  /** Slots of streams that closed while Redis could not be told. */
  private readonly unreleased: StreamSlot[] = [];
  /** Streams open on this instance, by `<scope>:<tenant>:<id>`. */
  private readonly counts = new Map<string, number>();

  private readonly optional: OptionalRedis;

  constructor(
    private readonly config: AppConfig,
    @Inject(REDIS) private readonly redis: Redis,
  ) {
    this.optional = new OptionalRedis(redis);
  }

  /** A slot for a new stream of this credential, or 429 `rate_limited` when its credential, user or tenant is at the cap. */
  async take(p: Principal): Promise<StreamSlot> {
    // A hash tag of the tenant keeps every set in one slot of a Redis cluster, as the script needs.
    const tenantKey = `${this.config.REDIS_PREFIX}events:streams:{${p.tenantId}}`;
    const set = (scope: Scope, id: string | null, limit: number) => ({
      scope,
      key: id === null ? tenantKey : `${tenantKey}:${scope}:${id}`,
      local: `${scope}:${p.tenantId}:${id ?? ''}`,
      limit,
    });
    const slot: StreamSlot = {
      id: newId(),
      sets: [
        set('credential', p.credentialId, MAX_STREAMS_PER_CREDENTIAL),
        ...(p.userId ? [set('user', p.userId, MAX_STREAMS_PER_USER)] : []),
        set('tenant', null, MAX_STREAMS_PER_TENANT),
      ],
    };
    const now = Date.now();
    const keys = slot.sets.map((s) => s.key);
    const verdict = await this.optional.ask((redis) => redis.eval(TAKE, keys.length, ...keys, now, now + SLOT_TTL_MS, slot.id, SLOT_TTL_MS, ...slot.sets.map((s) => s.limit)));
    let full: StreamSlot['sets'][number] | undefined;
    if (verdict === undefined) {
      this.logger.warn('stream slots: Redis not answering, counting this instance\'s streams only');
      full = slot.sets.find((s) => (this.counts.get(s.local) ?? 0) >= s.limit);
    } else full = slot.sets[Number(verdict) - 1];
    if (full) throw fullError(full.scope, full.limit);
    this.held.add(slot);
    for (const { local } of slot.sets) this.counts.set(local, (this.counts.get(local) ?? 0) + 1);
    return slot;
  }

  /** Gives the slot back; a second call for the same slot does nothing. */
  async release(slot: StreamSlot): Promise<void> {
    if (!this.held.delete(slot)) return;
    for (const { local } of slot.sets) {
      const n = (this.counts.get(local) ?? 1) - 1;
      if (n > 0) this.counts.set(local, n);
      else this.counts.delete(local);
    }
    try {
      await this.remove([slot]);
    } catch {
      this.unreleased.push(slot); // Redis is away: removed at the next renewal, else it lapses after SLOT_TTL_MS
    }
  }

  private async remove(slots: StreamSlot[]): Promise<void> {
    const batch = this.redis.multi();
    for (const slot of slots) for (const { key } of slot.sets) batch.zrem(key, slot.id);
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
      for (const { key } of slot.sets) batch.zadd(key, lapsesAt, slot.id).pexpire(key, SLOT_TTL_MS);
    }
    await batch.exec();
  }
}

function fullError(scope: Scope, limit: number): ApiError {
  // A slot frees when a stream closes, or within a renewal period once its instance stops renewing it.
  const retryAfter = SLOT_RENEW_MS / 1000;
  return new ApiError(429, 'rate_limited', `At most ${limit} event streams may be open at once per ${scope}; close one first`, { limit, scope, retry_after: retryAfter });
}
