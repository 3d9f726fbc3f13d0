/**
 * Builds the machine-readable interface description (OpenAPI 3.1.0, info.version 4.2.0) from
 * the controllers' decorators. OpenApiController serves it.
 */
import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import type { AppConfig } from '../config/app-config';
import { oidcOpenApiPaths } from '../oidc/openapi-paths';
import { openApiWebhooks } from '../webhooks/openapi-webhooks';
import { errorResponse } from './api-errors.decorator';
import { OpenApiDocument } from './openapi.controller';

export const API_VERSION = '4.2.0';

export function buildOpenApiDocument(app: INestApplication, config: AppConfig): OpenAPIObject {
  const builder = new DocumentBuilder()
    .setOpenAPIVersion('3.1.0')
    .setTitle('Structured Data Service')
    .setDescription(
      'Multi-tenant store of typed items with search, bulk actions, API keys, OAuth 2.1/OIDC and webhooks. ' +
        'Every error uses the envelope {"error":{"code","message","details?"}}; clients branch on error.code. ' +
        'Every response carries X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset; a 429 also carries Retry-After.',
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
  const document = SwaggerModule.createDocument(app, builder.build());
  documentPipelineErrors(document);
  for (const [path, item] of Object.entries(oidcOpenApiPaths())) document.paths[path] = { ...document.paths[path], ...item };
  documentCommonHeaders(document);
  document.webhooks = openApiWebhooks();
  for (const [, op] of operations(document)) if (op.operationId) op.operationId = op.operationId.replace(/\[(\d+)\]$/, '_$1');
  return document;
}

type Operation = NonNullable<OpenAPIObject['paths'][string]['get']>;

const WRITES = new Set<string>(['put', 'post', 'delete', 'patch']);

/** Every operation, with its method. */
function* operations(document: OpenAPIObject): Generator<[method: string, op: Operation]> {
  for (const item of Object.values(document.paths)) {
    for (const method of ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const) if (item[method]) yield [method, item[method]];
  }
}

/**
 * Errors the request pipeline answers for any route, rather than the route: every service route
 * that reads a JSON body refuses one too large (413) or of another media type (415:
 * body-parsing.ts), every one answers 503 while a dependency is away, and every write 409
 * `conflict` when its transaction lost to concurrent ones (exception.filter.ts).
 */
function documentPipelineErrors(document: OpenAPIObject): void {
  for (const [method, op] of operations(document)) {
    const body = op.requestBody && 'content' in op.requestBody ? op.requestBody.content : undefined;
    if (body?.['application/json']) for (const status of [413, 415]) op.responses[status] ??= errorResponse(status);
    if (!JSON.stringify(op.responses).includes('ErrorEnvelopeDto')) continue;
    op.responses[503] ??= errorResponse(503);
    if (WRITES.has(method)) op.responses[409] ??= errorResponse(409);
  }
}

const header = (description: string) => ({ description, schema: { type: 'integer' } });

/**
 * Headers that the request pipeline adds rather than a route: the rate-limit headers on every
 * response (rate-limit.hook.ts), Retry-After on a 429, and Idempotent-Replayed on the kept
 * (neither 429 nor 5xx) answers of a route that takes Idempotency-Key.
 */
function documentCommonHeaders(document: OpenAPIObject): void {
  document.components ??= {};
  document.components.headers = {
    ...document.components.headers,
    'X-RateLimit-Limit': header('Requests allowed in the current window'),
    'X-RateLimit-Remaining': header('Requests left in the current window'),
    'X-RateLimit-Reset': header('Seconds until the window resets'),
    'Retry-After': header('Seconds to wait before retrying'),
    'Idempotent-Replayed': { description: '`true` when this is the kept answer to an earlier request with the same Idempotency-Key', schema: { type: 'string', enum: ['true'] } },
  };
  const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });
  for (const [, op] of operations(document)) {
    const idempotent = (op.parameters ?? []).some((p) => 'in' in p && p.in === 'header' && p.name.toLowerCase() === 'idempotency-key');
    for (const [status, response] of Object.entries(op.responses)) {
      if (!response || '$ref' in response) continue;
      const headers: Record<string, { $ref: string }> = {};
      for (const name of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) headers[name] = ref(name);
      if (status === '429') headers['Retry-After'] = ref('Retry-After');
      if (idempotent && status !== '429' && !status.startsWith('5')) headers['Idempotent-Replayed'] = ref('Idempotent-Replayed');
      op.responses[status] = { ...response, headers: { ...headers, ...response.headers } }; // a copy: some response objects are shared
    }
  }
}

export function mountOpenApi(app: INestApplication, config: AppConfig): void {
  app.get(OpenApiDocument).document = buildOpenApiDocument(app, config);
}
