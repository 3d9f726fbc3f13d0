/**
 * Builds the oidc-provider instance: issuer SVC_BASE_URL, storage in PostgreSQL (oidc-adapter.ts),
 * RS256 signing keys from signing-keys.ts, cookie keys derived from the service key, the SPEC's
 * paths (mounted by oidc-mount.ts), `code` as the only response type with PKCE S256 required of
 * every client, no development interactions, and the API's scope grammar (scopes.ts) as the
 * scopes of one resource server, the service's API, which every access token is for.
 *
 * Access tokens are opaque `svc_at_…`, refresh tokens `svc_rt_…`: oidc-provider has no option
 * for a prefix, so the models' `generateTokenId` is wrapped (checked by the tests against this
 * pinned version).
 *
 * Tokens belong to their grant, not to the browser session they were issued in: signing out, or
 * another sign-in in that browser, leaves connected apps alone (only revoking the grant ends them).
 * A loopback redirect URI (127.0.0.1, [::1]) matches whatever port a request names (RFC 8252 7.3).
 */
import type { Provider as ProviderType, Client, Configuration, ClientMetadata, KoaContextWithOIDC } from 'oidc-provider';
import type { DataSource } from 'typeorm';
import { OAUTH_ACCESS_TOKEN_PREFIX, OAUTH_REFRESH_TOKEN_PREFIX } from '../auth/principal';
import { announcesBody, bodyParserError, readBodyText } from '../common/body-parsing';
import { cutText, textIssue } from '../common/input-policy';
import { LOOPBACK_HOSTS } from '../common/target-policy';
import { isDatabaseTrouble, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../common/unavailable';
import { codePointLength } from '../common/validation';
import { AppConfig } from '../config/app-config';
import type { SecretBox } from '../crypto/secret-box';
import { isUserName } from '../users/users.dto';
import type { UsersService } from '../users/users.service';
import { DEVICE_GRANT_TYPE, installDevicePolling } from './device-polling';
import { providerInternals } from './provider-internals';
import { isUsedRefreshToken, postgresAdapter, textRefused, unstorableText } from './oidc-adapter';
import { clearedAccountCookie } from './account-session';
import { logoutPage, messagePage, providerErrorPage, SELF_SUBMITTING_CSP, selfSubmittingPage, shownAppName } from './pages';
import { setPage } from './send-page';
import { CREDENTIAL_CLAIMS, currentClaim, newClientSecret } from './client-secret-claim';
import { acceptPreviousSecret, previousSecretClaim, tokenGoodUntil } from './previous-client-secret';
import { repeatedLists, scopesForUser, uselessClientProblem } from './client-registration';
import { isApiScope, OIDC_SCOPES, registeredScopes, scopesStillHeld, withinUserRole } from './scopes';
import type { PrivateJwk } from './signing-keys';
import { MAX_JWKS_BYTES, providerFetch } from './provider-fetch';
import { prepareTokenRequestLimit, TokenRequestLimit, useTokenRequestLimit } from './token-rate-limit';

/** The SPEC's paths of the provider's own endpoints. */
export const OIDC_ROUTES = {
  authorization: '/auth/authorize',
  token: '/auth/oauth2/token',
  userinfo: '/auth/oauth2/userinfo',
  revocation: '/auth/oauth2/revoke',
  introspection: '/auth/oauth2/introspect',
  registration: '/auth/oauth2/register',
  jwks: '/auth/jwks',
  end_session: '/auth/logout',
  device_authorization: '/auth/device',
  // The provider's own user-code pages stay unreachable: GET /auth/device is the service's (device.controller.ts).
  code_verification: '/auth/device/verify',
} as const;

/** Client metadata the service adds: the tenant an admin-registered client belongs to, and its default extension grant (SPEC 5.4). */
export const EXTRA_CLIENT_METADATA = ['tenant_id', 'extension_permissions'] as const;

export interface ProviderDeps {
  config: AppConfig;
  db: DataSource;
  secrets: SecretBox;
  users: UsersService;
  keys: PrivateJwk[];
  cookieKey: Buffer;
  /** The token endpoints' tight limit per address (token-rate-limit.ts); none while rate limits are off. */
  tokenLimit?: TokenRequestLimit;
}

/**
 * The API's scopes, as a resource server, for this request: those asked for (an authorization
 * or client-credentials request) and those the grant holds (a code or refresh exchange), kept
 * to what the client registered when it registered any.
 */
function apiScopes(ctx: KoaContextWithOIDC, client: { scope?: string }, resource: string): string {
  const asked = String(ctx.oidc.params?.scope ?? '').split(' ');
  const grant = ctx.oidc.entities?.Grant as { getResourceScope(resource: string): string } | undefined;
  const granted = grant ? grant.getResourceScope(resource).split(' ') : [];
  const registered = registeredScopes(client);
  return [...new Set([...asked, ...granted])].filter((s) => isApiScope(s) && (!registered || registered.has(s))).join(' ');
}

const SCOPES_GRANTED = 'openid, profile, email, or API scopes such as core.note:read';

/**
 * RFC 6749 3.3, 4.1.2.1 and 5.1 (OAuth 2.1 3.2.2.1): a request whose `scope` names nothing this
 * client can be given is `invalid_scope` before anything else happens. `apiScopes` leaves out
 * unknown values and API scopes the client did not register (and the provider an
 * `offline_access` without `prompt=consent`); were nothing left, the code flow would send the user
 * to sign in only to answer `access_denied`, and client credentials would issue a token with no
 * scope where one was asked. The authorization and device endpoints have no default scope (the
 * user must be asked about something); client credentials asking for none keep theirs, a token
 * with the client's extension grant alone. An API scope the client did not register is named as
 * the provider names such an OIDC scope.
 */
function refuseUnusableScope(ctx: KoaContextWithOIDC, client: { scope?: string }, api: string, errors: typeof import('oidc-provider').errors): void {
  const { route } = ctx.oidc;
  const params = ctx.oidc.params as { scope?: string; grant_type?: string } | undefined;
  if (route === 'authorization' || route === 'device_authorization') {
    if (api || ctx.oidc.requestParamOIDCScopes.size) return;
  } else if (route === 'token' && params?.grant_type === 'client_credentials') {
    // Its tokens carry API scopes only (the resource server's): an OIDC scope gives them nothing.
    if (api || !params.scope) return;
  } else {
    return;
  }
  // As sent: the provider may have dropped some of it from the parameters by now.
  const sent = route === 'authorization' ? ctx.query.scope : route === 'device_authorization' ? ctx.oidc.body?.scope : params?.scope;
  const asked = (typeof sent === 'string' ? sent : '').split(' ').filter(Boolean);
  // The error's `scope` names what was refused; a request without one has nothing to name.
  if (!asked.length) throw Object.assign(new errors.InvalidScope(`scope is required: ${SCOPES_GRANTED}`, ''), { scope: undefined });
  const registered = registeredScopes(client);
  const unregistered = asked.find((s) => isApiScope(s) && registered && !registered.has(s));
  if (unregistered) throw new errors.InvalidScope('requested scope is not allowed', unregistered);
  const wanted = route === 'token' ? 'client credentials take API scopes such as core.note:read' : SCOPES_GRANTED;
  throw new errors.InvalidScope(`none of the requested scopes can be granted: ${wanted}`, asked.join(' '));
}

const REFRESH_TOKEN_TTL = 30 * 24 * 3600;
const GRANT_TTL = 365 * 24 * 3600;

/**
 * A token's lifetime, `ttl` seconds at most, and no longer than its grant has left: a token
 * issued near the end of its grant would otherwise be handed out for time the grant does not have
 * (a refresh token for a month, an access token whose `expires_in` outlasts what it can do). Every
 * request that issues one has the grant among its entities.
 */
function withinGrant(ctx: KoaContextWithOIDC | undefined, token: { grantId?: string }, ttl: number): number {
  const grant = ctx?.oidc?.entities?.Grant;
  if (!grant?.exp || grant.jti !== token.grantId) return ttl;
  // The provider takes whole seconds, at least one; a grant with none left was refused before.
  return Math.max(1, Math.min(ttl, grant.exp - Math.floor(Date.now() / 1000)));
}

/** The grants a request's revocations deleted, with their accounts (see `revokedGrantAccount`). */
const REVOKED_GRANTS = Symbol('revokedGrants');

function noteRevokedGrant(ctx: KoaContextWithOIDC | undefined, grantId: string, accountId: string): void {
  if (!ctx) return;
  const state = ctx.state as { [REVOKED_GRANTS]?: Map<string, string> };
  (state[REVOKED_GRANTS] ??= new Map()).set(grantId, accountId);
}

/**
 * The account of a grant this request's revocation deleted, for the `grant.revoked` event's audit:
 * the provider announces a revocation after the grant is gone, and a reused code's before the code
 * is among the request's entities. Undefined when this request deleted no such grant (another
 * request of a race to use one code or refresh token already had): one revocation, one answer.
 */
export function revokedGrantAccount(ctx: KoaContextWithOIDC, grantId: string): string | undefined {
  return (ctx.state as { [REVOKED_GRANTS]?: Map<string, string> })[REVOKED_GRANTS]?.get(grantId);
}

/**
 * Revocations that leave the grant and its other tokens alone, where the provider would take them
 * all: an access token's at the revocation endpoint (SPEC 5.7: that token only), and a logout's
 * (grants outlive sessions, SPEC 5.8; a session stored while `expiresWithSession` was the
 * provider's default would still have its authorizations revoked).
 */
function keepsGrant(ctx: KoaContextWithOIDC | undefined): boolean {
  const route = ctx?.oidc?.route;
  return (route === 'revocation' && !!ctx!.oidc.entities.AccessToken) || route === 'end_session_confirm';
}

/** Clock skew allowed between the provider and a token's or assertion's issuer (the provider's default). */
const CLOCK_TOLERANCE_S = 15;

/**
 * Longest a client assertion (`private_key_jwt`, `client_secret_jwt`) may still be good for when
 * presented. Its `jti` is kept until it expires, to refuse a replay (RFC 7523 3, item 7), so an
 * assertion made to last a year kept a row a year, and one leaked would be good as long;
 * libraries make them for a minute or so (openid-client: 60 s).
 */
export const MAX_ASSERTION_LIFETIME_S = 600;

/** RFC 7523 3 lets the server refuse an assertion whose `exp` is unreasonably far off, or that claims to be issued in the future. */
function refuseLongLivedAssertion(claims: { exp?: unknown; iat?: unknown }, errors: typeof import('oidc-provider').errors): void {
  const now = Math.floor(Date.now() / 1000);
  if (typeof claims.exp === 'number' && claims.exp > now + MAX_ASSERTION_LIFETIME_S + CLOCK_TOLERANCE_S) {
    throw new errors.InvalidClientAuth(`the client_assertion must expire within ${MAX_ASSERTION_LIFETIME_S} seconds`);
  }
  if (typeof claims.iat === 'number' && claims.iat > now + CLOCK_TOLERANCE_S) throw new errors.InvalidClientAuth('the client_assertion is issued in the future (iat)');
}

function refuseUnsafeClient(metadata: ClientMetadata, errors: typeof import('oidc-provider').errors, registration: boolean): void {
  // RFC 6749 4.4: client_credentials is for confidential clients only. A public client's id is
  // no secret, so anyone knowing it would get the tenant's tokens.
  // Not checked by the provider yet (the validator runs first): any JSON may stand there.
  const grantTypes: unknown[] = Array.isArray(metadata.grant_types) ? metadata.grant_types : [];
  if (metadata.token_endpoint_auth_method === 'none' && grantTypes.includes('client_credentials')) {
    throw new errors.InvalidClientMetadata('client_credentials needs a confidential client (token_endpoint_auth_method other than none)');
  }
  // A client-credentials token acts in its client's tenant; an openly registered client has none,
  // so its tokens would be refused by the API while introspection called them active. At
  // registration only: a client registered before this rule keeps loading, for its users'
  // consents (its client-credentials tokens were never of use).
  if (registration && !metadata.tenant_id && grantTypes.includes('client_credentials')) {
    throw new errors.InvalidClientMetadata('client_credentials needs a client of a tenant: an admin registers it with POST /auth/clients');
  }
  // OAuth 2.1 and RFC 8252 8.3: a code or a logout may go back over plain http to the user's own
  // machine only; elsewhere anyone on the path could read it.
  for (const uri of redirectUrisOf(metadata)) {
    const url = URL.canParse(uri) ? new URL(uri) : undefined;
    if (url?.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname)) {
      // The class takes no description of its own (its default speaks of a redirect_uri mismatch).
      throw Object.assign(new errors.InvalidRedirectUri(), {
        error_description: `${uri}: plain http is allowed only to a loopback host (127.0.0.1, [::1], localhost); use https`,
      });
    }
  }
}

