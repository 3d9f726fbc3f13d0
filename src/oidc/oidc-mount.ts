/**
 * Hands the provider's own paths to oidc-provider, raw: a Fastify onRequest hook (after the
 * credential and rate-limit hooks, so `/auth/token` is rate limited like every path) takes the
 * request before any body parser has read it and passes Node's req/res to `provider.callback()`.
 * Aliases of the SPEC are rewritten to the provider's path first. Everything else under /auth
 * stays Nest's (sign-in, consent, clients, grants pages).
 *
 * The provider builds its URLs (discovery, registration) from the request's origin: that origin
 * is pinned to SVC_BASE_URL's, whatever Host or X-Forwarded-* the caller sent, and the client
 * address it sees is the one Fastify settled on under TRUST_PROXY.
 *
 * CORS: the provider answers its endpoints with CORS headers, and the preflight of the token,
 * revocation and introspection endpoints is its too (a browser app, a public client, calls them
 * with its client_id; whether an origin is let in is the provider's `clientBasedCORS`). Only a
 * preflight goes to it (an OPTIONS with Access-Control-Request-Method): any other OPTIONS stays
 * Nest's 404, as on every path. Userinfo, Nest's, is open to any origin (userinfo.controller.ts):
 * its CORS headers are set here, before any of its answers, refusals before the handler included.
 */
import { Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authorizationCount } from '../auth/credential.hook';
import { AppConfig } from '../config/app-config';
import { OIDC_ROUTES } from './oidc-routes';
import { OidcProvider } from './oidc-provider';
import { USERINFO_CORS, USERINFO_METHODS } from './userinfo.controller';

const READ = ['GET', 'HEAD'];
const POST = ['POST'];

/** Path → the provider's path and the methods it serves there (the rest stays Nest's: 404/405 in the envelope). */
const PATHS = new Map<string, { target: string; methods: string[] }>([
  ['/.well-known/openid-configuration', { target: '/.well-known/openid-configuration', methods: READ }],
  ['/.well-known/oauth-authorization-server', { target: '/.well-known/openid-configuration', methods: READ }],
  ['/.well-known/jwks.json', { target: OIDC_ROUTES.jwks, methods: READ }],
  [OIDC_ROUTES.jwks, { target: OIDC_ROUTES.jwks, methods: READ }],
  [OIDC_ROUTES.authorization, { target: OIDC_ROUTES.authorization, methods: READ }],
  // POST /auth/authorize, /auth/oauth2/authorize and /auth/logout are Nest's (interactions.controller.ts): a 303 to the GET form.
  ['/auth/oauth2/authorize', { target: OIDC_ROUTES.authorization, methods: READ }],
  [OIDC_ROUTES.token, { target: OIDC_ROUTES.token, methods: POST }],
  ['/auth/token', { target: OIDC_ROUTES.token, methods: POST }],
  ['/auth/device/token', { target: OIDC_ROUTES.token, methods: POST }],
  [OIDC_ROUTES.device_authorization, { target: OIDC_ROUTES.device_authorization, methods: POST }],
  [OIDC_ROUTES.introspection, { target: OIDC_ROUTES.introspection, methods: POST }],
  [OIDC_ROUTES.revocation, { target: OIDC_ROUTES.revocation, methods: POST }],
  [OIDC_ROUTES.registration, { target: OIDC_ROUTES.registration, methods: POST }],
  [OIDC_ROUTES.end_session, { target: OIDC_ROUTES.end_session, methods: READ }],
  // Userinfo (userinfo.controller.ts) and the user-code page (device.controller.ts) are Nest's.
]);

/** The provider's endpoints whose CORS preflight it answers (see the header). */
const PREFLIGHTS = new Set<string>([OIDC_ROUTES.token, OIDC_ROUTES.revocation, OIDC_ROUTES.introspection]);

/**
 * The provider's sub-paths: the authorization's resume after an interaction (`/auth/authorize/{uid}`,
 * not our `/auth/authorize/decision`), a registered client's configuration (RFC 7592 read, the
 * `registration_client_uri` a registration answers), the signed-out page of a logout without a
 * `post_logout_redirect_uri`, and the logout confirmation (POST).
 */
