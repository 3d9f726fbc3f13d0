/**
 * oidc-provider's private per-instance state (lib/helpers/weak_cache.js), for the two things
 * its options cannot express: an infinite scope grammar (provider-scopes.ts) and
 * `slow_down` on device polling (device-polling.ts). Only used with the pinned version; the
 * OAuth tests exercise both.
 */
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';

export interface ProviderInternals {
  configuration: { scopes: Set<string> };
  grantTypeHandlers: Map<string, (ctx: KoaContextWithOIDC, next: () => Promise<void>) => Promise<void>>;
}

export async function providerInternals(provider: Provider): Promise<ProviderInternals> {
  const { default: instance } = (await import('oidc-provider/lib/helpers/weak_cache.js' as string)) as { default: (p: Provider) => ProviderInternals };
  return instance(provider);
}
