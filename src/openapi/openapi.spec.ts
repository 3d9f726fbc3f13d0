import { Body, Controller, Delete, Get, INestApplication, Module, Patch, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ApiExtension, ApiProperty, ApiPropertyOptional, ApiResponse, ApiTags, OpenAPIObject } from '@nestjs/swagger';
import { AllowBootstrap, Public, Requires } from '../auth/decorators';
import type { AppConfig } from '../config/app-config';
import { OAUTH_ERROR_SCHEMA } from '../oidc/openapi-paths';
import { ApiErrors } from './api-errors.decorator';
import { ApiHeadSuccesses, HEAD_SUCCESSES_EXTENSION } from './api-head.decorator';
import { ApiOAuth } from './api-oauth.decorator';
import { buildOpenApiDocument } from './openapi';

const html = { 'text/html': { schema: { type: 'string' } } };

@Controller()
class Documented {
  @Get('plain')
  @ApiResponse({ status: 200, description: 'A list', content: { 'application/json': { schema: { type: 'object' } } } })
  @ApiErrors(401)
  plain(): void {}

  // As the connector callback: a HEAD that only says the URL is there.
  @Get('callback')
  @ApiResponse({ status: 302, description: 'To the client' })
  @ApiErrors(400)
  @ApiHeadSuccesses({ 200: 'Nothing else is done' })
  callback(): void {}

  @Get('page')
  @ApiExtension('x-error-format', 'html')
  @ApiResponse({ status: 200, description: 'The page', content: html })
  @ApiResponse({ status: 400, description: 'The error page', content: html })
  page(): void {}

  // As userinfo: answered through OAuthErrorFormFilter.
  @Post('claims')
  @ApiExtension('x-error-format', 'oauth')
  @ApiResponse({ status: 200, description: 'The claims' })
  @ApiResponse({ status: 401, description: 'No token', schema: OAUTH_ERROR_SCHEMA })
  claims(): void {}
}

class Filter {
  @ApiPropertyOptional() type?: string;
}

class Write {
  @ApiProperty() name: string;
  @ApiPropertyOptional({ type: Filter }) filter?: Filter;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) properties?: Record<string, unknown>;
}

class Conflict {
  @ApiProperty({ enum: ['version_conflict'] }) code: string;
}

/** Routes as the guards see them (auth/decorators.ts). */
@ApiTags('items')
@Controller('guarded')
class GuardedController {
  @Get('open')
  @Public()
  open(): void {}

  @Get('admin')
  @Requires({ admin: true })
  admin(): void {}

  @Post()
  @AllowBootstrap()
  @Requires({ admin: true })
  bootstrap(): void {}

  @Patch()
  @Requires({ scope: 'metadata.types:write' })
  @ApiOAuth({ scopes: ['<type>:read'], note: 'read on the type.' })
  @ApiResponse({ status: 409, type: Conflict })
  write(@Body() _body: Write): void {}

  @Delete()
  @ApiTags('types')
  remove(): void {}
}

@Module({ controllers: [Documented, GuardedController] })
class DocumentedModule {}

