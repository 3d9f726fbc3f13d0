/**
 * Consent, in one place for the code flow's consent page and the device page: which requested
 * scopes a user is shown (known to the service, and for API scopes within what the client
 * registered), which of them are a choice (all but `INCLUDED_SCOPES`), and the grant a decision
 * makes (what was ticked is granted with the included ones, the rest refused, so the provider does
 * not ask again and the token's scope is exactly that), or whether it makes none (`grantsAnything`,
 * and then why: `nothingGranted`; the refusals still hold on a grant given before).
 *
 * A user's connection to a client is one grant (SPEC 5.8), whichever browser or device the user
 * consents on: the first consent makes it (`created: true` in the audit), every later one
 * decides again on the scopes it asked about and keeps the rest (`created: false`). So revoking
 * it ends every token of the connection, and a scope a later consent refuses ends for every token
 * of it at once. Each consent that gives something also renews the grant's lifetime (`ttl.Grant`,
 * provider-tokens.ts) from that moment.
 */
import { isBlockedFor } from './blocked-clients';
import type { Client, Provider } from 'oidc-provider';
import type { DataSource } from 'typeorm';
import type { AuditService } from '../audit/audit.service';
import { USABLE_USER } from '../users/usable-user';
import type { UserRole } from '../users/users.dto';
import type { OAuthTokenCache } from './oauth-token-cache';
import { connectionGrantId, underConnectionLock } from './oidc-adapter';
import { isApiScope, isKnownScope, OIDC_SCOPES, registeredScopes, withinUserRole } from './scopes';

/** A form field that may come once or repeated (`scope=a&scope=b`). */
export const formList = (v: unknown): string[] => (Array.isArray(v) ? v : v === undefined ? [] : [v]).filter((x): x is string => typeof x === 'string');

const isOidc = (s: string) => (OIDC_SCOPES as readonly string[]).includes(s);

/**
 * The scopes a request asks the user about: known to the service, and within what the client
 * registered now. The provider checks the OIDC ones at the request only: a device code or a
 * sign-in issued before an update of the client took one away still asks for it.
 */
export function requestedScopes(client: Client | undefined, scopeParam: unknown): string[] {
  const allowed = registeredScopes(client);
  const asked = [...new Set(String(scopeParam ?? '').split(' '))];
  return asked.filter((s) => isKnownScope(s) && (!allowed || allowed.has(s)));
}

/**
 * The scopes that come with any approval of a request that asks for them, so the pages offer no box
 * for them. Refusing `openid` would leave an OpenID request without the id_token its token
 * response must carry (OIDC Core 3.1.3.3): the app's sign-in fails, and every later one too, since
 * the grant remembers the refusal and the provider no longer asks. `offline_access` decides
 * nothing: refresh tokens come without it (`issueRefreshToken`, oidc-provider.factory.ts).
 */
const INCLUDED_SCOPES: readonly string[] = ['openid', 'offline_access'];

export const isIncludedScope = (s: string) => INCLUDED_SCOPES.includes(s);

/**
 * A hidden field the consent pages send beside their boxes. A browser sends no field for an
 * unticked box, so without it a user who unticked every box would be read as having sent no
 * choice at all, which CONTRACT makes a grant of everything requested.
 */
export const SCOPES_SHOWN = 'scopes_shown';

/**
 * The scopes granted of those requested: the ticked ones and the included ones; when the form
 * carried no choice at all (no box and no SCOPES_SHOWN), all of them (CONTRACT).
 */
export function grantedScopes(requested: string[], ticked: string[], shown: boolean): string[] {
  return ticked.length || shown ? requested.filter((s) => isIncludedScope(s) || ticked.includes(s)) : requested;
}

/**
 * Whether an approval granting `granted` gives the app anything; the app gets `access_denied` for
 * one that does not (`nothingGranted`), which makes no grant where the user had none (no
 * `auth.grant.created` row, no refusal remembered, so the next authorization asks again). Where
 * the user gave the app a grant before, what was unticked is refused on it all the same
 * (`recordConsent`, `givesNothing`): the page said "untick what you do not want to give", and an
 * earlier token must not keep it. `offline_access` alone gives nothing (it is not even in the
 * token), so it does not count. `openid` does: asked for, it comes with the approval, so unticking
 * every box of such a request approves the sign-in (openid alone, the API scopes refused alike);
 * only a request without it comes to nothing. Of the scopes a page offers, it says whether an Allow
 * could give anything at all: the pages offer no Allow otherwise.
 */
export function grantsAnything(granted: string[]): boolean {
  return granted.some((s) => s !== 'offline_access');
}

/**
 * The `access_denied` description for an Allow that grants nothing: the user did not deny (so not
 * "The user denied the request"), either nothing the user may give was asked for (`grantable`,
 * what the user's role may give of the request) or the user unticked all of it.
 */
export function nothingGranted(grantable: string[]): string {
  return grantsAnything(grantable) ? 'The user granted none of what the app asked for' : 'Nothing the app asked for could be granted';
}

/**
 * What a submitted consent form decides, the same on the code flow's page and the device page: the
 * scopes asked about (`requestedScopes`), those the user's role may give (`grantable`, the rest
 * refused with what was unticked, or the provider would ask again), those given, and whether an
 * Allow gives anything (`grantsAnything`).
 */