/** The redirect and post-logout redirect URIs of metadata not yet checked by the provider (the validator runs first). */
function redirectUrisOf(metadata: ClientMetadata): string[] {
  const lists: unknown[] = [metadata.redirect_uris, metadata.post_logout_redirect_uris];
  return lists.flatMap((list) => (Array.isArray(list) ? list.filter((uri): uri is string => typeof uri === 'string') : []));
}

/** The limits POST /auth/clients documents (clients.dto.ts): a list takes at most 20 entries, a URI 2000 characters. */
const MAX_LIST_ENTRIES = 20;
const MAX_URI_LENGTH = 2000;

/** An authority's user information and port as written (URL normalizes them away: `:08080` reads as 8080). */
const AUTHORITY = /^[a-z][a-z0-9+.-]*:\/\/(?<userinfo>[^/?#@]*@)?(?:\[[^\]/?#]*\]|[^/?#:]*)(?::(?<port>[^/?#]*))?/i;

/** Why open registration refuses a redirect URI the provider's own rules let through, or undefined. */
function redirectUriProblem(uri: string): string | undefined {
  if (uri.length > MAX_URI_LENGTH) return `longer than ${MAX_URI_LENGTH} characters`;
  const url = URL.parse(uri);
  if (!url) return undefined; // the provider's own message
  const scheme = url.protocol.slice(0, -1);
  // OAuth 2.1 drops the out-of-band "redirect"; RFC 8252 7.1: a private-use scheme is a reverse domain name (com.example.app).
  if (scheme === 'urn') return 'out-of-band (urn:) redirects are not supported: use a loopback or a reverse-domain private-use URI (RFC 8252)';
  if (scheme !== 'http' && scheme !== 'https' && !scheme.includes('.')) return `a private-use scheme must be a reverse domain name such as com.example.app (RFC 8252 7.1), not ${scheme}`;
  const authority = AUTHORITY.exec(uri)?.groups;
  // RFC 6749 3.1.2 wants an absolute URI to send a code to, not credentials for it.
  if (authority?.userinfo !== undefined || url.username || url.password) return 'must not carry a user name or password';
  if (authority?.port !== undefined && !/^[1-9][0-9]{0,4}$/.test(authority.port)) return 'a port, when given, is 1-65535 written without leading zeros';
  return undefined;
}

/** POST /auth/clients' limits on the other text it takes (clients.dto.ts), in characters as it counts them (codePointLength). */
const MAX_TEXT_LENGTHS = { client_uri: 2000, logo_uri: 2000, policy_uri: 2000, tos_uri: 2000, scope: 4000 } as const;
const MAX_CONTACT_LENGTH = 320;

/** The name rule (isUserName), as POST /auth/clients words it for `client_name` (IsUserName's message). */
const CLIENT_NAME_RULE = 'client_name must be 1 to 200 characters, not blank, without control characters or bidirectional override characters';

/**
 * Open registration's limits beyond the provider's rules (RFC 7591 error form): a client that
 * could get a token (uselessClientProblem), list sizes, URI lists without repeats and text lengths as POST /auth/clients takes them, the display name the pages show (consent, device,
 * sign-in, logout, connected apps) under the service's name rule as there, and redirect URIs of the
 * forms `redirectUriProblem` refuses. At registration only, like the tenant rule of
 * `refuseUnsafeClient`: a client stored before keeps loading.
 */
function refuseOddRegistration(metadata: ClientMetadata, errors: typeof import('oidc-provider').errors): void {
  const useless = uselessClientProblem(metadata);
  if (useless) throw new errors.InvalidClientMetadata(`${useless.field} ${useless.message}`);
  for (const [key, value] of Object.entries(metadata)) {
    if (Array.isArray(value) && value.length > MAX_LIST_ENTRIES) throw new errors.InvalidClientMetadata(`${key} takes at most ${MAX_LIST_ENTRIES} entries`);
  }
  // Subjects are public (subject_types_supported), so a sector means nothing; the provider would
  // fetch it, a registrant's URL, while registration holds its transaction (oidc-provider.ts).
  if (metadata.sector_identifier_uri !== undefined) throw new errors.InvalidClientMetadata('sector_identifier_uri is not supported: subjects are public');
  const [repeated] = repeatedLists(metadata);
  if (repeated) throw new errors.InvalidClientMetadata(`${repeated.field} ${repeated.message}`);
  const name: unknown = metadata.client_name;
  // Not a string: the provider's own message. NUL or a lone surrogate: the input policy's invalid_request (oidc-adapter.ts).
  if (typeof name === 'string' && !textIssue(name) && !isUserName(name)) throw new errors.InvalidClientMetadata(CLIENT_NAME_RULE);
  for (const [key, max] of Object.entries(MAX_TEXT_LENGTHS)) {
    const value: unknown = metadata[key];
    if (typeof value === 'string' && codePointLength(value) > max) throw new errors.InvalidClientMetadata(`${key} takes at most ${max} characters`);
  }
  const contacts: unknown = metadata.contacts;
  if (Array.isArray(contacts) && contacts.some((c) => typeof c === 'string' && codePointLength(c) > MAX_CONTACT_LENGTH)) {
    throw new errors.InvalidClientMetadata(`contacts: an address takes at most ${MAX_CONTACT_LENGTH} characters`);
  }
  for (const uri of redirectUrisOf(metadata)) {
    const problem = redirectUriProblem(uri);
    if (problem) {
      throw Object.assign(new errors.InvalidRedirectUri(), { error_description: `${uri.length > 100 ? `${cutText(uri, 100)}…` : uri}: ${problem}` });
    }
  }
}

/**
 * Which page may call the token, revocation, introspection and device endpoints from a browser
 * (CORS): a public client's, from the origin of one of its redirect URIs; never a confidential
 * client's (its secret has no business in a page) nor an opaque origin. The provider's default,
 * written out: left unset, it prints a plain-text notice among stdout's JSON log lines at the
 * first cross-origin call.
 */
function browserMayCall(origin: string, client: Client): boolean {
  if (origin === 'null' || client.clientAuthMethod !== 'none') return false;
  return (client.redirectUris ?? []).some((uri) => URL.canParse(uri) && new URL(uri).origin === origin);
}

export async function createProvider(deps: ProviderDeps): Promise<ProviderType> {
  const { default: Provider, errors, interactionPolicy } = await import('oidc-provider');
  const { config } = deps;
  const policy = interactionPolicy.base();
  // OIDC Core 3.1.2.1's select_account (refused as unsupported otherwise): first, so the sign-in
  // page is shown whether or not the browser is signed in; there the user goes on with the account
  // signed in or signs in with another (interactions.controller.ts).
  policy.add(new interactionPolicy.Prompt({ name: 'select_account', requestable: true }), 0);
  const resource = config.baseUrl;
  const configuration: Configuration = {
    // A code or refresh token two requests used at once: the loser's is a reuse (the adapter has
    // revoked the grant), reported as the provider reports one it sees in sequence.
    adapter: postgresAdapter(
      deps.db,
      deps.secrets,
      async (model, grantId) => {
        const ctx = Provider.ctx as KoaContextWithOIDC | undefined;
        if (ctx && grantId) ctx.oidc.provider.emit('grant.revoked', ctx, grantId);
        const what = { AuthorizationCode: 'authorization code', RefreshToken: 'refresh token', DeviceCode: 'device code' }[model] ?? 'grant';
        throw new errors.InvalidGrant(`${what} already used`);
      },
      () => keepsGrant(Provider.ctx as KoaContextWithOIDC | undefined),
      (grantId, accountId) => noteRevokedGrant(Provider.ctx as KoaContextWithOIDC | undefined, grantId, accountId),
    ),
    revokeGrantPolicy: (ctx) => !keepsGrant(ctx),
    clientBasedCORS: (_ctx, origin, client) => browserMayCall(origin, client),
    jwks: { keys: deps.keys as never },
    // SPEC 5.6: RS256 is the one algorithm advertised, and so the one a client may register.
    enabledJWA: { idTokenSigningAlgValues: ['RS256'], userinfoSigningAlgValues: ['RS256'], introspectionSigningAlgValues: ['RS256'], authorizationSigningAlgValues: ['RS256'] },
    cookies: { keys: [deps.cookieKey.toString('base64url')] },
    scopes: [...OIDC_SCOPES],
    claims: { openid: ['sub'], profile: ['name', 'preferred_username', 'picture'], email: ['email', 'email_verified'] },
    responseTypes: ['code'],
    pkce: { required: () => true },
    clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic', id_token_signed_response_alg: 'RS256' },
    extraClientMetadata: {
      properties: [...EXTRA_CLIENT_METADATA],
      validator(ctx, key, value, metadata) {
        // Rules of the client as a whole, beyond oidc-provider's own; checked on every load too, so
        // a client stored before a rule cannot get around it (but for one, see refuseUnsafeClient).
        if (key === 'tenant_id') refuseUnsafeClient(metadata, errors, ctx?.oidc?.route === 'registration');
        if (key === 'tenant_id' && ctx?.oidc?.route === 'registration') refuseOddRegistration(metadata, errors);
        // Open registration (RFC 7591) makes tenant-less clients; only an admin (POST /auth/clients) gives one a tenant or an extension grant.
        if (value !== undefined && ctx?.oidc?.route === 'registration') {
          throw new errors.InvalidClientMetadata(`${key} is set by POST /auth/clients only`);
        }
        if (key === 'extension_permissions' && value !== undefined) {
          const ok = value !== null && typeof value === 'object' && !Array.isArray(value) && Object.values(value).every((v) => v === 'read' || v === 'write');
          if (!ok) throw new errors.InvalidClientMetadata('extension_permissions must map namespace patterns to "read" or "write"');
        }
      },
    },
    clockTolerance: CLOCK_TOLERANCE_S,
    assertJwtClientAuthClaimsAndHeader: async (_ctx, claims) => refuseLongLivedAssertion(claims, errors),
    fetch: providerFetch(config.allowPrivateWebhookTargets),
    fetchResponseBodyLimits: { jwks_uri: MAX_JWKS_BYTES },
    // The secret the request authenticated with: during a rotation's overlap, maybe the previous one (previous-client-secret.ts).
    extraTokenClaims: async (ctx, token) => (token.kind === 'ClientCredentials' ? ctx.oidc.client && (previousSecretClaim(ctx) ?? currentClaim(ctx.oidc.client)) : undefined),
    routes: OIDC_ROUTES,
    renderError,
    ttl: {
      AccessToken: (ctx, token) => withinGrant(ctx, token, config.ACCESS_TOKEN_TTL),
      ClientCredentials: config.ACCESS_TOKEN_TTL,
      AuthorizationCode: 60,
      IdToken: 3600,
      RefreshToken: (ctx, token) => withinGrant(ctx, token, REFRESH_TOKEN_TTL),
      // From the latest consent (recordConsent, consent.ts); refreshes do not extend it.
      Grant: GRANT_TTL,
      Session: 14 * 24 * 3600,
      Interaction: 3600,
      DeviceCode: 600,
    },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // A client learns about its own tokens only: another client, of any tenant, gets {"active":false}.
      // A client-credentials token issued under a secret since rotated is not its client's any more
      // (oauth-tokens.ts), once the rotation's overlap, if it left one, is over.
      introspection: {
        enabled: true,
        allowedPolicy: async (ctx, client, token) => token.clientId === client.clientId && (await tokenGoodUntil(ctx.oidc.provider, client, token)) !== undefined,
      },
      // SPEC 5.7: 200 whatever the token; another client's is left alone (not an oracle either).
      revocation: { enabled: true, allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId },
      // SPEC 5.1 names bearer tokens only, and the API checks no proof of possession.
      dPoP: { enabled: false },
      registration: { enabled: true, secretFactory: async () => newClientSecret() },
      userinfo: { enabled: true },
      // The provider's own pages load web fonts from elsewhere; these are the service's pages.
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: async (ctx, form) => {
          setPage(ctx, logoutPage({ form, clientName: ctx.oidc.client?.clientName }));
        },
        // Both answers of the logout page end here: "Yes" with the browser's session gone, "No, stay
        // signed in" with it kept (and the asking app, if any, signed out of it alone).
        postLogoutSuccessSource: async (ctx) => {
          const client = ctx.oidc.client?.clientName;
          const stillSignedIn = !!(await ctx.oidc.provider.Session.get(ctx)).accountId;
          const left = client ? `You have signed out of ${shownAppName(client)}.` : '';
          if (stillSignedIn) setPage(ctx, messagePage('Still signed in', `${left} You are still signed in to this service in this browser.`.trim()));
          else setPage(ctx, messagePage('Signed out', left || 'You have signed out.'));
        },
      },
      pushedAuthorizationRequests: { enabled: false },
      deviceFlow: { enabled: true, mask: '***-****', charset: 'base-20' },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator, client) => {
          if (indicator !== resource) throw new errors.InvalidTarget(`the only resource is ${resource}`);
          const scope = apiScopes(ctx, client, resource);
          refuseUnusableScope(ctx, client, scope, errors);
          return { scope, audience: resource, accessTokenFormat: 'opaque', accessTokenTTL: config.ACCESS_TOKEN_TTL };
        },
      },
    },
    // The provider scopes its interaction cookie to this URL's path: `/auth/` reaches the sign-in,
    // consent and decision pages alike (interactions.controller.ts sends the browser on).
    interactions: { policy, url: (_ctx, interaction) => `/auth/?interaction=${encodeURIComponent(interaction.uid)}` },
    // The provider refuses a prompt its policy does not name; discovery says which it names.
    discovery: { prompt_values_supported: ['none', ...policy.filter((p) => p.requestable).map((p) => p.name)] },
    // Code (and device) grants get a refresh token without asking for offline_access; every refresh rotates it.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    // The provider's default ties tokens issued without offline_access to the browser session (and
    // a logout revokes their grants): an app would lose access whenever the user signs out, or
    // someone else signs in on that browser. Grants outlive sessions here (SPEC 5.8).
    expiresWithSession: async () => false,
    rotateRefreshToken: true,
    // The id_token carries the profile and email claims its scopes grant (SPEC 5.6), not only userinfo.
    conformIdTokenClaims: false,
    findAccount: async (_ctx, sub) => {
      const user = await deps.users.byId(sub);
      if (!user) return undefined;
      return {
        accountId: sub,
        claims: async () => ({
          sub,
          name: user.name,
          preferred_username: user.email,
          picture: user.picture ?? undefined,
          email: user.email,
          email_verified: user.email_verified,
        }),
      };
    },
  };
  await prepareTokenRequestLimit();
  const provider = new Provider(config.baseUrl, configuration);
  useTokenRequestLimit(provider, deps.tokenLimit);
  // oidc-mount.ts sets the X-Forwarded-* headers itself (SVC_BASE_URL's origin, Fastify's client address).
  provider.proxy = true;
  prefixTokens(provider);
  carryOidcScopes(provider, () => Provider.ctx as KoaContextWithOIDC | undefined, deps.users);
  unbindTokensFromSessions(provider);
  detectReuseOfExpiredTokens(provider);
  allowAnyLoopbackPort(provider);
  acceptPreviousSecret(provider, () => Provider.ctx as KoaContextWithOIDC | undefined);
  confirmPostLogoutRedirects(provider, () => Provider.ctx as KoaContextWithOIDC | undefined, config.SVC_SIGNUP_ENABLED);
  provider.use(answerLateErrors);
  provider.use(refuseUnstorableLogout);
  provider.use(unreadableBody);
  provider.use(neverFramed);
  provider.use(ownSelfSubmittingForms);
  provider.use(introspectedAsTheApiSees(resource, deps.users));
  provider.use(structuredTokensAreUnknown);
  provider.use(discoveryAsServed);
  provider.use(endAccountSignInOnLogout(config.secureCookies));
  await teachScopeGrammar(provider);
  provider.use(reportTokenReuse(deps.db));
  provider.use(reportClientErrors);
  await installDevicePolling(provider, deps.db, config.baseUrl, config.OAUTH_DEVICE_POLL_INTERVAL);
  return provider;
}

