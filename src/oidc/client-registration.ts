/**
 * What a client's registration decides about the users and scopes its tokens serve: an admin's
 * registration (POST /auth/clients) ties the client to a tenant and may grant it extensions; an
 * openly registered one has neither. Pure, so the token resolver (oauth-tokens.ts), the consent
 * pages and introspection (provider-introspection.ts) apply one rule.
 */
import type { Client } from 'oidc-provider';
import type { PermissionMap } from '../keys/api-key.entity';
import { withinUserRole } from './scopes';

/** What an admin's registration (POST /auth/clients) adds to a client; an openly registered one has neither. */
export function clientRegistration(client: Client | undefined): { tenantId?: string; extensions: PermissionMap } {
  const metadata = (client?.metadata() ?? {}) as { tenant_id?: string; extension_permissions?: PermissionMap };
  return { tenantId: metadata.tenant_id, extensions: metadata.extension_permissions ?? {} };
}

/** Whether the client came by open registration (RFC 7591), not from a tenant's admin. */
export const isSelfRegistered = (client: Client | undefined): boolean => clientRegistration(client).tenantId === undefined;

/** Whether `user` may authorize `client`: a client of a tenant is for its users alone, an open one for anyone. */
export function servesUser(client: Client | undefined, user: { tenant_id: string }): boolean {
  const { tenantId } = clientRegistration(client);
  return tenantId === undefined || tenantId === user.tenant_id;
}

/**
 * What a token of `client` may do of `scopes` for its user as the user is now (`accountId`
 * undefined: a client-credentials token, all of them): bounded by the user's role (a grant made
 * before a demotion loses what the role no longer gives), and nothing (undefined) once the user
 * is gone, or for a user of another tenant than the client's (a grant made before the consent
 * pages checked).
 */
export function scopesForUser(
  client: Client,
  accountId: string | undefined,
  user: { tenant_id: string; role: 'admin' | 'member' } | undefined,
  scopes: string[],
): string[] | undefined {
  const given = scopes.filter(Boolean);
  if (accountId === undefined) return given;
  if (!user || !servesUser(client, user)) return undefined;
  return withinUserRole(given, user.role);
}

/** The lists of URIs a client registers, each a set of exact strings (RFC 7591 2, OIDC RP-Initiated Logout 3.1). */
export const URI_LISTS = ['redirect_uris', 'post_logout_redirect_uris'] as const;

/** The lists a client registers as sets (the provider keeps a repeat as sent), and what each lists. */
export const SET_LISTS: Readonly<Record<string, string>> = { redirect_uris: 'URI', post_logout_redirect_uris: 'URI', grant_types: 'grant type', response_types: 'response type' };

/**
 * The lists of `metadata` that name a value twice, compared as sent (the provider matches a
 * redirect exactly, so two spellings are two URIs), each with its refusal: for an admin's
 * registration and update (clients.service.ts) and for open registration alike.
 */
export function repeatedLists(metadata: Record<string, unknown>): Array<{ field: string; message: string }> {
  return Object.entries(SET_LISTS).flatMap(([field, what]) => {
    const values = metadata[field];
    return Array.isArray(values) && new Set(values).size !== values.length ? [{ field, message: `must not list a ${what} twice` }] : [];
  });
}

/** Grants that get a client its first token (refresh_token only renews one). */
const FIRST_TOKEN_GRANTS = ['client_credentials', 'urn:ietf:params:oauth:grant-type:device_code'];

/**
 * Why metadata being registered, by an admin or openly (RFC 7591 2: the server may refuse
 * metadata that does not hold together), makes a client that could never get a token, or
 * undefined: no grant but refresh_token (authorization_code counts with response type `code`,
 * without which the provider drops it), or `private_key_jwt` with a key set of no key.
 * At registration only: a client stored before the rule keeps loading.
 */
export function uselessClientProblem(metadata: Record<string, unknown>): { field: string; message: string } | undefined {
  const listed = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
  if (!listed(metadata.response_types).includes('code') && !FIRST_TOKEN_GRANTS.some((grant) => listed(metadata.grant_types).includes(grant))) {
    return { field: 'grant_types', message: 'names no grant that gets a first token: authorization_code (with response type code), client_credentials or the device code grant' };
  }
  const jwks = metadata.jwks as { keys?: unknown } | undefined;
  if (metadata.token_endpoint_auth_method === 'private_key_jwt' && jwks && listed(jwks.keys).length === 0) {
    return { field: 'jwks', message: 'holds no key, so the client could never authenticate' };
  }
  return undefined;
}

/**
 * POST /auth/clients stores the lists as sent, while the provider acts on them corrected (RFC
 * 7591 2.1): response type `code` adds the authorization_code grant, and that grant without it is
 * dropped. So a client whose lists disagree would show grants it does not have, or lack one it
 * has: refused instead. (Open registration stores the provider's corrected lists.)
 */
export function grantResponseMismatch(grantTypes: string[], responseTypes: string[]): { field: string; message: string } | undefined {
  const code = responseTypes.includes('code');
  if (code === grantTypes.includes('authorization_code')) return undefined;
  return code
    ? { field: 'grant_types', message: 'must include authorization_code when response_types has code' }
    : { field: 'response_types', message: 'must include code with the authorization_code grant' };
}
