/**
 * Hands the provider's own paths to oidc-provider, raw: a Fastify onRequest hook (after the
 * credential and rate-limit hooks, so `/auth/token` is rate limited like every path) takes the
 * request before any body parser has read it and passes Node's req/res to `provider.callback()`.
 * Aliases of the SPEC are rewritten to the provider's path first. Everything else under /auth
 * stays Nest's (sign-in, consent, clients, grants pages).
 */
import { Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { OIDC_ROUTES } from './oidc-provider.factory';
import { OidcProvider } from './oidc-provider';

/** Path → the provider's path (the same for its own routes). */
const PATHS = new Map<string, string>([
  ['/.well-known/openid-configuration', '/.well-known/openid-configuration'],
  ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'],
  ['/.well-known/jwks.json', OIDC_ROUTES.jwks],
  ['/auth/token', OIDC_ROUTES.token],
  ['/auth/oauth2/authorize', OIDC_ROUTES.authorization],
  ['/auth/device/token', OIDC_ROUTES.token],
  // Userinfo is Nest's (userinfo.controller.ts): the provider's refuses tokens for the API. So is
  // the user-code page (device.controller.ts); /auth/device is the provider's for POST only.
  ...Object.values(OIDC_ROUTES)
    .filter((p) => p !== OIDC_ROUTES.userinfo && p !== OIDC_ROUTES.code_verification && p !== OIDC_ROUTES.device_authorization)
    .map((p): [string, string] => [p, p]),
]);

/**
 * The provider's sub-paths: registration management (`/auth/oauth2/register/{client_id}`), the
 * authorization's resume after an interaction (`/auth/authorize/{uid}`, not our
 * `/auth/authorize/decision`) and the logout confirmation.
 */
const SUB_PATHS = new RegExp(`^(${OIDC_ROUTES.registration}/[^/]+|${OIDC_ROUTES.authorization}/(?!decision$)[^/]+|${OIDC_ROUTES.end_session}/[^/]+)$`);

@Injectable()
export class OidcMount {
  private handle?: (req: unknown, res: unknown) => void;

  constructor(private readonly provider: OidcProvider) {}

  /** A fastify onRequest hook. */
  readonly onRequest = (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void => {
    const query = req.url.indexOf('?');
    const path = (query === -1 ? req.url : req.url.slice(0, query)).replace(/\/+$/, '') || '/';
    const target =
      PATHS.get(path) ?? (SUB_PATHS.test(path) ? path : path === OIDC_ROUTES.device_authorization && req.method === 'POST' ? path : undefined);
    if (!target) return done();
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
    handle(req.raw, reply.raw);
  }
}
