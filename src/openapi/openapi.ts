/**
 * Builds the machine-readable interface description (OpenAPI 3.1.0, info.version 4.2.0) from
 * the controllers' decorators. OpenApiController serves it.
 */
import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, ResponseObject, SwaggerModule } from '@nestjs/swagger';
import { STATUS_CODES } from 'node:http';
import { isDeepStrictEqual } from 'node:util';
import { NO_STORE_EXTENSION } from '../common/security-headers';
import type { AppConfig } from '../config/app-config';
import { OAUTH_ERROR_SCHEMA, oidcOpenApiPaths, oidcOpenApiSchemas } from '../oidc/openapi-paths';
import { bucketFor } from '../rate-limit/rate-limit.policy';
import { openApiWebhooks } from '../webhooks/openapi-webhooks';
import { errorResponse } from './api-errors.decorator';
import { SERVICE_VERSION } from '../common/version';
import { HEAD_SUCCESSES_EXTENSION } from './api-head.decorator';
import { OpenApiDocument } from './openapi.controller';
import { operationId } from './operation-ids';
import { documentSecurity, RouteHandler, securitySchemes } from './security';

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
  ['oauth', 'The OAuth 2.1 / OpenID Connect provider: discovery, keys, authorization, tokens, revocation, introspection, registration, userinfo, logout, the device flow and its page'],
  ['oauth pages', 'The provider\'s HTML pages: sign-in, consent, and the device page\'s consent form'],
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
        'Every response carries X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer, and an answer to a request carrying Authorization ' +
        'is Cache-Control: no-store unless its operation documents another Cache-Control (a blob download). ' +
        'Browser apps on another origin may call every route outside /auth/ and /.well-known/ (CORS_ORIGINS, any origin by default): ' +
        'answers carry Access-Control-Allow-Origin and Access-Control-Expose-Headers, and a preflight (OPTIONS with Access-Control-Request-Method) is 204; never with credentials.',
    )
    .setVersion(SERVICE_VERSION)
    .addServer(config.baseUrl);
  for (const [name, scheme] of Object.entries(securitySchemes(config.baseUrl))) builder.addSecurity(name, scheme);
  for (const [name, description] of TAGS) builder.addTag(name, description);
  // The handler behind each operationId, for the security its guards apply.
  const handlers = new Map<string, RouteHandler>();
  const document = SwaggerModule.createDocument(app, builder.build(), {
    operationIdFactory: (controller, method) => {
      const id = operationId(controller, method);
      handlers.set(id, { controller, method });
      return id;
    },
  });
  documentSecurity(app, document, handlers);
  closeRequestBodies(document);
  requireBodiesWithRequiredFields(document);
  documentPipelineErrors(document);
  for (const [path, item] of Object.entries(oidcOpenApiPaths())) document.paths[path] = { ...document.paths[path], ...item };
  document.components!.schemas = { ...document.components!.schemas, ...oidcOpenApiSchemas() };
  oneTagPerPath(document);
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
 * their requests themselves and answer in RFC 6749 form instead. A status the route documents
 * too is answered either way (withPipelineError).
 */
function documentPipelineErrors(document: OpenAPIObject): void {
  for (const [, method, op] of operations(document)) {
    // A route is taken to reach a dependency when it may be sent a body or documents envelope errors of its own.
    const reachesDependency = WRITES.has(method) || JSON.stringify(op.responses).includes('ErrorEnvelopeDto');
    const statuses = [400, ...(WRITES.has(method) ? [409, 413, 415] : []), ...(reachesDependency ? [503] : [])];
    for (const status of statuses) op.responses[status] = withPipelineError(op.responses[status], pipelineError(op, status), status);
  }
}

/**
 * A route's own answer for a status with the pipeline's beside it. The route's stands where it is
 * the same JSON body; a 400 in another media type only (an HTML page) gains the JSON one, which
 * the pipeline answers in; another JSON body (PATCH /items/{id}'s `version_conflict` beside a write
 * collision's `conflict`) is either one. `anyOf`, not `oneOf`: a body may match both schemas.
 */
