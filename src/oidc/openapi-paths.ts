/**
 * The provider's own endpoints (served by oidc-provider through oidc-mount.ts, not by Nest
 * controllers) as OpenAPI paths, so that GET /openapi.json describes every route. Errors there
 * are in RFC 6749 form (`x-error-format: oauth`), except the authorization endpoint, which
 * answers a browser (`html`) when it cannot redirect. Their 429 (and the rate-limit headers)
 * are added with every other route's, in openapi.ts.
 */
import type { OpenAPIObject, SchemaObject } from '@nestjs/swagger';
import { NO_STORE_EXTENSION } from '../common/security-headers';
import { errorResponse } from '../openapi/api-errors.decorator';
import { DEVICE_GRANT_TYPE } from './device-polling';
import { PROVIDER_BODY_LIMIT } from './provider-body';

type PathItem = OpenAPIObject['paths'][string];
type Operation = NonNullable<PathItem['get']>;

/** The grants of the token endpoint, as discovery's grant_types_supported lists them. */
const GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials', DEVICE_GRANT_TYPE];

/** An error in RFC 6749 (and RFC 6750) form; the userinfo controller uses it too. */
export const OAUTH_ERROR_SCHEMA = {
  type: 'object' as const,
  properties: {
    error: { type: 'string' as const },
    error_description: { type: 'string' as const },
    // oidc-provider's InvalidScope adds the scope it refused.
    scope: { type: 'string' as const, description: 'With invalid_scope: the requested scope that was refused' },
  },
  required: ['error'],
};
const oauthError = { description: 'RFC 6749 error: {"error","error_description"}', content: { 'application/json': { schema: OAUTH_ERROR_SCHEMA } } };
const object = (properties: Record<string, object>, required: string[] = []) => ({ type: 'object', properties, required, additionalProperties: true });
const json = (description: string, schema: object = { type: 'object', additionalProperties: true }) => ({ description, content: { 'application/json': { schema } } });
const form = (properties: Record<string, object>, required: string[]) => ({
  required: true,
  content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', properties, required } } },
});
const str = { type: 'string' };
const html = (description: string) => ({ description, content: { 'text/html': { schema: str } } });
const int = { type: 'integer' };
/** Client authentication at the token, revocation, introspection and device endpoints: HTTP Basic, or client_id (and client_secret) in the form. */
const clientAuth: Array<Record<string, string[]>> = [{ client_basic: [] }, {}];

const tokenResponse = object(
  { access_token: str, token_type: { type: 'string', enum: ['Bearer'] }, expires_in: int, scope: str, refresh_token: str, id_token: str },
  ['access_token', 'token_type', 'expires_in'],
);
const deviceAuthorization = object(
  { device_code: str, user_code: str, verification_uri: str, verification_uri_complete: str, expires_in: int, interval: int },
  ['device_code', 'user_code', 'verification_uri', 'expires_in'],
);
const introspection = object({ active: { type: 'boolean' }, scope: str, client_id: str, exp: int, iat: int, sub: str, token_type: str }, ['active']);
const jwkSet = { type: 'object', properties: { keys: { type: 'array', items: { type: 'object', additionalProperties: true } } }, required: ['keys'] };

/** An operation, open to anyone (`security: []`) unless `extra` says how its caller authenticates. */
function op(tag: string, summary: string, extra: Pick<Operation, 'responses'> & Partial<Operation>, errorFormat: 'oauth' | 'html' = 'oauth'): Operation {
  return { tags: [tag], summary, 'x-error-format': errorFormat, security: [], ...extra } as Operation;
}

/** An answer the provider sends with Cache-Control: no-store (tokens, client credentials): openapi.ts documents the header. */
const noStore = { [NO_STORE_EXTENSION]: true };

const uris = (description: string) => ({ type: 'array', maxItems: 20, uniqueItems: true, items: { type: 'string', maxLength: 2000 }, description });

/** RFC 7591 client metadata that open registration takes, with the limits POST /auth/clients applies (client-metadata.ts). */
const CLIENT_METADATA = {
  redirect_uris: uris('Exact-match redirect URIs: https, plain http to a loopback host only, or a reverse-domain private-use scheme (RFC 8252); required with the authorization_code grant'),
  grant_types: { type: 'array', uniqueItems: true, items: { type: 'string', enum: GRANT_TYPES }, description: 'Default authorization_code and refresh_token; client_credentials needs a client of a tenant (POST /auth/clients)' },
  response_types: { type: 'array', uniqueItems: true, items: { type: 'string', enum: ['code'] } },
  token_endpoint_auth_method: { type: 'string', description: 'Default client_secret_basic; `none` for a public client (PKCE, no secret); see discovery\'s token_endpoint_auth_methods_supported' },
  client_name: { type: 'string', minLength: 1, maxLength: 200, description: 'Shown to users on the sign-in, consent, device, logout and account pages' },
  scope: { type: 'string', maxLength: 4000, description: 'The scopes the client may ask for (SPEC 5.4 grammar, and openid, profile, email, offline_access)' },
  post_logout_redirect_uris: uris('Where RP-initiated logout may return to'),
  application_type: { type: 'string', enum: ['web', 'native'] },
  contacts: { type: 'array', maxItems: 20, items: { type: 'string', maxLength: 320 } },
  client_uri: { type: 'string', maxLength: 2000 },
  logo_uri: { type: 'string', maxLength: 2000 },
  policy_uri: { type: 'string', maxLength: 2000 },
  tos_uri: { type: 'string', maxLength: 2000 },
};

