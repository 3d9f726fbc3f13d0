/**
 * Per-credential, per-path-segment rate limits in Redis (shared by every instance), with the
 * X-RateLimit-* headers on every response and 429 `rate_limited` + Retry-After past the limit.
 * Should Redis fail, an in-memory limiter of the same size stands in rather than letting
 * everything through or failing every request.
 */
import { Inject, Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Redis from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { ApiError } from '../common/api-error';
import { AppConfig } from '../config/app-config';
import { REDIS } from '../redis/redis.module';
import { basicClientId, bucketFor } from './rate-limit.policy';

const WINDOW_SECONDS = 60;

/** The path as the router matches it (percent-decoded), so that `/%6Beys` counts as `/keys`. */
function routedPath(url: string): string {
  const path = url.split('?', 1)[0];
  try {
    return decodeURIComponent(path);
  } catch {
    return path; // not validly encoded: the router refuses it (protocol-errors.ts)
  }
}

@Injectable()
export class RateLimitHook {
  private readonly limiters = new Map<number, RateLimiterRedis>();

  constructor(
    private readonly config: AppConfig,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  private limiter(points: number): RateLimiterRedis {
    let limiter = this.limiters.get(points);
    if (!limiter) {
      limiter = new RateLimiterRedis({
        storeClient: this.redis,
        keyPrefix: `${this.config.REDIS_PREFIX}rl:${points}`,
        points,
        duration: WINDOW_SECONDS,
        insuranceLimiter: new RateLimiterMemory({ points, duration: WINDOW_SECONDS }),
        // While Redis is away, count in memory at once instead of waiting out the client's retries (seconds per request).
        rejectIfRedisNotReady: true,
      });
      this.limiters.set(points, limiter);
    }
    return limiter;
  }

  /** A fastify onRequest hook, after CredentialHook. */
  readonly onRequest = async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | void> => {
    if (!this.config.RATE_LIMIT_ENABLED) return;
    const path = routedPath(req.url);
    const { bucket, limit, oauth } = bucketFor(req.method, path, this.config.RATE_LIMIT_REQUESTS);
    const client = oauth && basicClientId(req.headers.authorization);
    // A client is counted per address too, so that knowing its (public) id is not enough to exhaust its bucket.
    const caller = req.principal ? `k:${req.principal.credentialId}` : client ? `c:${client}:ip:${req.ip}` : `ip:${req.ip}`;
    const setHeaders = (r: RateLimiterRes) => {
      reply.header('X-RateLimit-Limit', String(limit));
      reply.header('X-RateLimit-Remaining', String(Math.max(0, r.remainingPoints)));
      reply.header('X-RateLimit-Reset', String(Math.ceil((Date.now() + r.msBeforeNext) / 1000)));
    };
    try {
      setHeaders(await this.limiter(limit).consume(`${caller}:${bucket}`));
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      setHeaders(rejection);
      const retryAfter = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
      reply.header('Retry-After', String(retryAfter));
      const message = `Rate limit of ${limit} requests per minute exceeded; retry in ${retryAfter}s`;
      if (oauth) return reply.code(429).header('Cache-Control', 'no-store').send({ error: 'rate_limited', error_description: message });
      throw new ApiError(429, 'rate_limited', message, { limit, retry_after: retryAfter });
    }
  };
}