function withPipelineError(own: Operation['responses'][string] | undefined, pipeline: ReturnType<typeof pipelineError>, status: number): Operation['responses'][string] {
  if (!own) return pipeline;
  if ('$ref' in own) return own;
  const [mine, theirs] = [own.content?.['application/json']?.schema, pipeline.content['application/json'].schema!];
  if (mine ? isDeepStrictEqual(mine, theirs) : status !== 400) return own;
  return {
    ...own,
    description: `${own.description}. ${mine ? 'Or' : 'As JSON'}: ${pipeline.description}`,
    content: { ...own.content, 'application/json': { schema: mine ? { anyOf: [mine, theirs] } : theirs } },
  };
}

/**
 * The global ValidationPipe refuses a field that a body's DTO does not declare (400
 * validation_error), in the DTOs nested in it too (`@ValidateNested`, and each element of POST
 * /items/bulk, which is checked as a POST /items body), so those schemas are closed. Free-form
 * members (an item's `properties` and `extensions`, a type's `schema`) are inline schemas, not
 * DTOs, and stay as open as they are.
 */
function closeRequestBodies(document: OpenAPIObject): void {
  const schemas = document.components?.schemas ?? {};
  const pending = [...operations(document)].flatMap(([, , op]) => {
    const schema = op.requestBody && !('$ref' in op.requestBody) ? op.requestBody.content['application/json']?.schema : undefined;
    return schema && '$ref' in schema ? [schema.$ref] : [];
  });
  const closed = new Set<string>();
  for (let ref = pending.pop(); ref; ref = pending.pop()) {
    const name = ref.split('/').pop()!;
    const schema = schemas[name];
    if (closed.has(name) || !schema || '$ref' in schema) continue;
    closed.add(name);
    schema.additionalProperties ??= false;
    for (const [, nested] of JSON.stringify(schema.properties ?? {}).matchAll(/"\$ref":"(#\/components\/schemas\/[^"]+)"/g)) pending.push(nested);
  }
}

/**
 * A JSON body is required where its schema has a required field, and only there: the validation
 * pipeline takes a missing body as `{}` (Nest's ValidationPipe), so a route whose fields are all
 * optional (`POST /keys`, `PATCH /webhooks/{id}`) answers a request without one as it answers
 * `{}`, and one with a required field answers 400 `validation_error` naming it. @nestjs/swagger
 * marks every @Body() required whatever its fields.
 */
function requireBodiesWithRequiredFields(document: OpenAPIObject): void {
  const schemas = document.components?.schemas ?? {};
  for (const [, , op] of operations(document)) {
    const body = op.requestBody;
    if (!body || '$ref' in body) continue;
    const media = Object.keys(body.content);
    const schema = body.content['application/json']?.schema;
    // Only bodies the pipeline reads as JSON objects: a form, a stream or a file is the handler's.
    if (media.length !== 1 || !schema) continue;
    const resolved = '$ref' in schema ? schemas[schema.$ref.split('/').pop()!] : schema;
    if (!resolved || '$ref' in resolved || resolved.type !== 'object') continue;
    body.required = (resolved.required?.length ?? 0) > 0;
  }
}