/** Named schemas of the provider's bodies, which the paths below refer to. */
export function oidcOpenApiSchemas(): Record<'DynamicClientRegistration' | 'DynamicClient', SchemaObject> {
  return {
    DynamicClientRegistration: {
      type: 'object',
      description: 'RFC 7591 client metadata; other metadata oidc-provider knows is taken as it defines it. tenant_id and extension_permissions are set by POST /auth/clients only (invalid_client_metadata)',
      properties: CLIENT_METADATA,
      additionalProperties: true,
    } as SchemaObject,
    DynamicClient: {
      type: 'object',
      description: 'The registered client\'s metadata (RFC 7591 3.2.1, RFC 7592 3): what it registered, with the provider\'s defaults filled in',
      properties: {
        client_id: str,
        client_id_issued_at: { ...int, description: 'Seconds since the epoch' },
        client_secret: { type: 'string', description: 'A confidential client\'s secret' },
        client_secret_expires_at: { ...int, description: 'With client_secret: 0, it does not expire' },
        registration_access_token: { type: 'string', description: 'The bearer token of GET registration_client_uri (RFC 7592)' },
        registration_client_uri: { type: 'string', format: 'uri', description: 'GET /auth/oauth2/register/{client_id}' },
        ...CLIENT_METADATA,
        id_token_signed_response_alg: { type: 'string', enum: ['RS256'] },
        subject_type: { type: 'string', enum: ['public'] },
        require_auth_time: { type: 'boolean' },
      },
      required: ['client_id', 'client_id_issued_at', 'registration_access_token', 'registration_client_uri', 'grant_types', 'response_types', 'token_endpoint_auth_method'],
      additionalProperties: true,
    } as SchemaObject,
  };
}

const schemaRef = (name: keyof ReturnType<typeof oidcOpenApiSchemas>) => ({ $ref: `#/components/schemas/${name}` });

