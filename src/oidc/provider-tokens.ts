/**
 * The provider's access and refresh tokens as the service issues them: opaque `svc_at_…` and
 * `svc_rt_…` (oidc-provider has no option for a prefix, so the models' `generateTokenId` is
 * wrapped, checked by the tests against this pinned version), and the lifetime of each model, a
 * token's no longer than its grant has left.
 */
import type { Provider as ProviderType, Configuration, KoaContextWithOIDC } from 'oidc-provider';
import { OAUTH_ACCESS_TOKEN_PREFIX, OAUTH_REFRESH_TOKEN_PREFIX } from '../auth/principal';

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

/** The provider's `ttl`, in seconds; an access token's is the configured ACCESS_TOKEN_TTL (app-config.ts). */
export function tokenLifetimes(accessTokenTtl: number): NonNullable<Configuration['ttl']> {
  return {
    AccessToken: (ctx, token) => withinGrant(ctx, token, accessTokenTtl),
    ClientCredentials: accessTokenTtl,
    AuthorizationCode: 60,
    IdToken: 3600,
    RefreshToken: (ctx, token) => withinGrant(ctx, token, REFRESH_TOKEN_TTL),
    // From the latest consent (recordConsent, consent.ts); refreshes do not extend it.
    Grant: GRANT_TTL,
    Session: 14 * 24 * 3600,
    Interaction: 3600,
    DeviceCode: 600,
  };
}

/** `svc_at_` and `svc_rt_` in front of the provider's random token ids (see the header). */
export function prefixTokens(provider: ProviderType): void {
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
