/**
 * The API's scope grammar (scopes.ts) inside oidc-provider: the scopes of one resource server, the
 * service's API, which every access token is for, as a request may be given them; an access token
 * also carries the OIDC scopes it was issued with; the provider learns the grammar without a list.
 */
import type { Provider as ProviderType, KoaContextWithOIDC } from 'oidc-provider';
import type { UsersService } from '../users/users.service';
import { providerInternals } from './provider-internals';
import { isApiScope, OIDC_SCOPES, registeredScopes, withinUserRole } from './scopes';

/**
 * The API's scopes, as a resource server, for this request: those asked for (an authorization
 * or client-credentials request) and those the grant holds (a code or refresh exchange), kept
 * to what the client registered when it registered any.
 */
export function apiScopes(ctx: KoaContextWithOIDC, client: { scope?: string }, resource: string): string {
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
export function refuseUnusableScope(ctx: KoaContextWithOIDC, client: { scope?: string }, api: string, errors: typeof import('oidc-provider').errors): void {
  const { route } = ctx.oidc;
  const params = ctx.oidc.params as { scope?: string; grant_type?: string } | undefined;
  if (route === 'authorization' || route === 'device_authorization') {
    if (api || ctx.oidc.requestParamOIDCScopes.size) return;
  } else if (route === 'token' && params?.grant_type === 'client_credentials') {
    // Its tokens carry API scopes only (the resource server's): an OIDC scope gives them nothing,
    // and is refused even beside usable ones rather than dropped, so that the client learns it.
    const oidc = String(params.scope ?? '').split(' ').find((s) => (OIDC_SCOPES as readonly string[]).includes(s));
    if (oidc) throw new errors.InvalidScope('client credentials take API scopes such as core.note:read, no OIDC scope', oidc);
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

/**
 * An access token is for the API and gets the API's scopes as its resource server's; it also
 * carries the OIDC scopes (openid, profile, email) it was issued with: those the code, device
 * code or refresh request asked for (a refresh's `scope` may narrow them) and the grant holds
 * when the token is issued, as the id_token issued beside it has them. Userinfo answers by them
 * (OIDC Core 5.3, 5.4), and the token response's `scope`, which is the access token's, lists
 * exactly them and the API scopes (SPEC 5.2, RFC 6749 5.1). `offline_access` is about the refresh
 * token, which every code and device grant gets here, and stays out.
 */
export function carryOidcScopes(provider: ProviderType, currentCtx: () => KoaContextWithOIDC | undefined, users: UsersService): void {
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
export async function teachScopeGrammar(provider: ProviderType): Promise<void> {
  const { scopes } = (await providerInternals(provider)).configuration;
  const known = Set.prototype.has.bind(scopes);
  Object.defineProperty(scopes, 'has', { value: (scope: string) => known(scope) || isApiScope(scope) });
}