/** A path's operations sit under one tag, the first in TAGS's order that any of them has: a reader finds the path in one place. */
function oneTagPerPath(document: OpenAPIObject): void {
  for (const path of Object.keys(document.paths)) {
    const ops = [...operations({ paths: { [path]: document.paths[path] } } as OpenAPIObject)].map(([, , op]) => op);
    const tags = new Set(ops.flatMap((op) => op.tags ?? []));
    const tag = TAGS.find(([name]) => tags.has(name))?.[0];
    if (tag) for (const op of ops) op.tags = [tag];
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
      ...(get.operationId ? { operationId: `${get.operationId}Head` } : {}),
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

/** The X-Request-Id a caller may choose: request-logging.ts keeps one that matches (test/openapi.e2e-spec.ts holds the two together). */
const REQUEST_ID_PATTERN = /^[A-Za-z0-9._-]{1,100}$/;

/**
 * Inline, not a $ref: consumers that read a parameter's name without resolving it (the fuzzer,
 * some generators) see it too. Any value is taken (one that does not match is replaced, not
 * refused), so the pattern is in the description, not the schema.
 */
const REQUEST_ID_PARAMETER = {
  name: 'X-Request-Id',
  in: 'header' as const,
  required: false,
  description: `An id for this request, which the answer's X-Request-Id and the service's log lines then carry when it matches \`${REQUEST_ID_PATTERN.source}\`; another is replaced by a new UUID`,
  schema: { type: 'string' as const },
};

const header = (description: string) => ({ description, schema: { type: 'integer' } });

/**
 * Headers that the request pipeline adds rather than a route: X-Request-Id on every response
 * (request-logging.ts: the caller's own when it sends a usable one, so every operation takes it),
 * the rate-limit headers (rate-limit.hook.ts), WWW-Authenticate on a 401 (exception.filter.ts; the
 * provider and userinfo send their own), Retry-After on a 429 and on a 503 `service_unavailable`
 * (exception.filter.ts; not on GET /health's own 503, whose body says what is down), and
 * Idempotent-Replayed on the kept (neither 429 nor 5xx) answers of a route that takes Idempotency-Key,
 * and Cache-Control: no-store on the successes of a route marked `@NoStore()` (security-headers.ts).
 */
function documentCommonHeaders(document: OpenAPIObject): void {
  document.components ??= {};
  document.components.headers = {
    ...document.components.headers,
    'X-Request-Id': { description: 'The request\'s id, which the service\'s log lines name: the caller\'s X-Request-Id when it sent a usable one, else a new UUID', schema: { type: 'string' } },
    'X-RateLimit-Limit': header('Requests allowed in the current window (sent while rate limiting is on)'),
    'X-RateLimit-Remaining': header('Requests left in the current window (sent while rate limiting is on)'),
    'X-RateLimit-Reset': header('Unix time (seconds since the epoch) at which the rolling window next frees a place: its oldest request turns a minute old (sent while rate limiting is on)'),
    'Retry-After': header('Seconds to wait before retrying'),
    'Idempotent-Replayed': { description: '`true` when this is the kept answer to an earlier request with the same Idempotency-Key', schema: { type: 'string', enum: ['true'] } },
    'Cache-Control': { description: '`no-store`: no cache may keep the answer', schema: { type: 'string', enum: ['no-store'] } },
    'WWW-Authenticate': {
      description: 'The challenge (RFC 6750): `Bearer realm="svc"`, with `error="invalid_token"` and an `error_description` when a token was presented; `Basic realm="svc"` to an OAuth client that failed HTTP Basic authentication',
      schema: { type: 'string' },
    },
  };
  const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });
  for (const [path, method, op] of operations(document)) {
    op.parameters = [...(op.parameters ?? []), REQUEST_ID_PARAMETER];
    const idempotent = op.parameters.some((p) => 'in' in p && p.in === 'header' && p.name.toLowerCase() === 'idempotency-key');
    // The marker has done its work once the headers say it.
    const marked = op as Operation & { [NO_STORE_EXTENSION]?: boolean };
    const noStore = marked[NO_STORE_EXTENSION] === true;
    delete marked[NO_STORE_EXTENSION];
    for (const [status, response] of Object.entries(op.responses)) {
      if (!response || '$ref' in response) continue;
      const headers: Record<string, { $ref: string }> = { 'X-Request-Id': ref('X-Request-Id') };
      for (const name of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) headers[name] = ref(name);
      // A HEAD's 503 is its GET's without the body, which tells service_unavailable from GET /health's own.
      const answered = method === 'head' ? (document.paths[path].get?.responses[status] ?? response) : response;
      const unavailable = status === '503' && JSON.stringify(answered).includes('ErrorEnvelopeDto');
      if (status === '401') headers['WWW-Authenticate'] = ref('WWW-Authenticate');
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
