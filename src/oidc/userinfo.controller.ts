/**
 * OIDC userinfo (SPEC 5.3, 5.6): `POST` and `GET /auth/oauth2/userinfo` (the advertised
 * endpoint; OIDC Core wants both methods) and `GET /auth/userinfo`. Served here rather than by oidc-provider, whose userinfo refuses an
 * access token issued for a resource server, and every token of this service is for its API.
 * The claims follow the OIDC scopes the access token was issued with (OIDC Core 5.3, 5.4;
 * provider-scopes.ts puts them beside its API scopes), as far as its grant still holds them:
 * a token without `openid` is 403 `insufficient_scope` whatever else its grant holds; `sub`
 * always, `profile`: name, preferred_username, picture; `email`: email, email_verified. A token
 * the API refuses (expired, revoked, of a tenant's client for another tenant's user) is 401
 * `invalid_token` here. A POST may send the token as the form's `access_token` (RFC 6750 2.2)
 * rather than in the header, not both. Errors in RFC 6750 form, those refused before the handler (a body it cannot
 * take) included.
 *
 * A browser app on any origin may call it (Fetch standard CORS): the token comes in the
 * Authorization header, never in a cookie, so a page can learn nothing here it did not already
 * hold a token for. Every answer carries `Access-Control-Allow-Origin: *` and lets the app read
 * WWW-Authenticate (set by oidc-mount.ts for these paths, so the refusals before the handler have
 * them too), and OPTIONS answers the preflight an Authorization header needs. Credentials
 * (cookies) are never allowed; the account pages, which a cookie signs in to, answer no preflight.
 */
import { applyDecorators, Controller, Get, HttpCode, Options, Post, Res, UseFilters } from '@nestjs/common';
import { ApiExtension, ApiOkResponse, ApiOperation, ApiProperty, ApiPropertyOptional, ApiResponse, ApiSecurity, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authorizationOnce, bearerToken } from '../auth/credential.hook';
import { Accepts, LenientRequest, Public } from '../auth/decorators';
import { OAuthErrorFormFilter } from '../common/exception.filter';
import { NO_STORE_EXTENSION } from '../common/security-headers';
import { AppConfig } from '../config/app-config';
import { UsersService } from '../users/users.service';
import { findAccessToken, servesUser } from './oauth-tokens';
import { OidcProvider } from './oidc-provider';
import { OAUTH_ERROR_SCHEMA } from './openapi-paths';

const FORM = 'application/x-www-form-urlencoded';

/** The userinfo routes and the methods each serves. */
export const USERINFO_METHODS = new Map([
  ['/auth/userinfo', 'GET'],
  ['/auth/oauth2/userinfo', 'GET, POST'],
]);

/** On every userinfo answer (oidc-mount.ts): any origin, and the RFC 6750 challenge readable. */
export const USERINFO_CORS = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': 'WWW-Authenticate' } as const;

/** As long as oidc-provider lets a browser keep its endpoints' preflights. */
const PREFLIGHT_MAX_AGE = '3600';

const ApiPreflight = (path: string) =>
  applyDecorators(
    ApiExtension('x-error-format', 'oauth'),
    ApiOperation({ summary: `CORS preflight of ${path}: any origin may send ${USERINFO_METHODS.get(path)} with an Authorization header (no cookies)` }),
    ApiResponse({
      status: 204,
      description: 'Access-Control-Allow-Origin: *, the methods, Access-Control-Allow-Headers: Authorization',
      headers: {
        'Access-Control-Allow-Origin': { schema: { type: 'string', enum: ['*'] } },
        'Access-Control-Allow-Methods': { schema: { type: 'string', enum: [USERINFO_METHODS.get(path)!] } },
        'Access-Control-Allow-Headers': { schema: { type: 'string', enum: ['Authorization'] } },
        'Access-Control-Max-Age': { schema: { type: 'string', enum: [PREFLIGHT_MAX_AGE] } },
      },
    }),
  );

/** The claims userinfo answers (SPEC 5.6), by the OIDC scopes of the token. */
export class UserinfoClaims {
  @ApiProperty({ description: 'The user\'s id' }) sub: string;
  @ApiPropertyOptional({ description: 'With profile' }) name?: string;
  @ApiPropertyOptional({ description: 'With profile: the user\'s email address' }) preferred_username?: string;
  @ApiPropertyOptional({ description: 'With profile, when the user has one' }) picture?: string;
  @ApiPropertyOptional({ description: 'With email' }) email?: string;
  @ApiPropertyOptional({ description: 'With email: whether the tenant\'s admins vouch for the address (PATCH /users/{id}); the service sends no mail' }) email_verified?: boolean;
}

const NOT_STORED = { 'Cache-Control': { $ref: '#/components/headers/Cache-Control' } };

