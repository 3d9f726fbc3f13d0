import { Controller, Get, INestApplication, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ApiExtension, ApiResponse, OpenAPIObject } from '@nestjs/swagger';
import type { AppConfig } from '../config/app-config';
import { OAUTH_ERROR_SCHEMA } from '../oidc/openapi-paths';
import { ApiErrors } from './api-errors.decorator';
import { ApiHeadSuccesses, HEAD_SUCCESSES_EXTENSION } from './api-head.decorator';
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

@Module({ controllers: [Documented] })
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
    expect(head.operationId).toBe(`${get.operationId}_head`);
    expect(Object.keys(head.responses).sort()).toEqual(Object.keys(get.responses).sort());
    for (const response of Object.values<any>(head.responses)) {
      expect(response.content).toBeUndefined();
      expect(response.headers['X-RateLimit-Limit']).toBeDefined();
    }
    expect(responses('/plain', 'head')['503'].headers['Retry-After']).toBeDefined();
    expect(responses('/plain', 'head')['429'].headers['Retry-After']).toBeDefined();
  });

  it('documents the successes a route says its HEAD gives instead of the GET\'s, with the GET\'s errors', () => {
    expect(Object.keys(responses('/callback', 'head')).sort()).toEqual(['200', '400', '429', '503']);
    expect(responses('/callback', 'head')['200'].description).toBe('Nothing else is done');
    expect(responses('/callback', 'get')['302']).toBeDefined();
    for (const method of ['get', 'head'] as const) expect(doc.paths['/callback'][method]).not.toHaveProperty(HEAD_SUCCESSES_EXTENSION);
  });
});
