/**
 * The scope grammar of SPEC 5.4, and what a set of granted scopes lets a token do, as the same
 * permission maps an API key carries (auth/permissions.ts then decides everything alike):
 *
 *   <type pattern>:read|write   items of matching types (`core.note:read`, `core.*:write`, `*:read`)
 *   edge.<edge type>:read|write  edges of that type (dual-gated with the item type's write)
 *   metadata:read|write          tags
 *   metadata.<sub>:write         a metadata sub-resource (`metadata.types:write` gates POST /types)
 *   openid, profile, email, offline_access   OIDC's own
 */
import { isDottedName, isPattern } from '../common/type-pattern';
import type { Client, Grant } from 'oidc-provider';
import type { Principal } from '../auth/principal';
import type { Access, PermissionMap } from '../keys/api-key.entity';

export const OIDC_SCOPES = ['openid', 'profile', 'email', 'offline_access'] as const;

const ACCESS = new Set(['read', 'write']);

/** One API scope, parsed; undefined when the text is not one. */
export function parseScope(scope: string): { kind: 'type' | 'edge'; name: string; access: Access } | { kind: 'metadata'; name: string } | undefined {
  const at = scope.lastIndexOf(':');
  if (at < 1) return undefined;
  const subject = scope.slice(0, at);
  const access = scope.slice(at + 1);
  if (!ACCESS.has(access)) return undefined;
  if (subject === 'metadata') return { kind: 'metadata', name: scope };
  if (subject.startsWith('metadata.')) return access === 'write' && isDottedName(subject) ? { kind: 'metadata', name: scope } : undefined;
  if (subject.startsWith('edge.')) {
    const edgeType = subject.slice('edge.'.length);
    return isDottedName(edgeType) ? { kind: 'edge', name: edgeType, access: access as Access } : undefined;
  }
  return isPattern(subject) ? { kind: 'type', name: subject, access: access as Access } : undefined;
}

/**
 * What a user of `role` may give an app of the scopes asked: a member cannot give what only an
 * admin may do (`metadata.<sub>:write`, such as managing types, which a member API key cannot
 * either); an admin can give everything.
 */
export function withinUserRole(scopes: readonly string[], role: 'admin' | 'member'): string[] {
  return role === 'admin' ? [...scopes] : scopes.filter((scope) => !scope.startsWith('metadata.'));
}

export function isApiScope(scope: string): boolean {
  return parseScope(scope) !== undefined;
}

export function isKnownScope(scope: string): boolean {
  return (OIDC_SCOPES as readonly string[]).includes(scope) || isApiScope(scope);
}

/** The permission maps granted scopes amount to; `write` wins over `read` for one pattern. */
export function permissionsOf(scopes: readonly string[]): { typePerms: PermissionMap; edgePerms: PermissionMap } {
  const typePerms: PermissionMap = {};
  const edgePerms: PermissionMap = {};
  for (const scope of scopes) {
    const parsed = parseScope(scope);
    if (!parsed || parsed.kind === 'metadata') continue;
    const map = parsed.kind === 'type' ? typePerms : edgePerms;
    if (map[parsed.name] !== 'write') map[parsed.name] = parsed.access;
  }
  return { typePerms, edgePerms };
}

/** What a long-lived piece of work keeps of its starter: an OAuth token's scopes; null for an API key. */
export function tokenScopesOf(p: Principal): string[] | null {
  return p.kind === 'oauth' ? (p.scopes ?? []) : null;
}

/**
 * `now` (principalByCredential's answer) held to the scopes of the token that started something
 * long-lived (`tokenScopesOf`): the scopes both have, and the permission maps of those.
 * `tokenScopes` null (an API key, whose credential is the key itself) leaves `now` as it is. A
 * client that registered no scope bounds nothing (`now.scopes` undefined): the token's scopes
 * stand. The extension grant is the client's (not a scope) and follows the client as it is now.
 */
export function withinTokenScopes(now: Principal, tokenScopes: readonly string[] | null | undefined): Principal {
  if (now.kind !== 'oauth' || !tokenScopes) return now;
  const granted = now.scopes ? now.scopes.filter((scope) => tokenScopes.includes(scope)) : [...tokenScopes];
  return { ...now, ...permissionsOf(granted), scopes: granted };
}

/** The words of a space-delimited scope value (RFC 6749 3.3). */
export const scopeWords = (scope: string | null | undefined): string[] => (scope ?? '').split(' ').filter(Boolean);

/** The scopes a grant holds now (given and not refused since), for the API as `resource`. */
export function grantScopes(grant: Grant, resource: string): string[] {
  return scopeWords(`${grant.getOIDCScope()} ${grant.getResourceScope(resource)}`);
}

const isGrant = (holder: Grant | Client): holder is Grant => 'getOIDCScope' in holder;

/**
 * The scopes a client registered, which bound what it may ask for; undefined when it registered
 * none, which the provider reads as no bound (its own checks test `client.scope` for truth).
 */
export const registeredScopes = (client: { scope?: unknown } | undefined): Set<string> | undefined =>
  typeof client?.scope === 'string' && client.scope ? new Set(scopeWords(client.scope)) : undefined;

/**
 * Of the scopes a token was issued with, those it is good for now: the ones its grant still holds
 * (a later consent may have refused some, a client update taken some away), or, for a token
 * without a grant (client credentials), those its client is still registered for (a client
 * that registered none keeps the token's).
 */
export function scopesStillHeld(scope: string | undefined, holder: Grant | Client, resource: string): string[] {
  const stillHeld = isGrant(holder) ? new Set(grantScopes(holder, resource)) : registeredScopes(holder);
  return scopeWords(scope).filter((s) => !stillHeld || stillHeld.has(s));
}
