/**
 * Who may call each operation, in the document: the security schemes (API keys and OAuth access
 * tokens as bearer tokens, the OAuth provider's flows and scopes, client authentication, the
 * account pages' cookie) and each route's requirement, derived from the same metadata the guards
 * read (auth/decorators.ts), so that the document cannot say otherwise than the guards do.
 */
import type { INestApplication, Type } from '@nestjs/common';
import { ModulesContainer, Reflector } from '@nestjs/core';
import type { OpenAPIObject, SecuritySchemeObject } from '@nestjs/swagger';
import { BOOTSTRAP_ROUTE, PUBLIC_ROUTE, REQUIREMENT, Requirement } from '../auth/decorators';
import { ACCOUNT_COOKIE } from '../oidc/account-session';
import { OIDC_ROUTES } from '../oidc/oidc-routes';
import { OAUTH_EXTENSION, OAuthNeeds } from './api-oauth.decorator';

/** The scopes of SPEC 5.4, as templates where the grammar takes a name (`<type>`). */
const API_SCOPES: Record<string, string> = {
  '<type>:read': 'Read items of the types `<type>` matches',
  '<type>:write': 'Create, change and trash items of the types `<type>` matches (write implies read)',
  '*:read': 'Read items of every type',
  '*:write': 'Create, change and trash items of every type',
  'edge.<type>:read': 'Read edges of the edge type `<type>` (and the items at both ends need read)',
  'edge.<type>:write': 'Create or delete edges of the edge type `<type>`; the source item\'s type needs write too',
  'metadata:read': 'Read tags: without it items come without `tags`, and a `tags` filter is 403',
  'metadata:write': 'Write tags (and read them)',
  'metadata.types:write': 'Create, change and delete the tenant\'s types (POST, PATCH, DELETE /types); only an admin user can give it',
};

const OIDC_SCOPES: Record<string, string> = {
  openid: 'Sign-in: an id_token, and userinfo with `sub`',
  profile: 'The claims name, preferred_username and picture',
  email: 'The claims email and email_verified',
  offline_access: 'Asked for or not, code and device grants get a refresh token',
};

const SCOPE_GRAMMAR =
  'OAuth 2.1 access tokens (svc_at_…) of the service\'s provider, sent as bearer tokens. A token acts as a member with exactly its ' +
  'scopes (SPEC 5.4), plus its client\'s extension grant (extension namespaces are outside the scope grammar). `<type>` in a scope ' +
  'stands for a type pattern: `core.note` (that type), `core.bookmark.*` (it and everything below it, subtypes included) or `*` ' +
  '(every type); in `edge.<type>:…` it is an edge type\'s name. A client that registered a `scope` may ask only for those, literally. ' +
  '`metadata.<sub>:write` gates a metadata sub-resource: `metadata.types:write` is the one there is. Client credentials carry API ' +
  'scopes only. The device flow (RFC 8628: POST /auth/device, then POST /auth/device/token) issues the same tokens. An operation\'s ' +
  'requirement lists the scopes it always needs, as templates; its description says what else it checks.';

/** The schemes an operation's security refers to, with the provider's URLs as its discovery advertises them. */
export function securitySchemes(baseUrl: string): Record<string, SecuritySchemeObject> {
  const tokenUrl = `${baseUrl}${OIDC_ROUTES.token}`;
  return {
    // Opaque tokens, not JWTs: no bearerFormat.
    bearer: { type: 'http', scheme: 'bearer', description: 'API key (svc_k1_...) or OAuth access token (svc_at_...)' },
    oauth2: {
      type: 'oauth2',
      description: SCOPE_GRAMMAR,
      flows: {
        authorizationCode: {
          authorizationUrl: `${baseUrl}${OIDC_ROUTES.authorization}`,
          tokenUrl,
          refreshUrl: tokenUrl,
          scopes: { ...API_SCOPES, ...OIDC_SCOPES },
        },
        clientCredentials: { tokenUrl, scopes: API_SCOPES },
      },
    },
    openIdConnect: { type: 'openIdConnect', openIdConnectUrl: `${baseUrl}/.well-known/openid-configuration`, description: 'The same provider, by its discovery document' },
    client_basic: { type: 'http', scheme: 'basic', description: 'OAuth client authentication (client_secret_basic): client_id and client_secret' },
    registration_token: { type: 'http', scheme: 'bearer', description: 'The registration_access_token of a dynamically registered client (RFC 7592)' },
    account_session: {
      type: 'apiKey',
      in: 'cookie',
      name: ACCOUNT_COOKIE,
      description: 'The account pages\' sign-in (POST /auth/sign-in with return_to, or sign-up): a browser cookie, not for API clients',
    },
  };
}

/** The handler of a route, as @nestjs/swagger's operationIdFactory names it: a controller class name and a method (`get[1]` for its second path). */
export interface RouteHandler {
  controller: string;
  method: string;
}

type Operation = NonNullable<OpenAPIObject['paths'][string]['get']>;

/** The OAuth scopes a route's `@Requires` names: a scope, or a permission that a scope grants. */
function scopesOf(requirement: Requirement | undefined): string[] {
  if (!requirement || 'admin' in requirement || 'apiKey' in requirement || 'extension' in requirement) return [];
  if ('scope' in requirement) return [requirement.scope];
  return 'type' in requirement ? [`${requirement.type}:${requirement.access}`] : [`edge.${requirement.edge}:${requirement.access}`];
}

/**
 * Each operation of a Nest route gets the security its guards apply: none on a `@Public()` route
 * (`security: []`; one that authenticates its caller itself says how with its own `@ApiSecurity`),
 * else an API key or, where it needs neither an admin nor an API key, an OAuth access token with the scopes it needs, or
 * nothing while bootstrap is open (`@AllowBootstrap()`). Operations whose handler is not found here
 * (the provider's, oidc/openapi-paths.ts) keep theirs.
 */
export function documentSecurity(app: INestApplication, document: OpenAPIObject, handlers: Map<string, RouteHandler>): void {
  const controllers = new Map<string, Type>();
  for (const module of app.get(ModulesContainer).values()) {
    for (const { metatype } of module.controllers.values()) if (metatype) controllers.set(metatype.name, metatype as Type);
  }
  const reflector = new Reflector();
  for (const item of Object.values(document.paths)) {
    for (const op of Object.values(item) as Array<Operation & { [OAUTH_EXTENSION]?: OAuthNeeds }>) {
      const needs = op[OAUTH_EXTENSION];
      delete op[OAUTH_EXTENSION];
      const route = op.operationId ? handlers.get(op.operationId) : undefined;
      const controller = route && controllers.get(route.controller);
      if (!route || !controller) continue;
      const targets = [controller.prototype[route.method.replace(/\[\d+\]$/, '')], controller];
      const meta = <T>(key: string) => reflector.getAllAndOverride<T>(key, targets);
      if (meta<boolean>(PUBLIC_ROUTE)) {
        op.security ??= [];
        continue;
      }
      const requirement = meta<Requirement>(REQUIREMENT);
      op.security = [{ bearer: [] }];
      if (!requirement || !('admin' in requirement || 'apiKey' in requirement)) {
        op.security.push({ oauth2: [...new Set([...scopesOf(requirement), ...(needs?.scopes ?? [])])] });
        if (needs?.note) op.description = [op.description, `OAuth access tokens: ${needs.note}`].filter(Boolean).join(' ');
      }
      if (meta<boolean>(BOOTSTRAP_ROUTE)) op.security.push({});
    }
  }
}
