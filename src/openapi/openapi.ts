/**
 * Builds the machine-readable interface description (OpenAPI 3.1.0, info.version 4.2.0) from
 * the controllers' decorators. OpenApiController serves it.
 */
import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, ResponseObject, SwaggerModule } from '@nestjs/swagger';
import { STATUS_CODES } from 'node:http';
import { NO_STORE_EXTENSION } from '../common/security-headers';
import type { AppConfig } from '../config/app-config';
import { OAUTH_ERROR_SCHEMA, oidcOpenApiPaths } from '../oidc/openapi-paths';
import { bucketFor } from '../rate-limit/rate-limit.policy';
import { openApiWebhooks } from '../webhooks/openapi-webhooks';
import { errorResponse } from './api-errors.decorator';
import { HEAD_SUCCESSES_EXTENSION } from './api-head.decorator';
import { OpenApiDocument } from './openapi.controller';

export const API_VERSION = '4.2.0';

/** The operations' tags, in the order the reference lists them. */
const TAGS: Array<[name: string, description: string]> = [
  ['items', 'Typed items: create, upsert by natural key, read, change with optimistic concurrency, trash, history, tags and extensions'],
  ['bulk actions', 'Actions over every item a filter matches (tags, tier, state, properties, purge), at once or as a background job'],
  ['types', 'Item types: the core ones and the tenant\'s own, with their JSON Schema and merge policy'],
  ['edges', 'Edge types and the typed links between items'],
  ['blobs', 'Content-addressed binary content that items refer to as sha256:<hash>'],
  ['search', 'Full-text search over the tenant\'s items'],
  ['events', 'The stream of item and job events (Server-Sent Events)'],
  ['webhooks', 'Signed HTTP deliveries of events, their delivery history and retries'],
  ['keys', 'API keys: role, source, default tier and permission maps'],
  ['tenants', 'Tenants and their first admin key'],
  ['users', 'The people of a tenant who sign in to the OAuth provider'],
  ['audit', 'The tenant\'s audit events'],
  ['integrations', 'Integration manifests, and connections to upstream services through their OAuth'],
  ['oauth', 'The OAuth 2.1 / OpenID Connect provider: discovery, keys, authorization, tokens, revocation, introspection, registration, userinfo, logout'],
  ['oauth pages', 'The provider\'s HTML pages: sign-in, consent, device code entry'],
  ['oauth account', 'A signed-in user\'s own grants, sessions and security page'],
  ['health', 'Liveness and dependency health'],
  ['meta', 'This document and the browsable reference'],
];

export function buildOpenApiDocument(app: INestApplication, config: AppConfig): OpenAPIObject {
  const builder = new DocumentBuilder()
    .setOpenAPIVersion('3.1.0')
    .setTitle('Structured Data Service')
    .setDescription(
      'Multi-tenant store of typed items with search, bulk actions, API keys, OAuth 2.1/OIDC and webhooks. ' +
        'Every error uses the envelope {"error":{"code","message","details?"}}; clients branch on error.code. ' +
        'With rate limiting on (RATE_LIMIT_ENABLED, the default), responses carry X-RateLimit-Limit, X-RateLimit-Remaining and ' +
        'X-RateLimit-Reset (Unix time in seconds), and a 429 also Retry-After; requests the HTTP layer cannot parse (a malformed ' +
        'request line or headers, 408, 417, 431) count against the client address in the bucket of unrouted paths, and a 503 while ' +
        'the instance shuts down or while a bearer token cannot be checked is counted too. Every GET operation also answers HEAD: the same status and headers, without a body (but where its own HEAD operation documents otherwise: the connector callback). ' +
        'Every response carries X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer.',
    )
    .setVersion(API_VERSION)
    .addServer(config.baseUrl)
    // Opaque tokens, not JWTs: no bearerFormat.
    .addSecurity('bearer', { type: 'http', scheme: 'bearer', description: 'API key (svc_k1_...) or OAuth access token (svc_at_...)' })
    .addBasicAuth({ type: 'http', description: 'OAuth client authentication (client_secret_basic): client_id and client_secret' }, 'client_basic')
    .addSecurity('registration_token', {
      type: 'http',
      scheme: 'bearer',
      description: 'The registration_access_token of a dynamically registered client (RFC 7592)',
    });
  for (const [name, description] of TAGS) builder.addTag(name, description);
  const document = SwaggerModule.createDocument(app, builder.build());
  documentPipelineErrors(document);
  for (const [path, item] of Object.entries(oidcOpenApiPaths())) document.paths[path] = { ...document.paths[path], ...item };
  for (const [, , op] of operations(document)) if (op.operationId) op.operationId = op.operationId.replace(/\[(\d+)\]$/, '_$1');
  documentRateLimit(document);
  // After the 429 (the GET's, without its body), before the descriptions and headers, which a HEAD gets as its own.
  documentHead(document);
  describeSuccesses(document);
  documentCommonHeaders(document);
  document.webhooks = openApiWebhooks();
  return document;
}

