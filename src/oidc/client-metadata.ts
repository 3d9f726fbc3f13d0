/**
 * The service's rules of a client's metadata, beyond oidc-provider's own: the metadata it adds
 * (a tenant, an extension grant: POST /auth/clients only), the rules of a client as a whole,
 * checked on every load, and open registration's limits (RFC 7591), as POST /auth/clients
 * applies them (clients.dto.ts).
 */
import type { ClientMetadata, Configuration } from 'oidc-provider';
import { cutText, textIssue } from '../common/input-policy';
import { LOOPBACK_HOSTS } from '../common/target-policy';
import { codePointLength } from '../common/validation';
import { isUserName } from '../users/users.dto';
import { repeatedLists, uselessClientProblem } from './client-registration';

/** Client metadata the service adds: the tenant an admin-registered client belongs to, and its default extension grant (SPEC 5.4). */
const EXTRA_CLIENT_METADATA = ['tenant_id', 'extension_permissions'] as const;

/** The provider's `extraClientMetadata`: the service's metadata, and the validator of its rules. */
export function extraClientMetadata(errors: typeof import('oidc-provider').errors): NonNullable<Configuration['extraClientMetadata']> {
  return {
    properties: [...EXTRA_CLIENT_METADATA],
    validator(ctx, key, value, metadata) {
      // Rules of the client as a whole, beyond oidc-provider's own; checked on every load too, so
      // a client stored before a rule cannot get around it (but for one, see refuseUnsafeClient).
      if (key === 'tenant_id') refuseUnsafeClient(metadata, errors, ctx?.oidc?.route === 'registration');
      if (key === 'tenant_id' && ctx?.oidc?.route === 'registration') refuseOddRegistration(metadata, errors);
      // Open registration (RFC 7591) makes tenant-less clients; only an admin (POST /auth/clients) gives one a tenant or an extension grant.
      if (value !== undefined && ctx?.oidc?.route === 'registration') {
        throw new errors.InvalidClientMetadata(`${key} is set by POST /auth/clients only`);
      }
      if (key === 'extension_permissions' && value !== undefined) {
        const ok = value !== null && typeof value === 'object' && !Array.isArray(value) && Object.values(value).every((v) => v === 'read' || v === 'write');
        if (!ok) throw new errors.InvalidClientMetadata('extension_permissions must map namespace patterns to "read" or "write"');
      }
    },
  };
}

function refuseUnsafeClient(metadata: ClientMetadata, errors: typeof import('oidc-provider').errors, registration: boolean): void {
  // RFC 6749 4.4: client_credentials is for confidential clients only. A public client's id is
  // no secret, so anyone knowing it would get the tenant's tokens.
  // Not checked by the provider yet (the validator runs first): any JSON may stand there.
  const grantTypes: unknown[] = Array.isArray(metadata.grant_types) ? metadata.grant_types : [];
  if (metadata.token_endpoint_auth_method === 'none' && grantTypes.includes('client_credentials')) {
    throw new errors.InvalidClientMetadata('client_credentials needs a confidential client (token_endpoint_auth_method other than none)');
  }
  // A client-credentials token acts in its client's tenant; an openly registered client has none,
  // so its tokens would be refused by the API while introspection called them active. At
  // registration only: a client registered before this rule keeps loading, for its users'
  // consents (its client-credentials tokens were never of use).
  if (registration && !metadata.tenant_id && grantTypes.includes('client_credentials')) {
    throw new errors.InvalidClientMetadata('client_credentials needs a client of a tenant: an admin registers it with POST /auth/clients');
  }
  // OAuth 2.1 and RFC 8252 8.3: a code or a logout may go back over plain http to the user's own
  // machine only; elsewhere anyone on the path could read it.
  for (const uri of redirectUrisOf(metadata)) {
    const url = URL.canParse(uri) ? new URL(uri) : undefined;
    if (url?.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname)) {
      // The class takes no description of its own (its default speaks of a redirect_uri mismatch).
      throw Object.assign(new errors.InvalidRedirectUri(), {
        error_description: `${uri}: plain http is allowed only to a loopback host (127.0.0.1, [::1], localhost); use https`,
      });
    }
  }
}

/** The redirect and post-logout redirect URIs of metadata not yet checked by the provider (the validator runs first). */
function redirectUrisOf(metadata: ClientMetadata): string[] {
  const lists: unknown[] = [metadata.redirect_uris, metadata.post_logout_redirect_uris];
  return lists.flatMap((list) => (Array.isArray(list) ? list.filter((uri): uri is string => typeof uri === 'string') : []));
}

/** The limits POST /auth/clients documents (clients.dto.ts): a list takes at most 20 entries, a URI 2000 characters. */
const MAX_LIST_ENTRIES = 20;
const MAX_URI_LENGTH = 2000;

