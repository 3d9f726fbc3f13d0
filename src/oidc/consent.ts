/**
 * Consent, in one place for the code flow's consent page and the device page: which requested
 * scopes a user is shown (known to the service, and for API scopes within what the client
 * registered), and the grant a decision makes (what was ticked is granted, the rest refused,
 * so the provider does not ask again and the token's scope is exactly the ticked ones).
 */
import type { Provider } from 'oidc-provider';
import { isApiScope, isKnownScope, OIDC_SCOPES } from './scopes';

const isOidc = (s: string) => (OIDC_SCOPES as readonly string[]).includes(s);

export async function requestedScopes(provider: Provider, clientId: string, scopeParam: unknown): Promise<string[]> {
  const client = await provider.Client.find(clientId);
  const allowed = client?.scope ? new Set(client.scope.split(' ')) : undefined;
  const asked = [...new Set(String(scopeParam ?? '').split(' '))];
  return asked.filter((s) => isKnownScope(s) && (!isApiScope(s) || !allowed || allowed.has(s)));
}

/** The scopes granted of those requested: the ticked ones, or all when none is sent (CONTRACT). */
export function grantedScopes(requested: string[], ticked: string[]): string[] {
  return ticked.length ? requested.filter((s) => ticked.includes(s)) : requested;
}

export async function recordConsent(
  provider: Provider,
  o: { grantId?: string; accountId: string; clientId: string; requested: string[]; granted: string[]; resource: string },
): Promise<string> {
  const grant = (o.grantId && (await provider.Grant.find(o.grantId))) || new provider.Grant({ accountId: o.accountId, clientId: o.clientId });
  const refused = o.requested.filter((s) => !o.granted.includes(s));
  const join = (scopes: string[]) => scopes.join(' ');
  if (o.granted.some(isOidc)) grant.addOIDCScope(join(o.granted.filter(isOidc)));
  if (refused.some(isOidc)) grant.rejectOIDCScope(join(refused.filter(isOidc)));
  if (o.granted.some(isApiScope)) grant.addResourceScope(o.resource, join(o.granted.filter(isApiScope)));
  if (refused.some(isApiScope)) grant.rejectResourceScope(o.resource, join(refused.filter(isApiScope)));
  return grant.save();
}