describe('buildOpenApiDocument', () => {
  let app: INestApplication;
  let doc: OpenAPIObject;

  beforeAll(async () => {
    app = await NestFactory.create(DocumentedModule, new FastifyAdapter(), { logger: false });
    await app.init();
    doc = buildOpenApiDocument(app, { baseUrl: 'http://localhost:3000' } as AppConfig);
  });
  afterAll(() => app.close());

  const responses = (path: string, method: 'get' | 'head' | 'post') => doc.paths[path][method]!.responses as Record<string, any>;

  it('gives a route without a 400 of its own the one the request pipeline answers, in the envelope', () => {
    expect(responses('/plain', 'get')['400'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/ErrorEnvelopeDto' });
    expect(responses('/plain', 'get')['400'].description).toMatch(/does not read/);
  });

  it('adds the pipeline\'s JSON 400 beside a route\'s own 400 in another media type', () => {
    const refused = responses('/page', 'get')['400'];
    expect(Object.keys(refused.content).sort()).toEqual(['application/json', 'text/html']);
    expect(refused.description).toMatch(/^The error page\. As JSON: /);
  });

  it('documents the pipeline\'s errors in RFC 6749 form on a route that answers in it', () => {
    const claims = responses('/claims', 'post');
    for (const status of ['400', '413', '415', '409', '503']) expect([status, claims[status]?.content['application/json'].schema]).toEqual([status, OAUTH_ERROR_SCHEMA]);
    expect(claims['503'].description).toMatch(/temporarily_unavailable/);
    expect(claims['503'].headers['Retry-After']).toEqual({ $ref: '#/components/headers/Retry-After' });
  });

  it('documents HEAD beside every GET: its parameters and answers, without bodies, under an id of its own', () => {
    expect(Object.keys(doc.paths['/plain'])).toEqual(['get', 'head']);
    const [get, head] = [doc.paths['/plain'].get!, doc.paths['/plain'].head!];
    expect(head.operationId).toBe(`${get.operationId}Head`);
    expect(Object.keys(head.responses).sort()).toEqual(Object.keys(get.responses).sort());
    for (const response of Object.values<any>(head.responses)) {
      expect(response.content).toBeUndefined();
      expect(response.headers['X-RateLimit-Limit']).toBeDefined();
    }
    expect(responses('/plain', 'head')['503'].headers['Retry-After']).toBeDefined();
    expect(responses('/plain', 'head')['429'].headers['Retry-After']).toBeDefined();
  });

  it('derives each operation\'s security from its guards\' metadata: none, an API key, an OAuth token with the scopes it needs, or none during bootstrap', () => {
    const op = (method: 'get' | 'post' | 'patch' | 'delete', path: string) => doc.paths[path][method]!;
    expect(op('get', '/guarded/open').security).toEqual([]);
    expect(op('get', '/guarded/admin').security).toEqual([{ bearer: [] }]);
    expect(op('post', '/guarded').security).toEqual([{ bearer: [] }, {}]);
    expect(op('patch', '/guarded').security).toEqual([{ bearer: [] }, { oauth2: ['metadata.types:write', '<type>:read'] }]);
    expect(op('patch', '/guarded').description).toBe('OAuth access tokens: read on the type.');
    expect(op('patch', '/guarded')).not.toHaveProperty('x-oauth');
    expect(op('delete', '/guarded').security).toEqual([{ bearer: [] }, { oauth2: [] }]);
    expect(doc.components!.securitySchemes!.oauth2).toMatchObject({ flows: { authorizationCode: { authorizationUrl: 'http://localhost:3000/auth/authorize', tokenUrl: 'http://localhost:3000/auth/oauth2/token' } } });
  });

  it('closes a DTO body and the DTOs in it, leaving its free-form members open', () => {
    const schemas = doc.components!.schemas as Record<string, any>;
    expect([schemas.Write.additionalProperties, schemas.Filter.additionalProperties]).toEqual([false, false]);
    expect(schemas.Write.properties.properties.additionalProperties).toBe(true);
    expect(schemas.Conflict.additionalProperties).toBeUndefined();
  });

  it('answers a status a route documents with another JSON body either way, beside the pipeline\'s', () => {
    const conflict = responses('/guarded', 'patch' as 'post')['409'];
    expect(conflict.content['application/json'].schema).toEqual({ anyOf: [{ $ref: '#/components/schemas/Conflict' }, { $ref: '#/components/schemas/ErrorEnvelopeDto' }] });
  });

  it('lists a path\'s operations under one tag, the first of the reference\'s order', () => {
    for (const method of ['post', 'patch', 'delete'] as const) expect(doc.paths['/guarded'][method]!.tags).toEqual(['items']);
  });

  it('documents the successes a route says its HEAD gives instead of the GET\'s, with the GET\'s errors', () => {
    expect(Object.keys(responses('/callback', 'head')).sort()).toEqual(['200', '400', '429', '503']);
    expect(responses('/callback', 'head')['200'].description).toBe('Nothing else is done');
    expect(responses('/callback', 'get')['302']).toBeDefined();
    for (const method of ['get', 'head'] as const) expect(doc.paths['/callback'][method]).not.toHaveProperty(HEAD_SUCCESSES_EXTENSION);
  });
});