export function scopeDecision(client: Client | undefined, scopeParam: unknown, role: UserRole, form: Record<string, unknown>) {
  const requested = requestedScopes(client, scopeParam);
  const grantable = withinUserRole(requested, role);
  const granted = grantedScopes(grantable, formList(form.scope), form[SCOPES_SHOWN] !== undefined);
  return { requested, grantable, granted, givesNothing: !grantsAnything(granted) };
}

type Grant = InstanceType<Provider['Grant']>;

/** Takes scopes out of those the grant refused: ticked now, they are granted (the provider lets a refusal win). */
function unreject(grant: Grant, resource: string, scopes: string[]): void {
  const rejected = (grant as unknown as { rejected?: { openid?: { scope?: string }; resources?: Record<string, string> } }).rejected;
  const keep = (list: string) => list.split(' ').filter((s) => !scopes.includes(s)).join(' ');
  if (rejected?.openid?.scope) rejected.openid.scope = keep(rejected.openid.scope);
  if (rejected?.resources?.[resource]) rejected.resources[resource] = keep(rejected.resources[resource]);
}

/**
 * What recording a decision came to: the grant it is on; nothing (it gave nothing, and refused
 * nothing or had no grant to refuse it on); or nothing because the user is gone meanwhile.
 */
export type Recorded = { grantId: string } | 'nothing_recorded' | 'account_gone' | 'client_blocked';

/**
 * Saves the decision on the user's grant for the client (made by the first consent) and its
 * `auth.grant.created` audit row (SPEC 6.4). `grantId` is the one the browser session knows
 * for the client, if any. A decision that gives nothing (`givesNothing`, see `grantsAnything`)
 * makes no grant: its refusals are saved on the grant there is, else nothing is (`nothing_recorded`).
 */
export async function recordConsent(
  deps: { provider: Provider; audit: AuditService; db: DataSource; tokenCache: OAuthTokenCache },
  o: {
    grantId?: string;
    tenantId: string;
    accountId: string;
    clientId: string;
    requested: string[];
    granted: string[];
    resource: string;
    source: 'authorization_code' | 'device';
    givesNothing?: boolean;
  },
): Promise<Recorded> {
  const { provider, audit, db, tokenCache } = deps;
  const refused = o.requested.filter((s) => !o.granted.includes(s));
  if (o.givesNothing && !refused.length) return 'nothing_recorded';
  const join = (scopes: string[]) => scopes.join(' ');
  const made = await underConnectionLock(db, o.accountId, o.clientId, async (m) => {
    // The user's row is share-locked until the grant is in: a deletion or disabling at the same
    // moment either came first (no grant) or waits, and then ends the grant with the user's others.
    const [user]: Array<{ usable: boolean }> = await m.query(`SELECT ${USABLE_USER} AS usable FROM users WHERE tenant_id = $1 AND id = $2 FOR SHARE`, [o.tenantId, o.accountId]);
    if (!user?.usable) return 'account_gone' as const;
    // What the client may ask for now, share-locked against an update of the client (which holds its
    // row while it narrows the client's grants, clients.service.ts): this consent passed the
    // provider's checks before, and an update committed since took from every grant but this one,
    // saved after; an update that comes after it waits for the grant and narrows it with the others.
    const [client]: Array<{ scope: string | null }> = await m.query(`SELECT payload->>'scope' AS scope FROM oidc_models WHERE model = 'Client' AND id = $1 FOR SHARE`, [o.clientId]);
    // Under the same lock, which a block takes exclusively (blocked-clients.ts): blocked before, no grant; after, it ends this one.
    if (await isBlockedFor(m, o.tenantId, o.clientId)) return 'client_blocked' as const;
    const allowed = registeredScopes(client);
    const granted = allowed ? o.granted.filter((s) => allowed.has(s)) : o.granted;
    const ofConnection = async (id: string | undefined) => {
      const grant = id ? await provider.Grant.find(id) : undefined;
      return grant?.accountId === o.accountId && grant.clientId === o.clientId ? grant : undefined;
    };
    const existing = (await ofConnection(o.grantId)) ?? (await ofConnection(await connectionGrantId(m, o.accountId, o.clientId)));
    if (!existing && o.givesNothing) return 'nothing_recorded' as const;
    const grant = existing ?? new provider.Grant({ accountId: o.accountId, clientId: o.clientId });
    unreject(grant, o.resource, granted);
    if (granted.some(isOidc)) grant.addOIDCScope(join(granted.filter(isOidc)));
    if (refused.some(isOidc)) grant.rejectOIDCScope(join(refused.filter(isOidc)));
    if (granted.some(isApiScope)) grant.addResourceScope(o.resource, join(granted.filter(isApiScope)));
    if (refused.some(isApiScope)) grant.rejectResourceScope(o.resource, join(refused.filter(isApiScope)));
    // The provider keeps a grant's end from its first save: the user approving the app again gives
    // it its full lifetime from now (an Allow that gives nothing is a Deny, and renews nothing).
    if (!o.givesNothing) grant.exp = undefined;
    const grantId = await grant.save();
    // In the grant's transaction: a grant saved without its row would be access given with no trace.
    const details = { source: o.source, created: !existing, scope: join(granted) };
    await audit.record({ tenantId: o.tenantId, action: 'auth.grant.created', clientId: o.clientId, userId: o.accountId, grantId, details }, m);
    return { grantId, created: !existing };
  });
  if (typeof made === 'string') return made;
  // The grant's tokens are good for what it holds now (oauth-tokens.ts): resolutions cached before this decision are not.
  if (!made.created) await tokenCache.invalidate();
  return { grantId: made.grantId };
}
