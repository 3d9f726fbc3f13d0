/**
 * Tokens belong to their grant, not to the browser session they were issued in: signing out, or
 * another sign-in in that browser, leaves connected apps alone (only revoking the grant ends
 * them, SPEC 5.8). So a logout, or an access token's revocation, leaves the grant and its other
 * tokens alone (keepsGrant), tokens stored while the provider tied them to sessions are looked up
 * without that tie, and the grants a request's revocations deleted (oidc-adapter.ts) are noted
 * for the `grant.revoked` event's audit (oidc-provider.ts).
 */
import type { Provider as ProviderType, KoaContextWithOIDC } from 'oidc-provider';

/** The grants a request's revocations deleted, with their accounts (see `revokedGrantAccount`). */
const REVOKED_GRANTS = Symbol('revokedGrants');

export function noteRevokedGrant(ctx: KoaContextWithOIDC | undefined, grantId: string, accountId: string): void {
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
export function keepsGrant(ctx: KoaContextWithOIDC | undefined): boolean {
  const route = ctx?.oidc?.route;
  return (route === 'revocation' && !!ctx!.oidc.entities.AccessToken) || route === 'end_session_confirm';
}

/**
 * Tokens already stored when `expiresWithSession` was the provider's default still name their
 * session; their lookups skip the session check, so they too depend on their grant alone.
 */
export function unbindTokensFromSessions(provider: ProviderType): void {
  for (const model of [provider.AccessToken, provider.RefreshToken] as unknown as Array<{ find(value: string, options?: object): Promise<unknown> }>) {
    const find = model.find.bind(model);
    model.find = (value, options) => find(value, { ...options, ignoreSessionBinding: true });
  }
}
