/**
 * Introspection and revocation answers as the API sees tokens (SPEC 5.7): a structured token is
 * merely not one of the service's, and an introspected token's scope is what the API would accept.
 */
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { UsersService } from '../users/users.service';
import { CREDENTIAL_CLAIMS } from './client-secret-claim';
import { scopesForUser } from './client-registration';
import { scopesStillHeld } from './scopes';

/**
 * SPEC 5.7: revocation always answers 200, introspection `{"active":false}` for anything that is
 * not a good token. The provider refuses a JWT-shaped value (an id_token an app revokes at logout,
 * say) with `unsupported_token_type` instead; this service issues no structured access or refresh
 * token, so such a value is merely not one of its tokens. Runs after client authentication, whose
 * errors stand.
 */
export async function structuredTokensAreUnknown(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next();
  const route = ctx.oidc?.route;
  if ((route !== 'introspection' && route !== 'revocation') || (ctx.body as { error?: string } | undefined)?.error !== 'unsupported_token_type') return;
  ctx.status = 200;
  ctx.body = route === 'introspection' ? { active: false } : '';
}

/**
 * Introspection answers what the API would accept (oauth-tokens.ts): a token's `scope` is the
 * part its grant (for client credentials, its client) still holds and its user's role still
 * allows, not what it was issued with (a token of a user since deleted, or of another tenant
 * than its client's, is inactive), and the claim naming its secret (client-secret-claim.ts) is
 * the service's own.
 */
export function introspectedAsTheApiSees(resource: string, users: UsersService) {
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
