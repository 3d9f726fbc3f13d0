/**
 * Request bodies: JSON and urlencoded forms are read by body-parser from fastify's content-type
 * parsers, so its limit (JSON_BODY_LIMIT), charset checks and Content-Encoding inflation apply;
 * every other media type is left unread, for a route that takes it or for ContentTypeGuard's 415.
 *
 * A body the parsers refuse (malformed JSON, too large, bad charset or encoding) is not answered
 * here: fastify would answer it before any guard runs, so a caller without credentials would
 * learn about its body before being told it is not authenticated. It is kept on the request and
 * thrown by ContentTypeGuard after the bearer and permission guards (the exception filter maps
 * body-parser's error types to the envelope).
 *
 * A route marked @StreamedBody() reads the raw request stream itself, whatever its media type
 * (a blob uploaded as application/json is stored, not parsed).
 */
import { applyDecorators } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import bodyParser from 'body-parser';
import type { FastifyInstance } from 'fastify';
import type { IncomingMessage } from 'node:http';
import { Accepts } from '../auth/decorators';

declare module 'fastify' {
  interface FastifyRequest {
    /** A body-parser failure, thrown by ContentTypeGuard. */
    bodyError?: unknown;
  }
  interface FastifyContextConfig {
    /** Set by @StreamedBody(): the handler reads `request.raw`. */
    streamedBody?: boolean;
  }
}

/** The handler reads the raw request body as a stream, of any media type. */
export const StreamedBody = () => applyDecorators(Accepts('*'), RouteConfig({ streamedBody: true }));

type Reader = (req: IncomingMessage, res: undefined, next: (err?: unknown) => void) => void;

export function registerBodyParsers(app: FastifyInstance, limit: string): void {
  app.removeAllContentTypeParsers();
  // body-parser's own media-type test is skipped: fastify has matched the type already.
  const json = bodyParser.json({ limit, type: () => true }) as unknown as Reader;
  const form = bodyParser.urlencoded({ limit, extended: false, type: () => true }) as unknown as Reader;
  const readers: Array<[string | RegExp, Reader]> = [
    ['application/json', json],
    [/^application\/[^;\s]+\+json(?:\s*;|$)/, json],
    ['application/x-www-form-urlencoded', form],
  ];
  for (const [type, read] of readers) {
    app.addContentTypeParser(type, (request, _payload, done) => {
      if (request.routeOptions.config.streamedBody) return done(null, undefined);
      const raw = request.raw as IncomingMessage & { body?: unknown };
      read(raw, undefined, (err) => {
        if (err) request.bodyError = err;
        done(null, err ? undefined : raw.body);
      });
    });
  }
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
}
