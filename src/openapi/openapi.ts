/**
 * Owns the machine-readable interface description: `GET /openapi.json` (OpenAPI 3.1.0,
 * info.version 4.2.0) and the browsable reference at `/docs`, whose assets come from the
 * swagger-ui-dist package inside the service (no CDN).
 */
import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import type { AppConfig } from '../config/app-config';

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
  return SwaggerModule.createDocument(app, builder.build());
}

export function mountOpenApi(app: INestApplication, config: AppConfig): void {
  const document = buildOpenApiDocument(app, config);
  SwaggerModule.setup('docs', app, document, {
    jsonDocumentUrl: 'openapi.json',
    raw: ['json'],
    customSiteTitle: 'Structured Data Service API',
  });
}
