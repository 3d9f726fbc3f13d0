/**
 * `svc_at_` access tokens as Principals (SPEC 5.1, 5.4): the bearer strategy asks this resolver
 * (OAUTH_TOKEN_RESOLVER) for any token with that prefix. The token's tenant is its user's
 * (a consent grant) or its client's (client credentials); its permission maps are its scopes'
 * (scopes.ts) plus the client's default extension grant, and it is always a member: what an
 * app may do is exactly what was granted. A client registered for a tenant serves that tenant's
 * users only (`servesUser`): the consent pages refuse anyone else, and a token of such a client
 * whose user is of another tenant (a grant made before that rule) resolves to nothing, or the
 * client's extension grant would reach into the user's tenant. Expired: 401 `expired_token`;
 * unknown or revoked: 401 `unauthorized`, at once: resolutions are cached (oauth-token-cache.ts) under a generation
 * that every revocation bumps. Which stored token a bearer value names, whether it is still
 * good and for which scopes, is `findAccessToken`'s rule, which userinfo follows too, with `servesUser`
 * (introspection narrows `scope` the same way: `scopesStillHeld`).
 *
 * `principalByCredential` answers the same for the credential a token stood for (its grant, or
 * `client:<id>:<secret tag>` for client credentials, client-secret-claim.ts), for what outlives a request: webhooks, event streams and
 * bulk jobs started with an OAuth token are re-checked through it, so a revoked grant stops them.
 * That credential can be wider than the token: a client registered for `a:read b:read` hands out
 * a token for `a:read` alone, a grant can hold more than one token of it asked for. So what was
 * started with a token keeps to its scopes: the re-check's Principal goes through
 * `withinTokenScopes` (scopes.ts) with the scopes the token had (a stream keeps them in memory, a webhook in
 * `webhooks.credential_scopes`; a bulk job has them in its stored principal). The result is the
 * intersection of the token's scopes and the credential's current ones: a scope the client or
 * grant loses, or a revocation, takes effect; a scope it gains never reaches the token's work.
 */
import { Injectable } from '@nestjs/common';
import type { Client, Provider } from 'oidc-provider';
import type { OAuthTokenResolver, Principal, Resolution } from '../auth/principal';
import { AppConfig } from '../config/app-config';
import { hashSecret } from '../keys/key-secrets';
import { clientCredentialId, clientOfCredential, SECRET_CLAIM } from './client-secret-claim';
import { previousSecretOf, tokenGoodUntil } from './previous-client-secret';
import { UsersService } from '../users/users.service';
import { OAuthTokenCache } from './oauth-token-cache';
import { OidcProvider } from './oidc-provider';
import { clientRegistration, scopesForUser } from './client-registration';
import { grantScopes, permissionsOf, scopesStillHeld } from './scopes';

export { clientRegistration, isSelfRegistered, servesUser } from './client-registration';

interface StoredToken {
  clientId: string;
  exp: number;
  accountId?: string;
  grantId?: string;
  scope?: string;
  extra?: Record<string, unknown>;
  isExpired: boolean;
}

type Grant = InstanceType<Provider['Grant']>;

/** A good token: as stored, its client, its grant (none for client credentials) and the scopes it is good for. */
export interface FoundToken {
  token: StoredToken;
  client: Client;
  grant?: Grant;
  scopes: string[];
  /** Epoch milliseconds at which the token ends before its `exp` (a rotation's overlap ending), else Infinity. */
  goodUntil: number;
}

/**
 * The stored access token (or client-credentials token) a bearer value names, or why it is not
 * good: expired from its `exp` on exactly (the provider's own lookup allows 15 seconds of clock
 * tolerance, so its answer would disagree with this one), unknown, of a grant since revoked, of
 * a client since deleted, or issued under a client secret since rotated (once the rotation's
 * overlap, if it left one, is over: until then `goodUntil` says when it ends). It is good for the
 * scopes it was issued with that its grant (or, for client credentials, its client) still
 * holds: one a later consent refused, or a client update took away, is not the token's any more.
 */
