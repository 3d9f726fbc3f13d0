/**
 * Builds the machine-readable interface description (OpenAPI 3.1.0, info.version 4.2.0) from
 * the controllers' decorators. OpenApiController serves it.
 */
import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import type { AppConfig } from '../config/app-config';
import { oidcOpenApiPaths } from '../oidc/openapi-paths';
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
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'API key (svc_k1_...) or OAuth access token (svc_at_...)' });
  const document = SwaggerModule.createDocument(app, builder.build());
  for (const [path, item] of Object.entries(oidcOpenApiPaths())) document.paths[path] = { ...document.paths[path], ...item };
  return document;
}

export function mountOpenApi(app: INestApplication, config: AppConfig): void {
  app.get(OpenApiDocument).document = buildOpenApiDocument(app, config);
}
