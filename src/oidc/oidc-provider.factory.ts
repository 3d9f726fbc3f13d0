/**
 * Builds the oidc-provider instance: issuer SVC_BASE_URL, storage in PostgreSQL (oidc-adapter.ts),
 * RS256 signing keys from signing-keys.ts, cookie keys derived from the service key, the SPEC's
 * paths (oidc-routes.ts, mounted by oidc-mount.ts), `code` as the only response type with PKCE
 * S256 required of every client, no development interactions, and the API's scope grammar
 * (scopes.ts, provider-scopes.ts) as the scopes of one resource server, the service's API, which
 * every access token is for.
 *
 * The configuration is here, in one place; what it cannot say is patched in or added as
 * middleware, one concern a file: tokens (provider-tokens.ts), grants outliving sessions
 * (grant-revocation.ts), token reuse (token-reuse.ts), client metadata (client-metadata.ts),
 * client authentication and CORS (provider-client-auth.ts), loopback redirect URIs
 * (loopback-redirects.ts), logout (provider-logout.ts), errors (provider-errors.ts), request
 * bodies (provider-body.ts), the provider's own HTML (provider-html.ts), introspection
 * (provider-introspection.ts) and discovery (provider-discovery.ts).
 */
import type { Provider as ProviderType, Configuration, KoaContextWithOIDC } from 'oidc-provider';
import type { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';
import type { SecretBox } from '../crypto/secret-box';
import type { UsersService } from '../users/users.service';
import { installDevicePolling } from './device-polling';
import { postgresAdapter } from './oidc-adapter';
import { currentClaim, newClientSecret } from './client-secret-claim';
import { acceptPreviousSecret, previousSecretClaim, tokenGoodUntil } from './previous-client-secret';
import { OIDC_SCOPES } from './scopes';
import type { PrivateJwk } from './signing-keys';
import { MAX_JWKS_BYTES, providerFetch } from './provider-fetch';
import { prepareTokenRequestLimit, TokenRequestLimit, useTokenRequestLimit } from './token-rate-limit';
import { OIDC_ROUTES } from './oidc-routes';
import { apiScopes, carryOidcScopes, refuseUnusableScope, teachScopeGrammar } from './provider-scopes';
import { prefixTokens, tokenLifetimes } from './provider-tokens';
import { keepsGrant, noteRevokedGrant, unbindTokensFromSessions } from './grant-revocation';
import { concurrentUseIsReuse, detectReuseOfExpiredTokens, reportTokenReuse } from './token-reuse';
import { extraClientMetadata } from './client-metadata';
import { browserMayCall, CLOCK_TOLERANCE_S, refuseLongLivedAssertion, reportClientErrors } from './provider-client-auth';
import { allowAnyLoopbackPort } from './loopback-redirects';
import { confirmPostLogoutRedirects, endAccountSignInOnLogout, logoutSource, postLogoutSuccessSource, refuseUnstorableLogout } from './provider-logout';
import { answerLateErrors, renderError } from './provider-errors';
import { unreadableBody } from './provider-body';
import { neverFramed, ownSelfSubmittingForms } from './provider-html';
import { introspectedAsTheApiSees, structuredTokensAreUnknown } from './provider-introspection';
import { discoveryAsServed } from './provider-discovery';

interface ProviderDeps {
  config: AppConfig;
  db: DataSource;
  secrets: SecretBox;
  users: UsersService;
  keys: PrivateJwk[];
  cookieKey: Buffer;
  /** The token endpoints' tight limit per address (token-rate-limit.ts); none while rate limits are off. */
  tokenLimit?: TokenRequestLimit;
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
  const currentCtx = () => Provider.ctx as KoaContextWithOIDC | undefined;
  const configuration: Configuration = {
    adapter: postgresAdapter(
      deps.db,
      deps.secrets,
      concurrentUseIsReuse(currentCtx, errors),
      () => keepsGrant(currentCtx()),
      (grantId, accountId) => noteRevokedGrant(currentCtx(), grantId, accountId),
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
    // Every authorization request and code exchange names its redirect_uri (SPEC 5, OIDC Core
    // 3.1.2.1), even for a client with one registered: the provider's default filled it in.
    allowOmittingSingleRegisteredRedirectUri: false,
    clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic', id_token_signed_response_alg: 'RS256' },
    extraClientMetadata: extraClientMetadata(errors),
    clockTolerance: CLOCK_TOLERANCE_S,
    assertJwtClientAuthClaimsAndHeader: async (_ctx, claims) => refuseLongLivedAssertion(claims, errors),
    fetch: providerFetch(config.allowPrivateWebhookTargets),
    fetchResponseBodyLimits: { jwks_uri: MAX_JWKS_BYTES },
    // The secret the request authenticated with: during a rotation's overlap, maybe the previous one (previous-client-secret.ts).
    extraTokenClaims: async (ctx, token) => (token.kind === 'ClientCredentials' ? ctx.oidc.client && (previousSecretClaim(ctx) ?? currentClaim(ctx.oidc.client)) : undefined),
    routes: OIDC_ROUTES,
    renderError,
    ttl: tokenLifetimes(config.ACCESS_TOKEN_TTL),
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
      // The service's pages for the logout's confirmation and its end (provider-logout.ts).
      rpInitiatedLogout: { enabled: true, logoutSource, postLogoutSuccessSource },
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
  carryOidcScopes(provider, currentCtx, deps.users);
  unbindTokensFromSessions(provider);
  detectReuseOfExpiredTokens(provider);
  allowAnyLoopbackPort(provider);
  acceptPreviousSecret(provider, currentCtx);
  confirmPostLogoutRedirects(provider, currentCtx, config.SVC_SIGNUP_ENABLED);
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