export async function findAccessToken(provider: Provider, token: string, resource: string): Promise<FoundToken | { error: 'unauthorized' | 'expired_token' }> {
  const found = ((await provider.AccessToken.find(token, { ignoreExpiration: true })) ??
    (await provider.ClientCredentials.find(token, { ignoreExpiration: true }))) as StoredToken | undefined;
  if (!found) return { error: 'unauthorized' };
  if (found.isExpired) return { error: 'expired_token' };
  // A token saved by the winner of a race to use a code, after the loser revoked the grant (oidc-adapter.ts), outlives it.
  const grant = found.grantId ? await provider.Grant.find(found.grantId) : undefined;
  if (found.grantId && !grant) return { error: 'unauthorized' };
  const client = await provider.Client.find(found.clientId);
  const goodUntil = client && (found.accountId ? Infinity : await tokenGoodUntil(provider, client, found));
  if (!client || goodUntil === undefined) return { error: 'unauthorized' };
  return { token: found, client, grant, scopes: scopesStillHeld(found.scope, grant ?? client, resource), goodUntil };
}

@Injectable()
export class OAuthTokens implements OAuthTokenResolver {
  constructor(
    private readonly oidc: OidcProvider,
    private readonly users: UsersService,
    private readonly cache: OAuthTokenCache,
    private readonly config: AppConfig,
  ) {}

  async resolve(token: string): Promise<Resolution> {
    const key = hashSecret(token);
    const generation = await this.cache.generation();
    const hit = this.cache.get(key, generation);
    if (hit) return { principal: hit };
    const found = await this.load(token);
    if ('principal' in found) this.cache.set(key, found.principal, generation, found.expiresAt - Date.now());
    return 'principal' in found ? { principal: found.principal } : found;
  }

  private async load(token: string): Promise<{ principal: Principal; expiresAt: number } | { error: 'unauthorized' | 'expired_token' }> {
    const provider = await this.oidc.get();
    const found = await findAccessToken(provider, token, this.config.baseUrl);
    if ('error' in found) return found;
    const credentialId = found.token.grantId ?? clientCredentialId(found.client.clientId, found.token.extra?.[SECRET_CLAIM]);
    const principal = await this.principalOf(found.client, found.token.accountId, credentialId, found.scopes);
    // Cached no longer than the token is good: an overlap's end holds to the millisecond, as a key's expiry does.
    return principal ? { principal, expiresAt: Math.min(found.token.exp * 1000, found.goodUntil) } : { error: 'unauthorized' };
  }

  /**
   * The Principal of a grant id, or of a client's `client:…` credential (client-secret-claim.ts),
   * as a token of it would have now; null once revoked, or once the client's secret it was issued
   * under was rotated (and the rotation's overlap, if any, is over).
   */
  async principalByCredential(tenantId: string, credentialId: string): Promise<Principal | null> {
    const provider = await this.oidc.get();
    let principal: Principal | undefined;
    if (credentialId.startsWith('client:')) {
      const { clientId, isCurrent, isPrevious } = clientOfCredential(credentialId);
      const client = await provider.Client.find(clientId);
      const live = client && (isCurrent(client) || isPrevious(await previousSecretOf(provider, clientId)));
      principal = live ? await this.principalOf(client, undefined, credentialId, client.scope?.split(' ')) : undefined;
    } else {
      const grant = await provider.Grant.find(credentialId);
      const client = grant && (await provider.Client.find(grant.clientId!));
      principal = client && (await this.principalOf(client, grant!.accountId, credentialId, grantScopes(grant!, this.config.baseUrl)));
    }
    return principal?.tenantId === tenantId ? principal : null;
  }

  /**
   * A token's Principal: the user's tenant (or the client's), its scopes' maps, the client's
   * extension grant. `scopes` undefined: a client's credential, for a client that registered none.
   */
  private async principalOf(client: Client, accountId: string | undefined, credentialId: string, scopes: string[] | undefined): Promise<Principal | undefined> {
    const { clientId } = client;
    const registration = clientRegistration(client);
    const user = accountId ? await this.users.byId(accountId) : undefined;
    // The user's role as it is now (PATCH /users/{id} bumps the resolution cache's generation).
    const granted = scopes && scopesForUser(client, accountId, user, scopes);
    const tenantId = accountId ? user?.tenant_id : registration.tenantId;
    if ((scopes && !granted) || !tenantId) return undefined;
    return {
      tenantId,
      credentialId,
      kind: 'oauth',
      role: 'member',
      isRootTenant: false,
      source: `app:${clientId}`,
      defaultTier: 'library',
      ...permissionsOf(granted ?? []),
      extensionPerms: registration.extensions,
      scopes: granted,
      userId: user?.id,
    };
  }
}
