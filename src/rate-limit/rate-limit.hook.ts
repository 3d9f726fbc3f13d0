/**
 * Per-caller, per-path-segment rate limits in Redis (shared by every instance), in rolling
 * windows (rolling-window.ts), with the X-RateLimit-* headers on every response and 429
 * `rate_limited` + Retry-After past the limit. A browser on the account and sign-in pages gets
 * that as a page in their layout (oidc/pages.ts), not as JSON. A caller counted by client
 * address counts by its `addressBucket` (client-address.ts): an IPv6 address per /64. Should
 * Redis fail, an in-memory limiter of the same size (a fixed window, per instance) stands in
 * rather than letting everything through or failing every request.
 */
import { Inject, Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Redis from 'ioredis';
import type { IncomingMessage } from 'node:http';
import { ApiError } from '../common/api-error';
import { addressBucket } from '../common/client-address';
import { AppConfig } from '../config/app-config';
import { REDIS } from '../redis/redis.module';
import { rateLimitedPage } from '../oidc/pages';
import { sendPage } from '../oidc/send-page';
import { bucketFor, isBrowserPage } from './rate-limit.policy';
import { limitHeaders, RollingWindows } from './rolling-window';

/**
 * The path the request was routed by, so that no other spelling of the request target (letter
 * case, percent-encoding, a fragment, the absolute form `http://host/path`, a trailing slash)
 * counts against another bucket than the route's: the matched route's own path (`/items/:id`),
 * which the router (find-my-way) has settled before any onRequest hook runs.
 */
function routedPath(req: FastifyRequest, routeSegments: ReadonlySet<string>): string {
  if (req.routeOptions.url) return req.routeOptions.url;
  const path = unroutedPath(req.url);
  if (SERVED_UNROUTED.test(path)) return path;
  // No API route takes OPTIONS: a CORS preflight counts with the reads of the segment it asks
  // about, so that one app's preflights do not share a bucket with every other path's and stray 404s.
  const segment = path.split('/')[1]?.toLowerCase();
  return req.method === 'OPTIONS' && segment && routeSegments.has(segment) ? `/${segment}` : UNKNOWN_PATH;
}

/**
 * What is served without a route of its own: the provider's endpoints (oidc-mount.ts). Every
 * other request that matched no route counts in one bucket, UNKNOWN_PATH's, so that made-up first
 * segments (`/x1`, `/x2`, …) cannot each open a bucket, and a key in Redis.
 */
const SERVED_UNROUTED = /^\/(auth|\.well-known)(\/|$)/i;
const UNKNOWN_PATH = '/(unknown)';

/** A browser's page request, as against a form it sent (which the rate-limited page says was not taken). */
const READS = new Set(['GET', 'HEAD']);

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

/**
 * The place each request let through took, by its Node request, for a limit counted after this
 * hook (the token endpoints' tight one, token-rate-limit.ts) to give back when it refuses the
 * request: a refused request counts in no bucket (SPEC 8.1), this hook's included.
 */
const places = new WeakMap<IncomingMessage, () => Promise<void>>();

/** Gives back the place `req` took in its bucket; it counts there no more. */
export async function giveBackPlace(req: IncomingMessage): Promise<void> {
  const giveBack = places.get(req);
  places.delete(req);
  await giveBack?.();
}

@Injectable()
export class RateLimitHook {
  private readonly windows: RollingWindows;
  /** The first path segments of the routes (lower case), for routedPath. */
  private readonly routeSegments = new Set<string>();

  constructor(
    private readonly config: AppConfig,
    @Inject(REDIS) redis: Redis,
  ) {
    this.windows = new RollingWindows(redis, config.REDIS_PREFIX);
  }

  /**
   * The X-RateLimit-* headers of a request refused before it could be parsed (protocol-errors.ts),
   * which has no route and no credential yet: it counts against its address in the bucket of
   * paths that match no route, as a URL the router refuses does. It keeps its own answer (400,
   * 408, 417, 431) when the bucket is full.
   */
  async unparsed(address: string | undefined, method: string): Promise<Record<string, string>> {
    if (!this.config.RATE_LIMIT_ENABLED) return {};
    const { bucket, limit } = bucketFor(method, UNKNOWN_PATH, this.config.RATE_LIMIT_REQUESTS);
    return limitHeaders(limit, await this.windows.take(`ip:${address && addressBucket(address)}:${bucket}`, limit));
  }

  /** A fastify onRoute hook: notes the route's first path segment. */
  readonly onRoute = (route: { url: string }): void => {
    const segment = route.url.split('/')[1]?.toLowerCase();
    if (segment && !segment.startsWith(':')) this.routeSegments.add(segment);
  };

  /** A fastify onRequest hook, after CredentialHook. */
  readonly onRequest = async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | void> => {
    if (!this.config.RATE_LIMIT_ENABLED) return;
    const path = routedPath(req, this.routeSegments);
    const { bucket, limit, oauth, perIp } = bucketFor(req.method, path, this.config.RATE_LIMIT_REQUESTS);
    const caller = req.principal && !perIp ? `k:${req.principal.credentialId}` : `ip:${addressBucket(req.ip)}`;
    const state = await this.windows.take(`${caller}:${bucket}`, limit);
    if (state.allowed) places.set(req.raw, state.giveBack);
    reply.headers(limitHeaders(limit, state));
    if (!state.allowed) {
      const retryAfter = Math.max(1, Math.ceil(state.msBeforeNext / 1000));
      reply.header('Retry-After', String(retryAfter));
      const message = `Rate limit of ${limit} requests per minute exceeded; retry in ${retryAfter}s`;
      // A browser on one of its pages would show the envelope raw: it gets a page saying when to try again.
      if (isBrowserPage(req.method, path) && /\btext\/html\b/i.test(req.headers.accept ?? '')) {
        await sendPage(reply, 429, rateLimitedPage(retryAfter, !READS.has(req.method)));
        return reply;
      }
      if (oauth) return reply.code(429).header('Cache-Control', 'no-store').send({ error: 'rate_limited', error_description: message });
      throw new ApiError(429, 'rate_limited', message, { limit, retry_after: retryAfter });
    }
  };
}