/**
 * SPEC 5.2: presenting a refresh token that was already rotated is `token_reuse_detected`. The
 * provider has by then revoked the grant with all its tokens and answers `invalid_grant`; this
 * names the reason, on that attempt and every later one (the used token is kept: oidc-adapter.ts),
 * also past the used token's own expiry (`detectReuseOfExpiredTokens`). Once the janitor has
 * deleted it, a day after that expiry, the token is unknown: plain `invalid_grant`. Only the
 * client the token was issued to hears it: another client presenting it gets the provider's
 * plain `invalid_grant` (client mismatch), which revokes nothing and says nothing of the token.
 * The provider is patched (patches/oidc-provider+*.patch) to take a used token's reuse path
 * before it checks a `scope` parameter, which a replay with a scope the grant lacks skipped.
 */
function reportTokenReuse(db: DataSource) {
  return async (ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> => {
    await next();
    const body = ctx.body as { error?: string } | undefined;
    const params = ctx.oidc?.params as { grant_type?: string; refresh_token?: string } | undefined;
    if (ctx.oidc?.route !== 'token' || body?.error !== 'invalid_grant' || params?.grant_type !== 'refresh_token' || !params.refresh_token) return;
    if (await isUsedRefreshToken(db, params.refresh_token, ctx.oidc.client?.clientId)) {
      ctx.body = {
        error: 'token_reuse_detected',
        error_description: 'This refresh token was used before; the grant and all its tokens are revoked. Start the authorization again.',
      };
    }
  };
}

/**
 * A dependency away (PostgreSQL or Redis), or a statement PostgreSQL cancelled at its timeout
 * (isDatabaseTrouble), while the provider answered, which it would answer 500 `server_error`:
 * 503 with Retry-After, as the API answers
 * `service_unavailable`, in the endpoint's error form, `temporarily_unavailable` (RFC 6749
 * 4.1.2.1's name for it): the error page for a browser, the OAuth error JSON otherwise.
 */
export function answerUnavailable(ctx: KoaContextWithOIDC): Promise<void> | void {
  ctx.status = 503;
  ctx.set('Retry-After', UNAVAILABLE_RETRY_AFTER_SECONDS);
  const out = { error: 'temporarily_unavailable', error_description: 'The service\'s database is unavailable or did not answer in time; retry after Retry-After' };
  if (ctx.accepts('json', 'html') === 'html') return renderError(ctx, out);
  ctx.set('Cache-Control', 'no-store');
  ctx.body = out;
}

/** The provider's error page (its routes' error handling renders it for a browser; so does answerLateErrors). */
async function renderError(ctx: KoaContextWithOIDC, out: { error: string; error_description?: string }): Promise<void> {
  setPage(ctx, providerErrorPage(String(out.error), out.error_description));
}

/**
 * An error no route's error handling answered: one thrown after it, such as by the session save
 * oidc-provider runs once more after the route (ensureSessionSave in lib/helpers/initialize_app.js)
 * when the adapter refuses what the session holds, or by a middleware outside the routes. Koa's
 * default would strip every header, the service's (security headers, request id: oidc-mount.ts
 * passes them on) included, and answer in plain text. Answered instead as the routes answer an
 * error: the error page for a browser, the OAuth error JSON otherwise, with the headers the
 * response had before the provider took it; those set since (the failed route's cookies, its
 * page's headers) are dropped, as Koa would drop them. Registered first, so it wraps the rest.
 */
async function answerLateErrors(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  const before = new Set(Object.keys(ctx.response.headers));
  try {
    await next();
  } catch (err) {
    if (ctx.headerSent || !ctx.writable) throw err;
    if (isDatabaseTrouble(err)) {
      for (const name of Object.keys(ctx.response.headers)) if (!before.has(name)) ctx.remove(name);
      return answerUnavailable(ctx);
    }
    const e = err as { expose?: unknown; statusCode?: unknown; message?: unknown; error_description?: unknown };
    const status = typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500 ? e.statusCode : undefined;
    const exposed = e.expose === true && status !== undefined && typeof e.message === 'string';
    for (const name of Object.keys(ctx.response.headers)) if (!before.has(name)) ctx.remove(name);
    const out = exposed
      ? { error: e.message as string, ...(typeof e.error_description === 'string' ? { error_description: e.error_description } : {}) }
      : { error: 'server_error', error_description: 'oops! something went wrong' };
    ctx.status = exposed ? status : 500;
    // Reported as Koa reports an unhandled error (its default logs it).
    if (!exposed) ctx.app.emit('error', err, ctx);
    if (ctx.accepts('json', 'html') === 'html') return renderError(ctx, out);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = out;
  }
}

/**
 * A logout's `state` is kept in the browser's session (for the redirect after the confirmation),
 * and the provider saves the session again after the route's error handling, where an adapter
 * refusal (a NUL or a lone surrogate, which PostgreSQL cannot store: oidc-adapter.ts) would end
 * in answerLateErrors rather than in the route's answer. So such text is refused here, before the
 * session is read, as the adapter refuses it elsewhere: 400 `invalid_request`, rendered by
 * answerLateErrors as the routes render it. POST /auth/logout is Nest's, under the input policy,
 * and answered with the GET it stands for (interactions.controller.ts); the confirmation's fields
 * are compared, never kept.
 */
async function refuseUnstorableLogout(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  if (ctx.path === OIDC_ROUTES.end_session) {
    const problem = unstorableText(ctx.query);
    if (problem) throw textRefused(problem);
  }
  return next();
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
async function reportClientErrors(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
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
 * RP-Initiated Logout 1.0 §3: the provider must not send the browser on to a
 * post_logout_redirect_uri unless it can confirm that the target is legitimate. A client an admin
 * registered (it has a tenant) is vouched for by that admin, unless sign-up is open, when anyone
 * can be the admin of a tenant of their own. Otherwise anyone may have registered the URI and got
 * an id_token for an account of their own, so only an id_token_hint naming the account the browser
 * is signed in with confirms it: that user signed in to the client. An unconfirmed redirect is
 * dropped (set before the provider keeps it for the confirmation) and the logout ends at the
 * signed-out page: without a session the provider's page submits itself, so a redirect there
 * would bounce anyone to the URI without a click.
 */
function confirmPostLogoutRedirects(provider: ProviderType, currentCtx: () => KoaContextWithOIDC | undefined, signupOpen: boolean): void {
  const client = provider.Client.prototype as unknown as {
    metadata(): ClientMetadata;
    postLogoutRedirectUriAllowed(value: string): boolean;
  };
  const allowed = client.postLogoutRedirectUriAllowed;
  client.postLogoutRedirectUriAllowed = function postLogoutRedirectUriAllowed(this: typeof client, value: string) {
    if (!allowed.call(this, value)) return false;
    if (this.metadata().tenant_id && !signupOpen) return true;
    const ctx = currentCtx();
    if (!ctx) return false;
    const hinted = (ctx.oidc.entities.IdTokenHint as { payload?: { sub?: unknown } } | undefined)?.payload?.sub;
    const account = ctx.oidc.session?.accountId;
    // The one hook the provider offers here is this check (end_session.js reads the parameter after it).
    if (!account || hinted !== account) (ctx.oidc.params as { post_logout_redirect_uri?: string }).post_logout_redirect_uri = undefined;
    return true;
  };
}

/**
 * The provider's own HTML (the self-submitting forms of `response_mode=form_post` and of a logout
 * without a session) comes without the pages' headers (send-page.ts): it is not to be framed either.
 */
async function neverFramed(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next();
  if (!ctx.response.is('html') || ctx.response.get('X-Frame-Options')) return;
  ctx.set('X-Frame-Options', 'DENY');
  if (!ctx.response.get('Content-Security-Policy')) ctx.set('Content-Security-Policy', "frame-ancestors 'none'");
}

/** oidc-provider's self-submitting form (lib/response_modes/form_post.js of the pinned version): its target and fields. */
const PROVIDER_FORM_POST = /^<!DOCTYPE html>\s*<html>\s*<head>[\s\S]*<title>Submitting Callback<\/title>[\s\S]*<form method="post" action="([^"]*)">([\s\S]*?)<noscript>/;
const PROVIDER_HIDDEN_FIELD = /<input type="hidden" name="([^"]*)" value="([^"]*)"\/>/g;
const unescapeHtml = (text: string) => text.replace(/&(lt|gt|quot|#39|amp);/g, (_, e: string) => ({ lt: '<', gt: '>', quot: '"', '#39': "'", amp: '&' })[e]!);

/**
 * The provider writes its self-submitting form (the `form_post` answer to an app, the confirmation
 * of a logout without a session, the sign-out before a sign-in as another user) itself, with no
 * option to replace it, and without the pages' language, viewport or `<main>` (WCAG 3.1.1). It is
 * drawn again as the service's page, with the same target and fields, under the pages' CSP but for
 * its one script. A body not of that shape is left alone.
 */
async function ownSelfSubmittingForms(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next();
  if (typeof ctx.body !== 'string' || !ctx.response.is('html')) return;
  const form = PROVIDER_FORM_POST.exec(ctx.body);
  if (!form) return;
  const fields = [...form[2].matchAll(PROVIDER_HIDDEN_FIELD)].map((f) => [unescapeHtml(f[1]), unescapeHtml(f[2])] as const);
  const status = ctx.status;
  setPage(ctx, selfSubmittingPage(unescapeHtml(form[1]), fields));
  ctx.set('Content-Security-Policy', SELF_SUBMITTING_CSP);
  ctx.status = status;
}

/** oidc-provider reads at most this much of a body (lib/shared/selective_body.js), and answers more with a 400 "failed to parse". */
export const PROVIDER_BODY_LIMIT = 56 * 1024;

/**
 * A body larger than the provider reads is 413, as on every other route, in the provider's error
 * form; so is one it cannot read as sent, compressed (415): the provider reads the bytes as they
 * come, so a gzipped form would be parsed as garbage (a misleading `invalid_client`). Only its
 * POST endpoints read a body; a GET's is ignored (app.factory.ts, dropBodyOfGet).
 *
 * A form or JSON body is then read here, by the API's rules (body-parsing.ts, readBodyText): a
 * charset other than UTF-8 is 415, bytes or a form's %-escapes that are not UTF-8 are 400, a
 * BOM is dropped. The provider's own reading put U+FFFD in their place whatever the charset said
 * (a client named "App\ufffd\ufffd", shown so on the consent page), and refused a BOM. It parses
 * the text read here (selective_body.js of the pinned version takes a body already read from
 * `req.body`, and says so once on stderr, at the first). Other media types it refuses unread.
 */
async function unreadableBody(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  if (ctx.method !== 'POST') return next();
  const encoding = ctx.get('Content-Encoding').trim().toLowerCase();
  if (encoding && encoding !== 'identity') {
    return refuseBody(ctx, 415, 'The OAuth endpoints read the form as sent: no Content-Encoding (or identity)');
  }
  if ((ctx.request.length ?? 0) > PROVIDER_BODY_LIMIT) return refuseBody(ctx, 413, TOO_LARGE);
  const form = ctx.is('application/x-www-form-urlencoded');
  if (!announcesBody(ctx.req.headers) || !(form || ctx.is('application/json'))) return next();
  try {
    (ctx.req as { body?: Buffer }).body = Buffer.from(await readBodyText(ctx.req, PROVIDER_BODY_LIMIT, Boolean(form)));
  } catch (err) {
    const refused = bodyParserError(err);
    return refuseBody(ctx, refused.status, refused.status === 413 ? TOO_LARGE : refused.message);
  }
  return next();
}

const TOO_LARGE = `The request body is too large: the OAuth endpoints take at most ${PROVIDER_BODY_LIMIT} bytes`;

function refuseBody(ctx: KoaContextWithOIDC, status: number, description: string): void {
  ctx.status = status;
  ctx.set('Connection', 'close'); // the body may be left unread
  ctx.body = { error: 'invalid_request', error_description: description };
}

/**
 * SPEC 5.7: revocation always answers 200, introspection `{"active":false}` for anything that is
 * not a good token. The provider refuses a JWT-shaped value (an id_token an app revokes at logout,
 * say) with `unsupported_token_type` instead; this service issues no structured access or refresh
 * token, so such a value is merely not one of its tokens. Runs after client authentication, whose
 * errors stand.
 */
async function structuredTokensAreUnknown(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next();
  const route = ctx.oidc?.route;
  if ((route !== 'introspection' && route !== 'revocation') || (ctx.body as { error?: string } | undefined)?.error !== 'unsupported_token_type') return;
  ctx.status = 200;
  ctx.body = route === 'introspection' ? { active: false } : '';
}

/** The discovery document as the provider builds it, made to say what the service does (the two below). */
async function discoveryAsServed(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next();
  if (ctx.oidc?.route !== 'discovery' || !ctx.body || typeof ctx.body !== 'object') return;
  const body = ctx.body as Record<string, unknown>;
  publishClientAuthOfEveryEndpoint(body);
  advertiseIssuedClaimsOnly(body);
}

/**
 * RFC 8414 2: discovery without `introspection_endpoint_auth_methods_supported` or
 * `revocation_endpoint_auth_methods_supported` tells a client those endpoints take
 * client_secret_basic alone. They authenticate a client with the token endpoint's own code
 * (lib/shared/client_auth.js of the pinned version), so they take exactly what it takes, a public
 * client's bare client_id (`none`) included: each gets the token endpoint's list, and its JWT
 * methods' algorithms, which RFC 8414 requires beside `client_secret_jwt` and `private_key_jwt`.
 */
function publishClientAuthOfEveryEndpoint(body: Record<string, unknown>): void {
  const copy = (value: unknown) => (Array.isArray(value) ? [...value] : undefined);
  for (const endpoint of ['introspection', 'revocation']) {
    if (!body[`${endpoint}_endpoint`]) continue;
    body[`${endpoint}_endpoint_auth_methods_supported`] = copy(body.token_endpoint_auth_methods_supported);
    body[`${endpoint}_endpoint_auth_signing_alg_values_supported`] = copy(body.token_endpoint_auth_signing_alg_values_supported);
  }
}

/**
 * OIDC Discovery 3: `claims_supported` lists the claims the provider can supply. oidc-provider's
 * defaults name `sid`, which it puts in tokens only for front- or back-channel logout, neither of
 * which is offered, so no token or userinfo answer ever carries it.
 */
function advertiseIssuedClaimsOnly(body: { claims_supported?: unknown }): void {
  if (Array.isArray(body.claims_supported)) body.claims_supported = body.claims_supported.filter((claim) => claim !== 'sid');
}

/**
 * Introspection answers what the API would accept (oauth-tokens.ts): a token's `scope` is the
 * part its grant (for client credentials, its client) still holds and its user's role still
 * allows, not what it was issued with (a token of a user since deleted, or of another tenant
 * than its client's, is inactive), and the claim naming its secret (client-secret-claim.ts) is
 * the service's own.
 */
function introspectedAsTheApiSees(resource: string, users: UsersService) {
  return async (ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> => {
    await next();
    if (ctx.oidc?.route !== 'introspection' || !ctx.body || typeof ctx.body !== 'object') return;
    const body = ctx.body as Record<string, unknown>;
    for (const claim of CREDENTIAL_CLAIMS) delete body[claim];
    const { Grant: grant, Client: client, ClientCredentials: clientToken } = ctx.oidc.entities;
    const userToken = ctx.oidc.entities.AccessToken ?? ctx.oidc.entities.RefreshToken;
    const token = userToken ?? clientToken;
    if (body.active !== true || !token || !(grant || clientToken)) return;
    const owner = token.clientId === client?.clientId ? client : await ctx.oidc.provider.Client.find(token.clientId!);
    const accountId = userToken?.accountId;
    const user = accountId ? await users.byId(accountId) : undefined;
    const scopes = owner && scopesForUser(owner, accountId, user, scopesStillHeld(body.scope as string | undefined, grant ?? owner, resource));
    if (!scopes) ctx.body = { active: false };
    else body.scope = scopes.join(' ') || undefined;
  };
}

/**
 * Signing out at the provider ("Yes, sign me out", or the self-submitting form of a logout
 * without a session) ends the account pages' sign-in in this browser too: their cookie is the
 * service's, not the provider's session, and a shared computer's next user must not find the
 * pages (and their forms, such as the admin API key's) still signed in. Other browsers stay
 * signed in (that is "sign out everywhere": account-session.ts). "No, stay signed in" ends only
 * the asking app's part of the session, and leaves the account pages alone. Appended: the
 * provider's own session cookies are in the same header.
 */
function endAccountSignInOnLogout(secure: boolean) {
  return async (ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> => {
    await next();
    const params = ctx.oidc?.params as { logout?: string } | undefined;
    if (ctx.oidc?.route !== 'end_session_confirm' || !params?.logout || ctx.status !== 303) return;
    ctx.append('Set-Cookie', clearedAccountCookie(secure));
  };
}

/**
 * Tokens already stored when `expiresWithSession` was the provider's default still name their
 * session; their lookups skip the session check, so they too depend on their grant alone.
 */
function unbindTokensFromSessions(provider: ProviderType): void {
  for (const model of [provider.AccessToken, provider.RefreshToken] as unknown as Array<{ find(value: string, options?: object): Promise<unknown> }>) {
    const find = model.find.bind(model);
    model.find = (value, options) => find(value, { ...options, ignoreSessionBinding: true });
  }
}

/**
 * A rotated refresh token presented again is a reuse however long ago it was issued (SPEC 5.2).
 * The provider checks a refresh token's expiry before whether it was used, and only the latter
 * revokes the grant: a token stolen and replayed after its 30 days (while the app's rotations kept
 * the grant alive) got a plain `invalid_grant` and revoked nothing, though `reportTokenReuse`
 * answered that it had. A used token is never expired to the provider, so the replay takes the
 * provider's own reuse path (revocation, `grant.revoked`, its audit) for as long as the token is
 * stored. A used token gets nothing else: `isValid` is false for it whatever its expiry.
 */
function detectReuseOfExpiredTokens(provider: ProviderType): void {
  const model = provider.RefreshToken.prototype as unknown as { consumed?: boolean };
  let owner: object | null = model;
  while (owner && !Object.getOwnPropertyDescriptor(owner, 'isExpired')) owner = Object.getPrototypeOf(owner) as object | null;
  const expired = Object.getOwnPropertyDescriptor(owner!, 'isExpired')!.get!;
  Object.defineProperty(model, 'isExpired', {
    configurable: true,
    get(this: typeof model) {
      return !this.consumed && (expired.call(this) as boolean);
    },
  });
}

/**
 * OAuth 2.1 8.4.2, RFC 8252 7.3: a native app listens on whatever loopback port it gets, so a
 * redirect URI to a loopback IP literal over http matches a request's whatever its port; the rest
 * (path, query) still matches exactly. `localhost` stays exact (RFC 8252 8.3 advises against it;
 * the provider's own rule, for native clients only, also took it), and so does every other URI.
 */
const LOOPBACK_IP_REDIRECT = /^http:\/\/(127\.0\.0\.1|\[::1\])(?::\d{1,5})?(?=[/?]|$)/;

/** The URI without its port when it is a loopback IP redirect URI, else undefined. */
function withoutLoopbackPort(uri: string): string | undefined {
  const match = LOOPBACK_IP_REDIRECT.exec(uri);
  return match && URL.canParse(uri) ? `http://${match[1]}${uri.slice(match[0].length)}` : undefined;
}

function allowAnyLoopbackPort(provider: ProviderType): void {
  const matches = (registered: string[] | undefined, value: string) => {
    if (registered?.includes(value)) return true;
    const portless = withoutLoopbackPort(value);
    return portless !== undefined && !!registered?.some((uri) => withoutLoopbackPort(uri) === portless);
  };
  const client = provider.Client.prototype as unknown as {
    redirectUris?: string[];
    postLogoutRedirectUris?: string[];
    redirectUriAllowed(value: string): boolean;
    postLogoutRedirectUriAllowed(value: string): boolean;
  };
  client.redirectUriAllowed = function redirectUriAllowed(this: typeof client, value: string) {
    return matches(this.redirectUris, value);
  };
  client.postLogoutRedirectUriAllowed = function postLogoutRedirectUriAllowed(this: typeof client, value: string) {
    return matches(this.postLogoutRedirectUris, value);
  };
}

/**
 * An access token is for the API and gets the API's scopes as its resource server's; it also
 * carries the OIDC scopes (openid, profile, email) it was issued with: those the code, device
 * code or refresh request asked for (a refresh's `scope` may narrow them) and the grant holds
 * when the token is issued, as the id_token issued beside it has them. Userinfo answers by them
 * (OIDC Core 5.3, 5.4), and the token response's `scope`, which is the access token's, lists
 * exactly them and the API scopes (SPEC 5.2, RFC 6749 5.1). `offline_access` is about the refresh
 * token, which every code and device grant gets here, and stays out.
 */
function carryOidcScopes(provider: ProviderType, currentCtx: () => KoaContextWithOIDC | undefined, users: UsersService): void {
  type Scoped = { scope?: string; scopes: Set<string> };
  const model = provider.AccessToken.prototype as unknown as { scope?: string; accountId?: string; save(): Promise<string> };
  const save = model.save;
  model.save = async function saveWithOidcScopes(this: typeof model) {
    const ctx = currentCtx();
    const e = (ctx?.oidc?.entities ?? {}) as Record<string, unknown>;
    const grant = e.Grant as { getOIDCScopeFiltered(filter: Set<string>): string } | undefined;
    const source = (e.AuthorizationCode ?? e.DeviceCode ?? e.RefreshToken) as Scoped | undefined;
    if (ctx?.oidc.route === 'token' && grant && source) {
      const params = ctx.oidc.params as { grant_type?: string; scope?: string };
      const asked = params.grant_type === 'refresh_token' && params.scope ? ctx.oidc.requestParamScopes : source.scopes;
      const oidc = grant.getOIDCScopeFiltered(asked).split(' ').filter((s) => s !== 'offline_access');
      const scopes = [...new Set([...oidc, ...(this.scope ?? '').split(' ')])].filter(Boolean);
      // What the user's role no longer gives (a demotion since the grant) is not the token's either.
      const user = this.accountId ? await users.byId(this.accountId) : undefined;
      this.scope = (user ? withinUserRole(scopes, user.role) : scopes).join(' ');
    }
    return save.call(this);
  };
}

/**
 * The provider's scope set stays OIDC's own (discovery's `scopes_supported`, the claims), but
 * its `has` also accepts every scope of the API grammar: oidc-provider checks a client's
 * registered `scope`, and a request against a client's allow-list, with `scopes.has`, while it
 * picks a request's OIDC scopes with Set.prototype.has, which this leaves alone. That teaches it
 * an infinite grammar without a list (the set is in the provider's private state).
 */
async function teachScopeGrammar(provider: ProviderType): Promise<void> {
  const { scopes } = (await providerInternals(provider)).configuration;
  const known = Set.prototype.has.bind(scopes);
  Object.defineProperty(scopes, 'has', { value: (scope: string) => known(scope) || isApiScope(scope) });
}

/** `svc_at_` and `svc_rt_` in front of the provider's random token ids (see the header). */
function prefixTokens(provider: ProviderType): void {
  const models: Array<[{ prototype: { generateTokenId(): string } }, string]> = [
    [provider.AccessToken as never, OAUTH_ACCESS_TOKEN_PREFIX],
    [provider.ClientCredentials as never, OAUTH_ACCESS_TOKEN_PREFIX],
    [provider.RefreshToken as never, OAUTH_REFRESH_TOKEN_PREFIX],
  ];
  for (const [model, prefix] of models) {
    const generate = model.prototype.generateTokenId;
    model.prototype.generateTokenId = function prefixed(this: unknown) {
      return prefix + generate.call(this);
    };
  }
}

export type { ClientMetadata };
