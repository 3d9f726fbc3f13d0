/**
 * CORS for the API, so that a browser app holding a bearer credential (an OAuth 2.1 public
 * client's access token above all) can call it from its own origin. Credentials are never
 * ambient here (the API reads only the Authorization header, never a cookie), so a page on
 * another origin gains nothing it did not already hold: any origin may be let in, and is by
 * default (`CORS_ORIGINS=*`), as `/auth/userinfo` does. `Access-Control-Allow-Credentials` is never
 * sent. Not under `/auth/` (the account pages work by cookie; the provider and userinfo answer
 * their own preflights) nor `/.well-known/` (the provider's).
 *
 * Which paths: as the router matches them, percent-decoded (`/%61uth/…` is `/auth/…`). A preflight
 * (OPTIONS with `Access-Control-Request-Method`) of an API path is answered 204 whether or not a
 * route has that method: the request itself then gets its answer (a 404 included) with the CORS
 * headers, so the app can read why.
 */
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';

/** The response headers an app may read besides the CORS-safelisted ones. */
const EXPOSED = [
  'Accept-Ranges',
  'Content-Range',
  'ETag',
  'Location',
  'Retry-After',
  'WWW-Authenticate',
  'X-Request-Id',
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'Idempotent-Replayed',
].join(', ');
/** The request headers the API reads that are not CORS-safelisted. */
const ALLOWED_HEADERS = 'Authorization, Content-Type, Idempotency-Key, If-None-Match, If-Range, Last-Event-ID, Range, X-Request-Id';
const ALLOWED_METHODS = 'GET, HEAD, POST, PATCH, DELETE';
/** Seconds a browser may reuse a preflight's answer (Chromium caps it at 7,200). */
const PREFLIGHT_MAX_AGE = '3600';

const NOT_API = /^\/(auth|\.well-known)(\/|$)/i;

export type CorsOrigins = '*' | ReadonlySet<string>;

/**
 * The path as the router matches it: percent-decoded (`/%61uth/…` routes to `/auth/…`), or as
 * sent when it does not decode (the router refuses it then).
 */
function routedPath(url: string): string {
  const path = url.split('?', 1)[0];
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

/** Sets the CORS headers of an answer to `request`. For a list of origins the answer varies with `Origin`, which `Vary` says. */
export function setCorsHeaders(origins: CorsOrigins, request: FastifyRequest, reply: FastifyReply): void {
  if (NOT_API.test(routedPath(request.url))) return;
  const raw = reply.raw;
  const origin = request.headers.origin;
  if (origins !== '*') raw.setHeader('Vary', 'Origin');
  const allowed = origins === '*' ? '*' : origin !== undefined && origins.has(origin) ? origin : undefined;
  if (!allowed) return;
  raw.setHeader('Access-Control-Allow-Origin', allowed);
  raw.setHeader('Access-Control-Expose-Headers', EXPOSED);
}

/** The first hook: CORS headers on every API answer, refusals of the steps before routing included. */
export function corsHeaders(origins: CorsOrigins): onRequestHookHandler {
  return (request, reply, done) => {
    setCorsHeaders(origins, request, reply);
    done();
  };
}

/**
 * A later hook, after the rate limit and the protocol checks (a preflight is counted in the
 * client address's bucket and carries its X-RateLimit-* headers, as every answer does): answers
 * the preflight of an API path from an origin let in (an empty Access-Control-Request-Method is
 * none, as the provider reads it).
 */
export const answerPreflight: onRequestHookHandler = (request, reply, done) => {
  if (request.method !== 'OPTIONS' || !request.headers['access-control-request-method'] || !reply.raw.hasHeader('Access-Control-Allow-Origin')) return done();
  void reply
    .status(204)
    .header('Access-Control-Allow-Methods', ALLOWED_METHODS)
    .header('Access-Control-Allow-Headers', ALLOWED_HEADERS)
    .header('Access-Control-Max-Age', PREFLIGHT_MAX_AGE)
    .send();
};