type Operation = NonNullable<OpenAPIObject['paths'][string]['get']>;

const WRITES = new Set<string>(['put', 'post', 'delete', 'patch']);

/** Every operation, with its path and method. */
function* operations(document: OpenAPIObject): Generator<[path: string, method: string, op: Operation]> {
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const) if (item[method]) yield [path, method, item[method]];
  }
}

/**
 * Errors the request pipeline answers for any route, rather than the route: every service route
 * refuses a query or path that breaks the input rules, and a query parameter it does not read
 * (400: InputGuard), and a body on a route that takes none (BodylessRouteGuard); every one
 * that may be sent a body (POST, PUT, PATCH and DELETE) refuses one too large (413) or with a
 * charset, Content-Encoding or Content-Type it does not read (415: body-parsing.ts, InputGuard,
 * and Fastify for a Content-Type that is no media type), every one answers 503 while a
 * dependency is away, and every write 409 `conflict` when its transaction lost to concurrent
 * ones (exception.filter.ts). Runs before the provider's own endpoints are added: those read
 * their requests themselves and answer in RFC 6749 form instead. A route's own 400 in another
 * media type (an HTML page) gains the pipeline's JSON one beside it, which it is answered in.
 */
function documentPipelineErrors(document: OpenAPIObject): void {
  for (const [, method, op] of operations(document)) {
    const error = (status: number) => pipelineError(op, status);
    // A route is taken to reach a dependency when it may be sent a body or documents envelope errors of its own.
    const reachesDependency = WRITES.has(method) || JSON.stringify(op.responses).includes('ErrorEnvelopeDto');
    if (WRITES.has(method)) for (const status of [409, 413, 415]) op.responses[status] ??= error(status);
    if (reachesDependency) op.responses[503] ??= error(503);
    const own = op.responses[400];
    const refused = error(400);
    if (!own) op.responses[400] = refused;
    else if (!('$ref' in own) && !own.content?.['application/json']) {
      op.responses[400] = { ...own, description: `${own.description}. As JSON: ${refused.description}`, content: { ...own.content, ...refused.content } };
    }
  }
}

const PIPELINE_400 = 'A query parameter the route does not read, a query, path or body value the input rules refuse (NUL, an unpaired surrogate), a body that does not parse, or one on a route that takes none (validation_error, invalid_request)';

/**
 * The pipeline's answer in the route's error form: RFC 6749's on the few routes Nest serves in
 * OAuth's place (`x-error-format: oauth`, answered through OAuthErrorFormFilter), the envelope elsewhere.
 */
function pipelineError(op: Operation, status: number): ResponseObject & Required<Pick<ResponseObject, 'content'>> {
  if ((op as Operation & { 'x-error-format'?: string })['x-error-format'] !== 'oauth') {
    const envelope = errorResponse(status);
    return status === 400 ? { ...envelope, description: PIPELINE_400 } : envelope;
  }
  const error = status === 503 ? 'temporarily_unavailable' : 'invalid_request';
  const why: Record<number, string> = {
    400: 'a query or path value the input rules refuse (NUL, an unpaired surrogate), or a body that does not parse',
    409: 'the request collided with concurrent writes and changed nothing; send it again',
    413: 'the request body is larger than the limit',
    415: 'unsupported content type, charset or encoding',
    503: 'a dependency is away; retry after Retry-After',
  };
  return {
    description: `RFC 6749 error {"error":"${error}","error_description"}: ${why[status]}`,
    content: { 'application/json': { schema: OAUTH_ERROR_SCHEMA } },
    // documentCommonHeaders adds Retry-After to the envelope's 503 by its schema; this one says it itself.
    ...(status === 503 ? { headers: { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } } : {}),
  };
}

/**
 * Fastify answers HEAD on every GET route (and oidc-mount.ts hands the provider HEAD with GET):
 * the same status and headers without a body, unless the route says otherwise
 * (api-head.decorator.ts). So every GET path gets a HEAD operation, beside the GET, with the
 * GET's parameters, security and answers, bodies left out; a route that documents its own HEAD
 * (the blob download) keeps it.
 */
function documentHead(document: OpenAPIObject): void {
  for (const [path, item] of Object.entries(document.paths)) {
    const get = item.get as (Operation & { [HEAD_SUCCESSES_EXTENSION]?: Record<string, string> }) | undefined;
    if (!get) continue;
    const successes = get[HEAD_SUCCESSES_EXTENSION];
    delete get[HEAD_SUCCESSES_EXTENSION];
    if (item.head) continue;
    const { requestBody: _none, description: _about, ...rest } = structuredClone(get);
    const responses: Operation['responses'] = {};
    for (const [status, response] of Object.entries(rest.responses)) {
      if (successes && !/^[45]/.test(status)) continue;
      if (!response || '$ref' in response) responses[status] = response;
      else {
        const { content: _body, ...bodiless } = response;
        responses[status] = bodiless;
      }
    }
    for (const [status, description] of Object.entries(successes ?? {})) responses[status] = { description };
    const head: Operation = {
      ...rest,
      description: successes ? `HEAD of GET ${path}: the answers below, without a body.` : `HEAD of GET ${path}: the same status and headers, without a body.`,
      responses: Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b))),
      ...(get.operationId ? { operationId: `${get.operationId}_head` } : {}),
    };
    // Beside its GET, where a reader of the reference looks for it.
    document.paths[path] = Object.fromEntries(Object.entries(item).flatMap(([key, value]) => (key === 'get' ? [[key, value], ['head', head]] : [[key, value]])));
  }
}

