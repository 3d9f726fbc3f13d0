/**
 * Per-caller, per-path-segment rate limits in Redis (shared by every instance), with the
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
import { bucketFor } from './rate-limit.policy';

const WINDOW_SECONDS = 60;

/**
 * The path the request was routed by, so that no other spelling of the request target (letter
 * case, percent-encoding, a fragment, the absolute form `http://host/path`, a trailing slash)
 * counts against another bucket than the route's: the matched route's own path (`/items/:id`),
 * which the router (find-my-way) has settled before any onRequest hook runs.
 */
function routedPath(req: FastifyRequest): string {
  if (req.routeOptions.url) return req.routeOptions.url;
  const path = unroutedPath(req.url);
  return SERVED_UNROUTED.test(path) ? path : UNKNOWN_PATH;
}

/**
 * What is served without a route of its own: the provider's endpoints (oidc-mount.ts). Every
 * other request that matched no route counts in one bucket, UNKNOWN_PATH's, so that made-up first
 * segments (`/x1`, `/x2`, …) cannot each open a bucket, and a key in Redis.
 */
const SERVED_UNROUTED = /^\/(auth|\.well-known)(\/|$)/i;
const UNKNOWN_PATH = '/(unknown)';

/**
 * The path of a request that matched no route: an unknown path, the provider's endpoints (which
 * oidc-mount.ts serves from the unmatched request), or a URL refused before routing. Taken as
 * find-my-way reads the target before it matches: the path of the absolute form, cut at the
 * first `?` or `#` (not at `;`: useSemicolonDelimiter is off), percent-decoded. Trailing
 * slashes and letter case are the policy's to ignore.
 */
function unroutedPath(url: string): string {
  const authority = /^https?:\/\/[^/?]*/i.exec(url);
  const target = authority ? url.slice(authority[0].length) : url;
  const path = (target.startsWith('/') ? target : `/${target}`).split(/[?#]/, 1)[0];
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
    const { bucket, limit, oauth, perIp } = bucketFor(req.method, routedPath(req), this.config.RATE_LIMIT_REQUESTS);
    const caller = req.principal && !perIp ? `k:${req.principal.credentialId}` : `ip:${req.ip}`;
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