/** An authority's user information and port as written (URL normalizes them away: `:08080` reads as 8080). */
const AUTHORITY = /^[a-z][a-z0-9+.-]*:\/\/(?<userinfo>[^/?#@]*@)?(?:\[[^\]/?#]*\]|[^/?#:]*)(?::(?<port>[^/?#]*))?/i;

/** Why open registration refuses a redirect URI the provider's own rules let through, or undefined. */
function redirectUriProblem(uri: string): string | undefined {
  if (uri.length > MAX_URI_LENGTH) return `longer than ${MAX_URI_LENGTH} characters`;
  const url = URL.parse(uri);
  if (!url) return undefined; // the provider's own message
  const scheme = url.protocol.slice(0, -1);
  // OAuth 2.1 drops the out-of-band "redirect"; RFC 8252 7.1: a private-use scheme is a reverse domain name (com.example.app).
  if (scheme === 'urn') return 'out-of-band (urn:) redirects are not supported: use a loopback or a reverse-domain private-use URI (RFC 8252)';
  if (scheme !== 'http' && scheme !== 'https' && !scheme.includes('.')) return `a private-use scheme must be a reverse domain name such as com.example.app (RFC 8252 7.1), not ${scheme}`;
  const authority = AUTHORITY.exec(uri)?.groups;
  // RFC 6749 3.1.2 wants an absolute URI to send a code to, not credentials for it.
  if (authority?.userinfo !== undefined || url.username || url.password) return 'must not carry a user name or password';
  if (authority?.port !== undefined && !/^[1-9][0-9]{0,4}$/.test(authority.port)) return 'a port, when given, is 1-65535 written without leading zeros';
  return undefined;
}

/** POST /auth/clients' limits on the other text it takes (clients.dto.ts), in characters as it counts them (codePointLength). */
const MAX_TEXT_LENGTHS = { client_uri: 2000, logo_uri: 2000, policy_uri: 2000, tos_uri: 2000, scope: 4000 } as const;
const MAX_CONTACT_LENGTH = 320;

/** The name rule (isUserName), as POST /auth/clients words it for `client_name` (IsUserName's message). */
const CLIENT_NAME_RULE = 'client_name must be 1 to 200 characters, not blank, without control characters or bidirectional override characters';

/**
 * Open registration's limits beyond the provider's rules (RFC 7591 error form): a client that
 * could get a token (uselessClientProblem), list sizes, URI lists without repeats and text lengths as POST /auth/clients takes them, the display name the pages show (consent, device,
 * sign-in, logout, connected apps) under the service's name rule as there, and redirect URIs of the
 * forms `redirectUriProblem` refuses. At registration only, like the tenant rule of
 * `refuseUnsafeClient`: a client stored before keeps loading.
 */
function refuseOddRegistration(metadata: ClientMetadata, errors: typeof import('oidc-provider').errors): void {
  const useless = uselessClientProblem(metadata);
  if (useless) throw new errors.InvalidClientMetadata(`${useless.field} ${useless.message}`);
  for (const [key, value] of Object.entries(metadata)) {
    if (Array.isArray(value) && value.length > MAX_LIST_ENTRIES) throw new errors.InvalidClientMetadata(`${key} takes at most ${MAX_LIST_ENTRIES} entries`);
  }
  // Subjects are public (subject_types_supported), so a sector means nothing; the provider would
  // fetch it, a registrant's URL, while registration holds its transaction (oidc-provider.ts).
  if (metadata.sector_identifier_uri !== undefined) throw new errors.InvalidClientMetadata('sector_identifier_uri is not supported: subjects are public');
  const [repeated] = repeatedLists(metadata);
  if (repeated) throw new errors.InvalidClientMetadata(`${repeated.field} ${repeated.message}`);
  const name: unknown = metadata.client_name;
  // Not a string: the provider's own message. NUL or a lone surrogate: the input policy's invalid_request (oidc-adapter.ts).
  if (typeof name === 'string' && !textIssue(name) && !isUserName(name)) throw new errors.InvalidClientMetadata(CLIENT_NAME_RULE);
  for (const [key, max] of Object.entries(MAX_TEXT_LENGTHS)) {
    const value: unknown = metadata[key];
    if (typeof value === 'string' && codePointLength(value) > max) throw new errors.InvalidClientMetadata(`${key} takes at most ${max} characters`);
  }
  const contacts: unknown = metadata.contacts;
  if (Array.isArray(contacts) && contacts.some((c) => typeof c === 'string' && codePointLength(c) > MAX_CONTACT_LENGTH)) {
    throw new errors.InvalidClientMetadata(`contacts: an address takes at most ${MAX_CONTACT_LENGTH} characters`);
  }
  for (const uri of redirectUrisOf(metadata)) {
    const problem = redirectUriProblem(uri);
    if (problem) {
      throw Object.assign(new errors.InvalidRedirectUri(), { error_description: `${uri.length > 100 ? `${cutText(uri, 100)}…` : uri}: ${problem}` });
    }
  }
}