/** An access token issued with `openid` (not an API key), its errors in RFC 6750 form, and claims no cache may keep. */
const ApiUserinfo = () =>
  applyDecorators(
    ApiExtension('x-error-format', 'oauth'),
    ApiSecurity('oauth2', ['openid']),
    ApiSecurity('openIdConnect', ['openid']),
    ApiExtension(NO_STORE_EXTENSION, true),
    ApiOkResponse({ type: UserinfoClaims, description: 'The claims: sub, and those of the token\'s profile and email scopes' }),
    ApiResponse({ status: 401, description: 'No bearer token (invalid_request), or one not valid here (invalid_token); see WWW-Authenticate', schema: OAUTH_ERROR_SCHEMA, headers: NOT_STORED }),
    ApiResponse({ status: 403, description: 'The access token was not issued for openid (insufficient_scope)', schema: OAUTH_ERROR_SCHEMA, headers: NOT_STORED }),
  );

@ApiTags('oauth')
@Public()
@UseFilters(OAuthErrorFormFilter)
@Controller('auth')
export class UserinfoController {
  constructor(
    private readonly oidc: OidcProvider,
    private readonly users: UsersService,
    private readonly config: AppConfig,
  ) {}

  @Get(['userinfo', 'oauth2/userinfo'])
  @ApiOperation({ summary: 'OIDC claims of the signed-in user, by the scopes of the token (bearer: an svc_at_ token issued with openid)' })
  @ApiUserinfo()
  get(@LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.answer(req, reply);
  }

  @Post('oauth2/userinfo')
  @HttpCode(200)
  @Accepts(FORM)
  @ApiOperation({ summary: 'OIDC userinfo endpoint (as advertised in discovery); same as GET /auth/userinfo' })
  @ApiUserinfo()
  post(@LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.answer(req, reply);
  }

  @Options('userinfo')
  @ApiPreflight('/auth/userinfo')
  preflight(@LenientRequest() _req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.allow(reply, '/auth/userinfo');
  }

  @Options('oauth2/userinfo')
  @ApiPreflight('/auth/oauth2/userinfo')
  preflightOAuth2(@LenientRequest() _req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    return this.allow(reply, '/auth/oauth2/userinfo');
  }

  /** The preflight's answer, to any origin (the Access-Control-Allow-Origin is already set: see the header). */
  private async allow(reply: FastifyReply, path: string): Promise<void> {
    const methods = USERINFO_METHODS.get(path)!;
    await reply
      .status(204)
      .header('Access-Control-Allow-Methods', methods)
      .header('Access-Control-Allow-Headers', 'Authorization')
      .header('Access-Control-Max-Age', PREFLIGHT_MAX_AGE)
      .header('Allow', `${methods}, OPTIONS`)
      .send();
  }

  private async answer(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const header = bearerToken(authorizationOnce(req.raw));
    // RFC 6750 2.2: a POST may carry the token as the form's `access_token` instead (OIDC Core
    // 5.3.1 sends it per RFC 6750 2, which older relying parties read as the body); one way only.
    const form = req.method === 'POST' ? (req.body as Record<string, unknown> | undefined)?.access_token : undefined;
    if (form !== undefined && (header || typeof form !== 'string' || !form)) {
      return this.fail(reply, 400, 'invalid_request', 'Send the access token once: in the Authorization header or as the form\'s access_token');
    }
    const token = header ?? (form as string | undefined);
    if (!token) return this.fail(reply, 401, 'invalid_request', 'A bearer access token is required', 'Bearer realm="svc"');
    const provider = await this.oidc.get();
    // The API's rule, so userinfo and the API agree on every token (an expired one included).
    const at = await findAccessToken(provider, token, this.config.baseUrl);
    if ('error' in at) return this.fail(reply, 401, 'invalid_token', at.error === 'expired_token' ? 'The access token expired' : 'The access token is not valid for userinfo');
    const { accountId } = at.token;
    if (!accountId || !at.grant) return this.fail(reply, 401, 'invalid_token', 'The access token is not valid for userinfo');
    // The API's rule too (oauth-tokens.ts): a tenant's client serves its own users only, so a token
    // of a grant made for another tenant's user before that rule is no token here either.
    const user = await this.users.byId(accountId);
    if (user && !servesUser(at.client, user)) return this.fail(reply, 401, 'invalid_token', 'The access token is not valid for userinfo');
    const scopes = new Set(at.scopes);
    if (!scopes.has('openid')) return this.fail(reply, 403, 'insufficient_scope', 'The access token was not issued for openid', undefined, 'openid');
    if (!user) return this.fail(reply, 401, 'invalid_token', 'The user no longer exists');
    await reply
      .header('Cache-Control', 'no-store')
      .send({
        sub: user.id,
        ...(scopes.has('profile') ? { name: user.name, preferred_username: user.email, ...(user.picture ? { picture: user.picture } : {}) } : {}),
        ...(scopes.has('email') ? { email: user.email, email_verified: user.email_verified } : {}),
      });
  }

  /** RFC 6750 3: the challenge carries the error (and the `scope` needed), except when no token was presented at all (`challenge`). */
  private async fail(reply: FastifyReply, status: number, error: string, description: string, challenge?: string, scope?: string): Promise<void> {
    await reply
      .status(status)
      .header('WWW-Authenticate', challenge ?? `Bearer realm="svc", error="${error}", error_description="${description}"${scope ? `, scope="${scope}"` : ''}`)
      .header('Cache-Control', 'no-store')
      .send({ error, error_description: description });
  }
}