/** The 429 of the OAuth protocol endpoints, which their clients parse as RFC 6749 errors (rate-limit.hook.ts). */
const oauthRateLimited = {
  description: 'Rate limited: {"error":"rate_limited","error_description"} (RFC 6749 form); see Retry-After',
  content: { 'application/json': { schema: OAUTH_ERROR_SCHEMA } },
};

/** Every route is rate limited (rate-limit.hook.ts), in the error form its bucket rule says (rate-limit.policy.ts). */
function documentRateLimit(document: OpenAPIObject): void {
  for (const [path, method, op] of operations(document)) {
    op.responses[429] ??= bucketFor(method.toUpperCase(), path, 1).oauth ? oauthRateLimited : errorResponse(429);
  }
}

/** A success the decorators left without a description gets its status and the schema of its body. */
function describeSuccesses(document: OpenAPIObject): void {
  for (const [, , op] of operations(document)) {
    for (const [status, response] of Object.entries(op.responses)) {
      if (!response || '$ref' in response || response.description) continue;
      const schema = response.content?.['application/json']?.schema as { $ref?: string; items?: { $ref?: string } } | undefined;
      const name = (schema?.$ref ?? schema?.items?.$ref)?.split('/').pop();
      const text = STATUS_CODES[Number(status)] ?? 'Success';
      op.responses[status] = { ...response, description: name ? `${text}, with a body of schema ${name}` : text };
    }
  }
}

const header = (description: string) => ({ description, schema: { type: 'integer' } });

/**
 * Headers that the request pipeline adds rather than a route: the rate-limit headers on every
 * response (rate-limit.hook.ts), Retry-After on a 429 and on a 503 `service_unavailable`
 * (exception.filter.ts; not on GET /health's own 503, whose body says what is down), and
 * Idempotent-Replayed on the kept (neither 429 nor 5xx) answers of a route that takes Idempotency-Key,
 * and Cache-Control: no-store on the successes of a route marked `@NoStore()` (security-headers.ts).
 */
function documentCommonHeaders(document: OpenAPIObject): void {
  document.components ??= {};
  document.components.headers = {
    ...document.components.headers,
    'X-RateLimit-Limit': header('Requests allowed in the current window (sent while rate limiting is on)'),
    'X-RateLimit-Remaining': header('Requests left in the current window (sent while rate limiting is on)'),
    'X-RateLimit-Reset': header('Unix time (seconds since the epoch) at which the rolling window next frees a place: its oldest request turns a minute old (sent while rate limiting is on)'),
    'Retry-After': header('Seconds to wait before retrying'),
    'Idempotent-Replayed': { description: '`true` when this is the kept answer to an earlier request with the same Idempotency-Key', schema: { type: 'string', enum: ['true'] } },
    'Cache-Control': { description: '`no-store`: the body shows a secret once, which no cache may keep', schema: { type: 'string', enum: ['no-store'] } },
  };
  const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });
  for (const [path, method, op] of operations(document)) {
    const idempotent = (op.parameters ?? []).some((p) => 'in' in p && p.in === 'header' && p.name.toLowerCase() === 'idempotency-key');
    // The marker has done its work once the headers say it.
    const marked = op as Operation & { [NO_STORE_EXTENSION]?: boolean };
    const noStore = marked[NO_STORE_EXTENSION] === true;
    delete marked[NO_STORE_EXTENSION];
    for (const [status, response] of Object.entries(op.responses)) {
      if (!response || '$ref' in response) continue;
      const headers: Record<string, { $ref: string }> = {};
      for (const name of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) headers[name] = ref(name);
      // A HEAD's 503 is its GET's without the body, which tells service_unavailable from GET /health's own.
      const answered = method === 'head' ? (document.paths[path].get?.responses[status] ?? response) : response;
      const unavailable = status === '503' && JSON.stringify(answered).includes('ErrorEnvelopeDto');
      if (status === '429' || unavailable) headers['Retry-After'] = ref('Retry-After');
      if (idempotent && status !== '429' && !status.startsWith('5')) headers['Idempotent-Replayed'] = ref('Idempotent-Replayed');
      if (noStore && status.startsWith('2')) headers['Cache-Control'] = ref('Cache-Control');
      op.responses[status] = { ...response, headers: { ...headers, ...response.headers } }; // a copy: some response objects are shared
    }
  }
}

export function mountOpenApi(app: INestApplication, config: AppConfig): void {
  app.get(OpenApiDocument).document = buildOpenApiDocument(app, config);
}
