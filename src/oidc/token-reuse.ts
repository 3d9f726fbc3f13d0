/**
 * A code or refresh token used again (SPEC 5.2) revokes its grant with all its tokens: one that
 * two requests used at once (the adapter's answer to the loser), and a rotated refresh token
 * presented again however long ago it was issued. A reused refresh token is answered
 * `token_reuse_detected` to the client it was issued to.
 */
import type { Provider as ProviderType, KoaContextWithOIDC } from 'oidc-provider';
import type { DataSource } from 'typeorm';
import { isUsedRefreshToken } from './oidc-adapter';

/**
 * The adapter's answer to a code or refresh token two requests used at once: the loser's is a
 * reuse (the adapter has revoked the grant), reported as the provider reports one it sees in
 * sequence.
 */
export function concurrentUseIsReuse(currentCtx: () => KoaContextWithOIDC | undefined, errors: typeof import('oidc-provider').errors) {
  return async (model: string, grantId: string | undefined): Promise<never> => {
    const ctx = currentCtx();
    if (ctx && grantId) ctx.oidc.provider.emit('grant.revoked', ctx, grantId);
    const what = { AuthorizationCode: 'authorization code', RefreshToken: 'refresh token', DeviceCode: 'device code' }[model] ?? 'grant';
    throw new errors.InvalidGrant(`${what} already used`);
  };
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
export function reportTokenReuse(db: DataSource) {
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
 * A rotated refresh token presented again is a reuse however long ago it was issued (SPEC 5.2).
 * The provider checks a refresh token's expiry before whether it was used, and only the latter
 * revokes the grant: a token stolen and replayed after its 30 days (while the app's rotations kept
 * the grant alive) got a plain `invalid_grant` and revoked nothing, though `reportTokenReuse`
 * answered that it had. A used token is never expired to the provider, so the replay takes the
 * provider's own reuse path (revocation, `grant.revoked`, its audit) for as long as the token is
 * stored. A used token gets nothing else: `isValid` is false for it whatever its expiry.
 */
export function detectReuseOfExpiredTokens(provider: ProviderType): void {
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