const READ_SUB_PATHS = new RegExp(
  `^(${OIDC_ROUTES.authorization}/(?!decision$)[^/]+|${OIDC_ROUTES.registration}/[^/]+|${OIDC_ROUTES.end_session}/success)$`,
  'i',
);
const POST_SUB_PATHS = new RegExp(`^${OIDC_ROUTES.end_session}/[^/]+$`, 'i');

/**
 * A registered client's configuration (RFC 7592) is read-only here: RFC 7592 2.3 answers a
 * DELETE a server does not support with 405, and an update (PUT, 2.2) gets the same. A
 * registrant's client is changed or removed by the operators (/auth/clients).
 */
const CLIENT_CONFIGURATION = new RegExp(`^${OIDC_ROUTES.registration}/[^/]+$`, 'i');
const UNSUPPORTED_MANAGEMENT = new Set(['PUT', 'DELETE']);

/**
 * A sub-path as the provider spells it: its route's prefix in the provider's letter case, the
 * rest as sent (an interaction uid or client id is case-sensitive; a logout step is a word of the
 * provider's, lower case).
 */
function providerSpelling(path: string): string {
  const lower = path.toLowerCase();
  if (lower.startsWith(`${OIDC_ROUTES.end_session}/`)) return lower;
  const prefix = [OIDC_ROUTES.authorization, OIDC_ROUTES.registration].find((p) => lower.startsWith(`${p}/`))!;
  return prefix + path.slice(prefix.length);
}

@Injectable()
export class OidcMount {
  private handle?: (req: unknown, res: unknown) => void;

  private readonly origin: { host: string; proto: string };

  constructor(
    private readonly provider: OidcProvider,
    config: AppConfig,
  ) {
    const base = new URL(config.baseUrl);
    this.origin = { host: base.host, proto: base.protocol.slice(0, -1) };
  }

  /** A fastify onRequest hook. */
  readonly onRequest = (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void => {
    const query = req.url.indexOf('?');
    const path = (query === -1 ? req.url : req.url.slice(0, query)).replace(/\/+$/, '') || '/';
    // By the route the request was routed to, whatever its spelling.
    if (USERINFO_METHODS.has(req.routeOptions.url ?? '')) reply.headers(USERINFO_CORS);
    // Any letter case, as the rest of the routing (app.factory.ts); the provider gets its own spelling.
    const route =
      PATHS.get(path.toLowerCase()) ??
      (READ_SUB_PATHS.test(path)
        ? { target: providerSpelling(path), methods: READ }
        : POST_SUB_PATHS.test(path)
          ? { target: providerSpelling(path), methods: POST }
          : undefined);
    // An empty Access-Control-Request-Method is no preflight to the provider's CORS either, which
    // would leave it to Koa's plain-text 404: the service's own 404 answers it instead.
    const preflight = req.method === 'OPTIONS' && Boolean(req.headers['access-control-request-method']) && PREFLIGHTS.has(route?.target ?? '');
    if (UNSUPPORTED_MANAGEMENT.has(req.method) && CLIENT_CONFIGURATION.test(path)) {
      reply.code(405).header('allow', READ.join(', ')).header('cache-control', 'no-store');
      return void reply.send({ error: 'invalid_request', error_description: `${req.method} of a client's configuration is not supported: it is read-only (RFC 7592)` });
    }
    if (!route || !(route.methods.includes(req.method) || preflight)) return done();
    if (authorizationCount(req.raw) > 1) {
      reply.code(400).header('cache-control', 'no-store');
      return void reply.send({ error: 'invalid_request', error_description: 'Send the Authorization header once' });
    }
    const target = route.target;
    const url = target + (query === -1 ? '' : req.url.slice(query));
    if (this.handle) return this.pass(req, reply, url, this.handle);
    this.provider.get().then(
      (provider) => this.pass(req, reply, url, (this.handle ??= provider.callback() as never)),
      (err: Error) => done(err),
    );
  };

  private pass(req: FastifyRequest, reply: FastifyReply, url: string, handle: (req: unknown, res: unknown) => void): void {
    // Headers set so far (request id, rate limits) go out with the provider's answer.
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value as string);
    reply.hijack();
    req.raw.url = url;
    // Read by Koa as a proxy's headers (the provider is built with `proxy` on).
    Object.assign(req.raw.headers, { host: this.origin.host, 'x-forwarded-host': this.origin.host, 'x-forwarded-proto': this.origin.proto, 'x-forwarded-for': req.ip });
    handle(req.raw, reply.raw);
  }
}
