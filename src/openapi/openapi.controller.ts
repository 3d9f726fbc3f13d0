/**
 * Serves the interface description and the browsable reference through the normal request
 * pipeline (request id, rate-limit headers, logs): `GET /openapi.json` and `GET /docs`, whose
 * Swagger UI assets come from the swagger-ui-dist package inside the service, never a CDN.
 */
import { Controller, Get, Header, Headers, Injectable, NotFoundException, Param, Res } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiOperation, ApiTags, OpenAPIObject } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { getAbsoluteFSPath } from 'swagger-ui-dist';
import { Public } from '../auth/decorators';
import { ApiNotModified, namesEntityTag } from '../common/entity-tags';
import { ApiErrors } from './api-errors.decorator';

/** Filled in by app.factory.ts once every module is registered. */
@Injectable()
export class OpenApiDocument {
  document: OpenAPIObject;
}

/** The Swagger UI files served, by their media type. */
const ASSETS = new Map([
  ['swagger-ui.css', 'text/css; charset=utf-8'],
  ['swagger-ui-bundle.js', 'application/javascript; charset=utf-8'],
  ['favicon-32x32.png', 'image/png'],
  ['favicon-16x16.png', 'image/png'],
]);

const PAGE = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Structured Data Service API</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>`;

/**
 * Weak: the document is the same whatever the Content-Encoding it is sent in (compression.ts),
 * which a strong tag would have to tell apart (RFC 9110 8.8.1).
 */
function served(document: OpenAPIObject): { bytes: Buffer; etag: string } {
  const bytes = Buffer.from(JSON.stringify(document));
  return { bytes, etag: `W/"${createHash('sha256').update(bytes).digest('base64url')}"` };
}

const DOCUMENT_HEADERS = {
  ETag: { description: 'A weak tag of the document (the same in every Content-Encoding)', schema: { type: 'string' } },
  'Cache-Control': { description: 'no-cache: a cache revalidates it with If-None-Match', schema: { type: 'string' } },
} as const;

const INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true, persistAuthorization: false });`;

@ApiTags('meta')
@Controller()
@Public()
export class OpenApiController {
  /** The document as sent, made on first request (830 kB of JSON is not stringified per request). */
  private served?: { bytes: Buffer; etag: string };

  constructor(private readonly holder: OpenApiDocument) {}

  @Get('openapi.json')
  @ApiOperation({ summary: 'This document (OpenAPI 3.1.0)', description: 'Revalidate with If-None-Match: the document changes only with the running release.' })
  @ApiHeader({ name: 'If-None-Match', required: false })
  @ApiOkResponse({
    description: 'The OpenAPI document',
    content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
    headers: DOCUMENT_HEADERS,
  })
  @ApiNotModified(DOCUMENT_HEADERS)
  async openapi(@Headers('if-none-match') ifNoneMatch: string | undefined, @Res() reply: FastifyReply): Promise<void> {
    const { bytes, etag } = (this.served ??= served(this.holder.document));
    reply.header('ETag', etag).header('Cache-Control', 'no-cache');
    if (namesEntityTag(ifNoneMatch, etag)) await reply.status(304).send();
    else await reply.type('application/json; charset=utf-8').send(bytes);
  }

  @Get('docs')
  @Header('Content-Type', 'text/html; charset=utf-8')
  // Not to be framed (clickjacking); a policy of frame-ancestors alone leaves Swagger UI's own scripts and styles be.
  @Header('X-Frame-Options', 'DENY')
  @Header('Content-Security-Policy', "frame-ancestors 'none'")
  @ApiOperation({ summary: 'Browsable API reference (Swagger UI, served locally)' })
  @ApiOkResponse({ description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } })
  docs(): string {
    return PAGE;
  }

  @Get('docs/:asset')
  @ApiOperation({ summary: 'A static asset of the API reference page (scripts and styles of Swagger UI)' })
  @ApiOkResponse({
    description: 'JavaScript, CSS or an image',
    content: Object.fromEntries(['application/javascript', 'text/css', 'image/png'].map((type) => [type, { schema: { type: 'string', format: 'binary' } }])),
  })
  @ApiErrors(404)
  async asset(@Param('asset') asset: string, @Res() reply: FastifyReply): Promise<void> {
    if (asset === 'init.js') {
      await reply.type('application/javascript; charset=utf-8').send(INIT);
      return;
    }
    const type = ASSETS.get(asset);
    if (!type) throw new NotFoundException();
    await reply.type(type).header('Cache-Control', 'public, max-age=86400').send(createReadStream(join(getAbsoluteFSPath(), asset)));
  }
}