export function oidcOpenApiPaths(): Record<string, PathItem> {
  const token = op('oauth', 'Token endpoint: grants authorization_code (with code_verifier), refresh_token (rotates; reuse is token_reuse_detected), client_credentials, device_code', {
    requestBody: form(
      { grant_type: { type: 'string', enum: GRANT_TYPES }, code: str, code_verifier: str, redirect_uri: str, refresh_token: str, device_code: str, scope: str, client_id: str, client_secret: str },
      ['grant_type'],
    ),
    security: clientAuth,
    responses: { 200: json('access_token (svc_at_…), token_type, expires_in, scope, refresh_token (svc_rt_…), id_token', tokenResponse), 400: oauthError, 401: oauthError },
    ...noStore,
  });
  // oidc-mount.ts hands the provider a preflight only: another OPTIONS is 404 not_found, as anywhere.
  const preflight = op('oauth', 'CORS preflight (answered by oidc-provider): the origin and the headers asked for are let in for POST, unless the client the POST names refuses the origin then', {
    parameters: [
      { name: 'Access-Control-Request-Method', in: 'header', required: true, schema: str },
      { name: 'Origin', in: 'header', schema: str },
      { name: 'Access-Control-Request-Headers', in: 'header', schema: str },
    ],
    responses: {
      204: { description: 'Access-Control-Allow-Origin (the Origin), Access-Control-Allow-Methods: POST, Access-Control-Allow-Headers (those asked for), Access-Control-Max-Age: 3600' },
      404: { ...errorResponse(404), description: 'Not a preflight (no Access-Control-Request-Method): not_found, as any OPTIONS elsewhere' },
    },
  });
  const discovery = op('oauth', 'OpenID Connect discovery / RFC 8414 metadata', { responses: { 200: json('Provider metadata') } });
  const jwks = op('oauth', 'JSON Web Key Set of the id_token signing keys (RS256)', {
    responses: { 200: { description: '{"keys":[…]}', content: { 'application/jwk-set+json': { schema: jwkSet } } } },
  });
  const authorize = op(
    'oauth',
    'Authorization endpoint (code + PKCE S256): client_id, redirect_uri, scope, state, code_challenge, code_challenge_method=S256; signs in and asks consent, then redirects with a code',
    {
      parameters: ['client_id', 'redirect_uri', 'scope', 'state', 'code_challenge', 'code_challenge_method', 'response_type', 'nonce'].map((name) => ({ name, in: 'query', schema: str })),
      responses: { 303: { description: 'To sign-in, consent, or the client with a code or an error' }, 400: html('An error page when the client cannot be redirected to') },
    },
    'html',
  );
  return withOperationIds(withBodyLimit(withUnavailable({
    '/.well-known/openid-configuration': { get: discovery },
    '/.well-known/oauth-authorization-server': { get: discovery },
    '/.well-known/jwks.json': { get: jwks },
    '/auth/jwks': { get: jwks },
    '/auth/authorize': { get: authorize },
    // Nest's POST (interactions.controller.ts) answers a 303 to the same.
    '/auth/oauth2/authorize': { get: { ...authorize, summary: 'Alias of GET /auth/authorize (SPEC 5.3 path)' } },
    '/auth/oauth2/token': { post: token, options: preflight },
    '/auth/token': { post: { ...token, summary: 'Back-compat alias of POST /auth/oauth2/token' }, options: preflight },
    '/auth/device/token': { post: { ...token, summary: 'Device flow polling: the token endpoint (authorization_pending, slow_down, expired_token, access_denied)' }, options: preflight },
    '/auth/device': {
      post: op('oauth', 'Device authorization (RFC 8628): device_code, user_code (XXX-XXXX), verification_uri, verification_uri_complete, expires_in, interval', {
        requestBody: form({ client_id: str, scope: str }, ['client_id']),
        security: clientAuth,
        responses: { 200: json('Device authorization response', deviceAuthorization), 400: oauthError, 401: oauthError },
      }),
    },
    '/auth/oauth2/revoke': {
      post: op('oauth', 'RFC 7009 revocation: always 200; an access token ends alone, a refresh token takes its whole grant; another client\'s token is left alone', {
        requestBody: form({ token: str, token_type_hint: str, client_id: str, client_secret: str }, ['token']),
        security: clientAuth,
        responses: { 200: { description: 'Revoked (or nothing to revoke)' }, 400: oauthError, 401: oauthError },
      }),
      options: preflight,
    },
    '/auth/oauth2/introspect': {
      post: op('oauth', 'RFC 7662 introspection: {active} and, when active, scope, client_id, exp', {
        requestBody: form({ token: str, token_type_hint: str, client_id: str, client_secret: str }, ['token']),
        security: clientAuth,
        responses: { 200: json('{"active":boolean,…}', introspection), 400: oauthError, 401: oauthError },
        ...noStore,
      }),
      options: preflight,
    },
    '/auth/oauth2/register': {
      post: op('oauth', 'RFC 7591 dynamic registration, unauthenticated: a tenant-less client (use POST /auth/clients for a tenant\'s own)', {
        requestBody: { required: true, content: { 'application/json': { schema: schemaRef('DynamicClientRegistration') } } },
        responses: { 201: json('Client metadata with client_id (and client_secret), registration_client_uri and registration_access_token', schemaRef('DynamicClient')), 400: oauthError },
        ...noStore,
      }),
    },
    '/auth/oauth2/register/{client_id}': {
      get: op('oauth', 'RFC 7592 read: a dynamically registered client\'s metadata, with its registration_access_token as the bearer token', {
        parameters: [{ name: 'client_id', in: 'path', required: true, schema: str }],
        security: [{ registration_token: [] }],
        responses: { 200: json('Client metadata', schemaRef('DynamicClient')), 401: oauthError },
        ...noStore,
      }),
    },
    '/auth/logout': {
      get: op(
        'oauth',
        'OIDC RP-initiated logout (end_session_endpoint): id_token_hint, post_logout_redirect_uri, state, client_id; asks the user to confirm. ' +
          'Errors: an HTML page for a browser (Accept: text/html), else RFC 6749 JSON',
        { responses: { 200: html('Confirmation page'), 303: { description: 'Back to post_logout_redirect_uri' }, 400: oauthError } },
      ),
    },
    // The provider's own steps, reached by its redirects and forms rather than called by clients.
    '/auth/authorize/{uid}': {
      get: op(
        'oauth',
        'Resumes an authorization once sign-in or consent is done (the provider redirects here): on to the client with a code or an error',
        { parameters: [{ name: 'uid', in: 'path', required: true, schema: str }], responses: { 303: { description: 'To the client, or to the next step' }, 400: html('Error page') } },
        'html',
      ),
    },
    '/auth/logout/confirm': {
      post: op(
        'oauth',
        'The logout confirmation form: with logout=yes ends the session, then back to post_logout_redirect_uri or the success page. Errors: an HTML page for a browser (Accept: text/html), else RFC 6749 JSON',
        { requestBody: form({ xsrf: str, logout: str }, ['xsrf']), responses: { 303: { description: 'To post_logout_redirect_uri or /auth/logout/success' }, 400: oauthError } },
      ),
    },
    '/auth/logout/success': {
      get: op('oauth', 'Signed-out page, when the logout named no post_logout_redirect_uri', { responses: { 200: html('HTML page') } }, 'html'),
    },
  })));
}

