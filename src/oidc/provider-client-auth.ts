/**
 * Client authentication at the provider's endpoints that take it (token, device authorization,
 * introspection, revocation): how long a client assertion may be good for, the errors RFC 6749
 * names where the provider answers `invalid_request`, and which clients a page in a browser may
 * call them as (CORS).
 */
import type { Client, KoaContextWithOIDC } from 'oidc-provider';
import { DEVICE_GRANT_TYPE } from './device-polling';

/** Clock skew allowed between the provider and a token's or assertion's issuer (the provider's default). */
export const CLOCK_TOLERANCE_S = 15;

/**
 * Longest a client assertion (`private_key_jwt`, `client_secret_jwt`) may still be good for when
 * presented. Its `jti` is kept until it expires, to refuse a replay (RFC 7523 3, item 7), so an
 * assertion made to last a year kept a row a year, and one leaked would be good as long;
 * libraries make them for a minute or so (openid-client: 60 s).
 */
export const MAX_ASSERTION_LIFETIME_S = 600;

/** RFC 7523 3 lets the server refuse an assertion whose `exp` is unreasonably far off, or that claims to be issued in the future. */
export function refuseLongLivedAssertion(claims: { exp?: unknown; iat?: unknown }, errors: typeof import('oidc-provider').errors): void {
  const now = Math.floor(Date.now() / 1000);
  if (typeof claims.exp === 'number' && claims.exp > now + MAX_ASSERTION_LIFETIME_S + CLOCK_TOLERANCE_S) {
    throw new errors.InvalidClientAuth(`the client_assertion must expire within ${MAX_ASSERTION_LIFETIME_S} seconds`);
  }
  if (typeof claims.iat === 'number' && claims.iat > now + CLOCK_TOLERANCE_S) throw new errors.InvalidClientAuth('the client_assertion is issued in the future (iat)');
}

/** The endpoints that authenticate a client (oidc-provider's lib/shared/client_auth.js). */
const CLIENT_ROUTES = new Set(['token', 'device_authorization', 'introspection', 'revocation']);

/**
 * The provider's descriptions of an Authorization header it could not take client credentials
 * from (not Basic, not base64 of `id:secret`, not form-encoded, an empty secret): its only sign
 * of these cases, as of a request without client authentication (lib/shared/client_auth.js of
 * the pinned version; the tests check each).
 */
const NO_CLIENT_AUTHENTICATION = 'no client authentication mechanism provided';
const UNREADABLE_BASIC_CREDENTIALS = new Set([
  'invalid authorization header value format',
  'client_id and client_secret in the authorization header are not properly encoded',
  'client_secret must be provided in the Authorization header',
]);

/**
 * RFC 6749 5.2 (and RFC 8628 3.2, RFC 7662 2.3) where the provider answers `invalid_request`:
 * - a grant type the client is not registered for, at the token or device authorization
 *   endpoint, is `unauthorized_client`;
 * - a request without any client authentication, or whose Authorization header holds no client
 *   credentials the provider can read, is `invalid_client` (the client failed to authenticate).
 * An `invalid_client` is 401 with `WWW-Authenticate: Basic` when the client tried the
 * Authorization header, as RFC 6749 requires, and 400 otherwise, where SPEC 7 lists it (the
 * provider answers 401 for a wrong secret sent in the body too).
 */
export async function reportClientErrors(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next();
  const body = ctx.body as { error?: string; error_description?: string } | undefined;
  const route = ctx.oidc?.route;
  if (!route || !CLIENT_ROUTES.has(route) || typeof body?.error !== 'string') return;
  const { client } = ctx.oidc;
  const grantType = route === 'device_authorization' ? DEVICE_GRANT_TYPE : route === 'token' ? (ctx.oidc.params as { grant_type?: unknown } | undefined)?.grant_type : undefined;
  if (body.error === 'invalid_request' && client && typeof grantType === 'string' && !client.grantTypeAllowed(grantType)) body.error = 'unauthorized_client';
  if (body.error === 'invalid_request' && !client && body.error_description === NO_CLIENT_AUTHENTICATION) {
    Object.assign(body, { error: 'invalid_client', error_description: 'client authentication is required (HTTP Basic, or client_id for a public client)' });
  }
  if (body.error === 'invalid_request' && !client && UNREADABLE_BASIC_CREDENTIALS.has(body.error_description ?? '')) body.error = 'invalid_client';
  if (body.error !== 'invalid_client') return;
  if (ctx.get('authorization')) {
    ctx.status = 401;
    ctx.set('WWW-Authenticate', 'Basic realm="svc"');
  } else {
    ctx.status = 400;
    ctx.remove('WWW-Authenticate');
  }
}

/**
 * Which page may call the token, revocation, introspection and device endpoints from a browser
 * (CORS): a public client's, from the origin of one of its redirect URIs; never a confidential
 * client's (its secret has no business in a page) nor an opaque origin. The provider's default,
 * written out: left unset, it prints a plain-text notice among stdout's JSON log lines at the
 * first cross-origin call.
 */
export function browserMayCall(origin: string, client: Client): boolean {
  if (origin === 'null' || client.clientAuthMethod !== 'none') return false;
  return (client.redirectUris ?? []).some((uri) => URL.canParse(uri) && new URL(uri).origin === origin);
}
