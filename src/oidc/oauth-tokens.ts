/**
 * `svc_at_` access tokens as Principals (SPEC 5.1, 5.4): the bearer strategy asks this resolver
 * (OAUTH_TOKEN_RESOLVER) for any token with that prefix. The token's tenant is its user's
 * (a consent grant) or its client's (client credentials); its permission maps are its scopes'
 * (scopes.ts) plus the client's default extension grant, and it is always a member: what an
 * app may do is exactly what was granted. Expired: 401 `expired_token`; unknown or revoked:
 * 401 `unauthorized`, at once: resolutions are cached (oauth-token-cache.ts) under a generation
 * that every revocation bumps.
 */
import { Injectable } from '@nestjs/common';
import type { OAuthTokenResolver, Principal, Resolution } from '../auth/principal';
import type { PermissionMap } from '../keys/api-key.entity';
import { UsersService } from '../users/users.service';
import { OAuthTokenCache } from './oauth-token-cache';
import { OidcProvider } from './oidc-provider';
import { permissionsOf } from './scopes';

interface StoredToken {
  clientId: string;
  exp: number;
  accountId?: string;
  grantId?: string;
  scope?: string;
  isExpired: boolean;
}

@Injectable()
export class OAuthTokens implements OAuthTokenResolver {
  constructor(
    private readonly oidc: OidcProvider,
    private readonly users: UsersService,
    private readonly cache: OAuthTokenCache,
  ) {}

  async resolve(token: string): Promise<Resolution> {
    const key = OAuthTokenCache.keyOf(token);
    const generation = await this.cache.generation();
    const hit = this.cache.get(key, generation);
    if (hit) return { principal: hit };
    const found = await this.load(token);
    if ('principal' in found) this.cache.set(key, found.principal, generation, found.expiresAt - Date.now());
    return 'principal' in found ? { principal: found.principal } : found;
  }

  private async load(token: string): Promise<{ principal: Principal; expiresAt: number } | { error: 'unauthorized' | 'expired_token' }> {
    const provider = await this.oidc.get();
    const found = ((await provider.AccessToken.find(token, { ignoreExpiration: true })) ??
      (await provider.ClientCredentials.find(token, { ignoreExpiration: true }))) as StoredToken | undefined;
    if (!found) return { error: 'unauthorized' };
    if (found.isExpired) return { error: 'expired_token' };
    const client = await provider.Client.find(found.clientId);
    if (!client) return { error: 'unauthorized' };
    const metadata = client.metadata() as { tenant_id?: string; extension_permissions?: PermissionMap };
    const tenantId = found.accountId ? (await this.users.byId(found.accountId))?.tenant_id : metadata.tenant_id;
    if (!tenantId) return { error: 'unauthorized' };
    const scopes = (found.scope ?? '').split(' ').filter(Boolean);
    const principal: Principal = {
      tenantId,
      credentialId: found.grantId ?? `client:${found.clientId}`,
      kind: 'oauth',
      role: 'member',
      isRootTenant: false,
      source: `app:${found.clientId}`,
      defaultTier: 'library',
      ...permissionsOf(scopes),
      extensionPerms: metadata.extension_permissions ?? {},
      scopes,
    };
    return { principal, expiresAt: found.exp * 1000 };
  }
}