/** Paths whose answers need neither PostgreSQL nor Redis (the keys are loaded when the provider is built). */
const WITHOUT_DEPENDENCY = new Set(['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server', '/.well-known/jwks.json', '/auth/jwks', '/auth/logout/success']);

/**
 * The 503 of an endpoint that reads or writes the database (answerUnavailable in
 * provider-errors.ts): `temporarily_unavailable` with Retry-After, as an error page for a
 * browser, else RFC 6749 JSON. Preflights read nothing.
 */
function withUnavailable(paths: Record<string, PathItem>): Record<string, PathItem> {
  const unavailable = {
    description: 'A dependency is away: RFC 6749 error {"error":"temporarily_unavailable","error_description"} (an error page for a browser), with Retry-After',
    headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds' } },
    content: { 'application/json': { schema: OAUTH_ERROR_SCHEMA }, 'text/html': { schema: str } },
  };
  return Object.fromEntries(
    Object.entries(paths).map(([path, item]) => [
      path,
      WITHOUT_DEPENDENCY.has(path)
        ? item
        : Object.fromEntries(Object.entries(item).map(([method, o]) => [method, method === 'options' ? o : { ...(o as Operation), responses: { ...(o as Operation).responses, 503: unavailable } }])),
    ]),
  );
}

/** A POST body the provider would not read whole, as sent, or as UTF-8, is 413 or 415, in its error form (unreadableBody in provider-body.ts). */
function withBodyLimit(paths: Record<string, PathItem>): Record<string, PathItem> {
  const tooLarge = { ...oauthError, description: `The body is over ${PROVIDER_BODY_LIMIT} bytes: RFC 6749 error {"error":"invalid_request","error_description"}` };
  const encoded = { ...oauthError, description: 'The body was sent with a Content-Encoding other than identity, or in a charset other than UTF-8: RFC 6749 error {"error":"invalid_request","error_description"}' };
  return Object.fromEntries(
    Object.entries(paths).map(([path, item]) => [
      path,
      item.post ? { ...item, post: { ...item.post, responses: { ...item.post.responses, 413: tooLarge, 415: encoded } } } : item,
    ]),
  );
}

/** The operationIds (the naming rule of openapi/operation-ids.ts), by method and path. */
const OPERATION_IDS: Record<string, string> = {
  'get /.well-known/openid-configuration': 'getOpenIdConfiguration',
  'get /.well-known/oauth-authorization-server': 'getAuthorizationServerMetadata',
  'get /.well-known/jwks.json': 'getWellKnownJwks',
  'get /auth/jwks': 'getJwks',
  'get /auth/authorize': 'authorize',
  'get /auth/oauth2/authorize': 'authorizeOAuth2',
  'post /auth/oauth2/token': 'requestToken',
  'options /auth/oauth2/token': 'preflightToken',
  'post /auth/token': 'requestTokenBackCompat',
  'options /auth/token': 'preflightTokenBackCompat',
  'post /auth/device/token': 'pollDeviceToken',
  'options /auth/device/token': 'preflightDeviceToken',
  'post /auth/device': 'authorizeDevice',
  'post /auth/oauth2/revoke': 'revokeToken',
  'options /auth/oauth2/revoke': 'preflightRevokeToken',
  'post /auth/oauth2/introspect': 'introspectToken',
  'options /auth/oauth2/introspect': 'preflightIntrospectToken',
  'post /auth/oauth2/register': 'registerDynamicClient',
  'get /auth/oauth2/register/{client_id}': 'getDynamicClient',
  'get /auth/logout': 'logout',
  'get /auth/authorize/{uid}': 'resumeAuthorization',
  'post /auth/logout/confirm': 'confirmLogout',
  'get /auth/logout/success': 'getLogoutSuccessPage',
};

/** Each operation gets its id; operations are copied, as some are shared. */
function withOperationIds(paths: Record<string, PathItem>): Record<string, PathItem> {
  const out: Record<string, PathItem> = {};
  for (const [path, item] of Object.entries(paths)) {
    out[path] = Object.fromEntries(
      Object.entries(item).map(([method, operation]) => {
        const operationId = OPERATION_IDS[`${method} ${path}`];
        if (!operationId) throw new Error(`${method} ${path}: give it an operationId in OPERATION_IDS`);
        return [method, { ...(operation as Operation), operationId }];
      }),
    );
  }
  return out;
}
