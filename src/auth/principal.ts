/**
 * Who is calling. The bearer guard turns every kind of credential into a Principal, and
 * everything after the guard sees only this, so API keys and OAuth tokens obey one rule set.
 */
import type { PermissionMap, Role, Tier } from '../keys/api-key.entity';

export interface Principal {
  tenantId: string;
  /** API key id or OAuth grant/token id: the rate-limit bucket and the "originating credential". */
  credentialId: string;
  kind: 'api_key' | 'oauth';
  role: Role;
  isRootTenant: boolean;
  /** Stamped on every item this credential writes. */
  source: string;
  defaultTier: Tier;
  typePerms: PermissionMap;
  extensionPerms: PermissionMap;
  edgePerms: PermissionMap;
  /**
   * OAuth scopes as granted; undefined for API keys, and for the credential of a client that
   * registered no scope (principalByCredential), whose tokens were given whatever they asked for:
   * what its work may do is then its token's scopes alone (withinTokenScopes).
   */
  scopes?: string[];
  /** The user an OAuth grant acts for (caps that hold per person, whatever their grants); undefined for API keys and client credentials. */
  userId?: string;
}

/** What a bearer token resolved to: a principal, or the reason it did not. */
export type Resolution = { principal: Principal } | { error: 'unauthorized' | 'expired_token' };

/** The prefixes of the OAuth tokens the provider issues (provider-tokens.ts); the bearer strategy routes by the first. */
export const OAUTH_ACCESS_TOKEN_PREFIX = 'svc_at_';
export const OAUTH_REFRESH_TOKEN_PREFIX = 'svc_rt_';
/** The prefix of the client secrets the service issues (client-secret-claim.ts). */
export const OAUTH_CLIENT_SECRET_PREFIX = 'svc_cs_';

/**
 * Extension point for the OAuth issue: a provider under this token resolves `svc_at_` tokens.
 * Until one is registered, such tokens are simply unknown (401).
 */
export const OAUTH_TOKEN_RESOLVER = Symbol('OAUTH_TOKEN_RESOLVER');
export interface OAuthTokenResolver {
  resolve(token: string): Promise<Resolution>;
  /** The Principal the credential (a grant, or `client:<id>:<secret tag>` for a client's tokens) stands for now; null once revoked. */
  principalByCredential(tenantId: string, credentialId: string): Promise<Principal | null>;
}

/**
 * A client's tokens stand for `client:<client id>:<secret tag>` (oidc/client-secret-claim.ts), so
 * that what they started ends when the secret is rotated. Who *owns* that work (sees and manages
 * its webhooks and bulk jobs, shares its idempotency keys) is the client, whichever secret: the
 * credential without its tag. Any other credential owns its own.
 */
export const CLIENT_SECRET_TAG = /^(client:.+):([0-9a-f]{16})$/;

export function ownerCredential(credentialId: string): string {
  return CLIENT_SECRET_TAG.exec(credentialId)?.[1] ?? credentialId;
}

/** `ownerCredential` of a credential column, in SQL. */
export const ownerCredentialSql = (column: string) => `regexp_replace(${column}, '^(client:.+):[0-9a-f]{16}$', '\\1')`;

/**
 * Whether a caller owns work another credential started (a bulk job, and the events of its end;
 * and webhooks, whose `OWNED_BY` is `ownsWorkSql`): the same `ownerCredential`, and, as
 * the tokens of one OAuth client or grant share that credential, no scope of the work's token the
 * caller's token lacks, so a narrower token cannot see, change or receive a wider one's work.
 * Scopes are the tokens' (`tokenScopesOf`: null for an API key); a token's work whose scopes were
 * not kept (null) is an admin's. Admins, who own every work of their tenant, are not asked here.
 */
export function ownsWork(
  callerCredential: string,
  callerScopes: readonly string[] | null,
  workCredential: string,
  workScopes: readonly string[] | null | undefined,
): boolean {
  if (ownerCredential(callerCredential) !== ownerCredential(workCredential)) return false;
  return callerScopes === null || (!!workScopes && workScopes.every((scope) => callerScopes.includes(scope)));
}

/**
 * `ownsWork` in SQL, for a work's credential column and its token scopes (a text[] expression),
 * over two parameters from `$at`: the caller's `ownerCredential` and token scopes.
 */
export const ownsWorkSql = (credentialColumn: string, workScopes: string, at: number) =>
  `(${ownerCredentialSql(credentialColumn)} = $${at} AND ($${at + 1}::text[] IS NULL OR ${workScopes} <@ $${at + 1}::text[]))`;
