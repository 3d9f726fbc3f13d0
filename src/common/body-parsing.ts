/**
 * Request bodies: JSON and urlencoded forms are read by body-parser from fastify's content-type
 * parsers, so its limit (JSON_BODY_LIMIT), charset checks and Content-Encoding inflation apply;
 * every other media type is left unread, for a route that takes it or for InputGuard's 415 (on
 * DELETE to a route without a body, BodylessRouteGuard's: bodyless-routes.ts).
 * A parsed body then passes the input policy (input-policy.ts: no NUL, no unpaired surrogate,
 * at most 64 levels deep).
 *
 * A body refused here (malformed JSON, too large, a charset other than UTF-8, a bad encoding,
 * bytes or a form's %-escapes that are not UTF-8, against the policy) is not answered here:
 * fastify would answer it before any guard runs, so a caller without credentials would learn
 * about its body before being told it is not authenticated. Its ApiError is kept on the request
 * and thrown by InputGuard after the bearer and permission guards.
 *
 * A route marked @StreamedBody() reads the raw request stream itself, whatever its media type
 * (a blob uploaded as application/json is stored, not parsed).
 */
import { applyDecorators } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import type { IncomingHttpHeaders } from 'node:http';
import { RouteConfig } from '@nestjs/platform-fastify';
import bodyParser from 'body-parser';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import typeis from 'type-is';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { isUtf8 } from 'node:buffer';
import { PassThrough, pipeline } from 'node:stream';
import { Accepts } from '../auth/decorators';
import { ApiError } from './api-error';
import { headerText, inputIssues } from './input-policy';
import { isUntransformed, nonObjectBodyError, validationError } from './validation';

declare module 'fastify' {
  interface FastifyRequest {
    /** Why the body was refused, thrown by InputGuard. */
    bodyError?: ApiError;
  }
  interface FastifyContextConfig {
    /** Set by @StreamedBody(): the handler reads `request.raw`. */
    streamedBody?: boolean;
    /** Set by @PerElementBody(): the text policy for this array's elements is the handler's. */
    perElement?: string;
  }
}

/** Whether a request says it carries a body (a non-zero Content-Length, or chunks). */
export const announcesBody = (headers: IncomingHttpHeaders): boolean =>
  Number(headers['content-length'] ?? 0) > 0 || headers['transfer-encoding'] !== undefined;

/** What an API route reads unless it declares otherwise (@Accepts). */
export const JSON_MEDIA_TYPES = ['application/json', '+json'];

/** The 415 for a request that carries a body of none of the `accepted` media types; undefined otherwise. */
export function unacceptedMediaType(req: FastifyRequest, accepted: readonly string[]): ApiError | undefined {
  if (!announcesBody(req.headers) || accepted.includes('*') || typeis(req.raw, [...accepted])) return undefined;
  return new ApiError(415, 'invalid_request', `Content-Type must be ${accepted.join(' or ')}`, { content_type: req.headers['content-type'] === undefined ? null : headerText(req.headers['content-type'], 255) });
}

/** What a PATCH takes (RFC 5789 Accept-Patch): the fields to change as an object, merged as each route documents. */
export const ACCEPT_PATCH = 'application/json, application/merge-patch+json';

/**
 * The 415 for a PATCH sent as a JSON Patch (RFC 6902), a list of operations: no route takes one
 * (RFC 5789 2.2: an unsupported patch document is 415, with Accept-Patch). Read as JSON, the
 * list was refused as a body that is no object, which said nothing of the format.
 */
export function unsupportedPatch(req: FastifyRequest): ApiError | undefined {
  if (req.method !== 'PATCH' || !announcesBody(req.headers) || !typeis(req.raw, ['application/json-patch+json'])) return undefined;
  return new ApiError(415, 'invalid_request', `A JSON Patch (RFC 6902) is not taken: send the fields to change as a JSON object (${ACCEPT_PATCH})`, {
    content_type: headerText(req.headers['content-type']!, 255),
  });
}

/** The handler reads the raw request body as a stream, of any media type. */
export const StreamedBody = () => applyDecorators(Accepts('*'), RouteConfig({ streamedBody: true }));

/**
 * The text policy (reserved key names included) is left to the handler for the elements of the
 * body's top-level array `field` (POST /items/bulk reports a bad element as that element's error
 * and writes the others); the DTO marks that field @Untransformed, so the handler gets the
 * elements as sent. Nesting depth is still checked for the whole body here.
 *
 * The two go together: nothing else keeps an element's `__proto__` key from class-transformer
 * (the validation pipe's stripProtoKeys is off). So the decorator checks the handler's @Body()
 * DTO as it decorates the handler (a method's parameter decorators and `design:paramtypes` are
 * applied before its method decorators), and a route that forgets @Untransformed fails as its
 * module loads: at start-up and in every test, not at the first hostile request. The DTO
 * carries @Untransformed itself, rather than this decorator adding it, so that the DTO reads as
 * what it does.
 */
export const PerElementBody =
  (field: string): MethodDecorator =>
  (target, key, descriptor) => {
    const dto = bodyDto(target, key);
    if (!isUntransformed(dto, field)) {
      throw new Error(`@PerElementBody('${field}') on ${target.constructor.name}.${String(key)} needs a @Body() DTO whose ${field} is @Untransformed()`);
    }
    return RouteConfig({ perElement: field })(target, key, descriptor);
  };

/** The class of a handler's whole-body @Body() parameter, if it has one. */
function bodyDto(target: object, key: string | symbol): unknown {
  const args: Record<string, { index: number; data?: unknown }> = Reflect.getMetadata(ROUTE_ARGS_METADATA, target.constructor, key) ?? {};
  const body = Object.entries(args).find(([k, arg]) => k.split(':')[0] === String(RouteParamtypes.BODY) && arg.data === undefined)?.[1];
  return body && (Reflect.getMetadata('design:paramtypes', target, key) as unknown[] | undefined)?.[body.index];
}

/** A Content-Encoding other than those body-parser decodes (and blob uploads, upload-staging.ts). */
export const unsupportedEncoding = (): ApiError =>
  new ApiError(415, 'invalid_request', 'Unsupported Content-Encoding: use gzip, deflate, br or identity');

/** body-parser's refusals (http-errors with a `type`) in the envelope. */
export function bodyParserError(err: unknown): ApiError {
  const { type, status, limit, body } = err as { type?: string; status?: number; limit?: number; body?: unknown };
  if (type === 'entity.parse.failed') {
    // body-parser takes only objects and arrays: `null`, `3` or `"x"` is valid JSON of the wrong shape.
    if (isJson(body)) return nonObjectBodyError();
    return new ApiError(400, 'invalid_request', 'The request body is not valid JSON');
  }
  if (type === 'entity.too.large') return bodyTooLarge(limit);
  if (type === 'encoding.unsupported') return unsupportedEncoding();
  if (type === 'charset.unsupported') return new ApiError(415, 'invalid_request', 'Unsupported charset: use utf-8');
  if (type === NOT_UTF8) return new ApiError(400, 'invalid_request', 'The request body is not valid UTF-8');
  if (type === NOT_PERCENT_ENCODED) return new ApiError(400, 'invalid_request', 'The form is not validly percent-encoded: every %-escape must decode, to UTF-8');
  if (status === 400) {
    // raw-body's inflation and stream errors: bytes that are not what Content-Encoding says, a
    // body shorter than Content-Length, a client that stopped sending.
    return new ApiError(400, 'invalid_request', 'The request body could not be read: it does not match its Content-Encoding or Content-Length');
  }
  return new ApiError(400, 'invalid_request', 'The request body could not be read');
}

const bodyTooLarge = (limit: number | undefined): ApiError =>
  new ApiError(413, 'invalid_request', 'The request body is too large', limit ? { limit_bytes: limit } : undefined);

function isJson(text: unknown): boolean {
  try {
    JSON.parse(text as string);
    return typeof text === 'string';
  } catch {
    return false;
  }
}

type Reader = (req: IncomingMessage, res: undefined, next: (err?: unknown) => void) => void;

const NOT_UTF8 = 'entity.not.utf8';
const NOT_PERCENT_ENCODED = 'entity.not.percent.encoded';

const refusal = (message: string, status: number, type: string) => Object.assign(new Error(message), { status, type });

/**
 * Whether every %-escape of a query string or form decodes, to UTF-8. The decoders of query
 * strings and forms (qs, Node's querystring) keep a bad escape as its text (`%FF` a label of
 * three characters) or put U+FFFD in its place, rather than refuse it.
 */
export function isPercentEncoded(text: string): boolean {
  if (!text.includes('%')) return true;
  try {
    for (const part of text.split(/[&=]/)) decodeURIComponent(part);
    return true;
  } catch {
    return false;
  }
}

/**
 * body-parser's `verify`, before the bytes are decoded. Every body is UTF-8: JSON by RFC 8259
 * 8.1, a form as the pages (UTF-8 themselves) send it. body-parser decoded JSON in any `utf-*`
 * charset and forms in ISO-8859-1 too, so `charset=utf-7` turned `+ADw-script+AD4-` into
 * `<script>` past anything that reads bodies as UTF-8, and UTF-16 or UTF-32 that did not decode
 * became U+FFFD. Any other charset is 415, `utf8` too (the charset's name is UTF-8, RFC 3629 8),
 * as body-parser refused it already; `encoding` is the Content-Type's charset in lower case, or
 * `utf-8` when it names none. Decoding also puts U+FFFD in place of bytes that are not UTF-8,
 * so `"\xff"` and `"\xfe"` became one string and, as a `source_id`, one item. The input policy
 * refuses a NUL or an unpaired surrogate rather than change what was sent, and such bytes are
 * refused alike.
 */
function requireUtf8(_req: IncomingMessage, _res: unknown, body: Buffer, encoding: string | null): void {
  if (encoding !== 'utf-8') throw refusal('Unsupported charset', 415, 'charset.unsupported');
  if (!isUtf8(body)) throw refusal('The request body is not valid UTF-8', 400, NOT_UTF8);
}

/** A form's `verify`: UTF-8, and so are its %-escapes (as a query string's, requireValidQuery). */
function requireUtf8Form(req: IncomingMessage, res: unknown, body: Buffer, encoding: string | null): void {
  requireUtf8(req, res, body, encoding);
  if (!isPercentEncoded(body.toString())) throw refusal('The form is not validly percent-encoded', 400, NOT_PERCENT_ENCODED);
}

/**
 * A client may half-close its connection (FIN) as soon as its request is sent, and read the
 * answer after. Node's default for that (`httpAllowHalfOpen` false) destroys the request, its
 * body unread, and ends the connection before the answer: the handler ran with no body, and the
 * client heard nothing. Kept open, the request is answered as sent and the connection closed
 * after its answer; a request cut short by the FIN is still 400 (clientErrorHandler).
 * A FIN once the answer has begun still ends the connection, as Node's default did: it is how
 * a client leaves an event stream, which would otherwise hold its slot until a write failed.
 */
export function answerHalfClosed(server: Server): void {
  (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const { socket } = req;
    const left = () => {
      if (res.headersSent && !res.writableFinished) socket.end();
    };
    socket.once('end', left);
    res.once('close', () => socket.off('end', left));
  });
}

/**
 * `Expect: 100-continue` is answered with 100 only once the request's body is read. A refusal
 * before that is the final answer and the client never sends its body (RFC 9110 10.1.1), where
 * Node's default, 100 at once, had it send all of it first: a declared length over
 * JSON_BODY_LIMIT (413, below), the credential and rate-limit refusals of the pipeline's
 * hooks, and every refusal of a blob upload before it reads (401, 403, 413 over BLOB_MAX_BYTES).
 * Node closes such a connection after the answer, the body it announced being neither sent nor
 * read. A JSON body is read before Nest's guards run, so a missing credential is told after it.
 */
export function continueOnRead(server: Server): void {
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    // `_read` is how every reader asks the stream for bytes, piped, flowing or iterated (the OAuth
    // provider iterates): a 'resume' listener missed the last, which then waited for curl's 1 s.
    const stream = req as IncomingMessage & { _read(size: number): void };
    const read = stream._read;
    stream._read = function (this: typeof stream, size: number) {
      stream._read = read;
      if (!res.headersSent) res.writeContinue();
      read.call(this, size);
    };
    server.emit('request', req, res);
  });
}

type BodyRequest = IncomingMessage & { body?: unknown };

/**
 * The request's body as body-parser is to read it. body-parser skips, as if read already, a
 * request whose socket no longer reads (on-finished's isFinished, meant for Express middleware
 * run twice), and a client that half-closed right after its request then reached the handler
 * with no body at all (a key with an empty label, an Idempotency-Key kept for the wrong request).
 * The bytes are still in the request stream, so they are handed over through a stream of their
 * own that stands for its own socket: finished once it is read.
 */
function bodyStream(req: IncomingMessage): BodyRequest {
  const body = new PassThrough();
  pipeline(req, body, () => undefined); // a request cut short errors `body`, which body-parser answers
  return Object.assign(body, { headers: req.headers, complete: false, socket: body }) as unknown as BodyRequest;
}

/** Whether a body read as sent (no Content-Encoding) says it is longer than `limit` bytes. */
function declaredOver(headers: IncomingHttpHeaders, limit: number): boolean {
  const encoding = headers['content-encoding'];
  return (encoding === undefined || encoding.toLowerCase() === 'identity') && Number(headers['content-length'] ?? 0) > limit;
}

/**
 * A body's text, read by the rules of the bodies above (UTF-8, a form's %-escapes too, at most
 * `limit` bytes, a leading BOM dropped), for a reader of its own to parse: the OAuth provider's
 * (provider-body.ts), whose own reading put U+FFFD in place of bytes that are not UTF-8
 * whatever the charset said, and refused a BOM. Rejects with body-parser's refusal (bodyParserError).
 */
export function readBodyText(req: IncomingMessage, limit: number, form: boolean): Promise<string> {
  const read = bodyParser.text({ limit, type: () => true, inflate: false, verify: form ? requireUtf8Form : requireUtf8 }) as unknown as Reader;
  const raw = bodyStream(req);
  return new Promise((resolve, reject) => read(raw, undefined, (err) => (err ? reject(err) : resolve((raw.body as string | undefined) ?? ''))));
}

export function registerBodyParsers(app: FastifyInstance, limit: number): void {
  app.removeAllContentTypeParsers();
  // body-parser's own media-type test is skipped: fastify has matched the type already.
  const json = bodyParser.json({ limit, type: () => true, verify: requireUtf8 }) as unknown as Reader;
  const form = bodyParser.urlencoded({ limit, extended: false, type: () => true, verify: requireUtf8Form }) as unknown as Reader;
  const readers: Array<[string | RegExp, Reader]> = [
    ['application/json', json],
    [/^application\/[^;\s]+\+json(?:\s*;|$)/, json],
    ['application/x-www-form-urlencoded', form],
  ];
  for (const [type, read] of readers) {
    app.addContentTypeParser(type, (request, _payload, done) => {
      if (request.routeOptions.config.streamedBody) return done(null, undefined);
      // Refused unread (body-parser would read it all first), so that a client waiting for 100
      // Continue is told without sending it (continueOnRead).
      if (declaredOver(request.headers, limit)) {
        request.bodyError = bodyTooLarge(limit);
        return done(null, undefined);
      }
      const raw = bodyStream(request.raw);
      read(raw, undefined, (err) => {
        if (err) {
          request.bodyError = bodyParserError(err);
          return done(null, undefined);
        }
        const issues = inputIssues(raw.body, '', { perElement: request.routeOptions.config.perElement });
        if (issues.length) request.bodyError = validationError(issues, 'The request body is not acceptable input');
        done(null, issues.length ? undefined : raw.body);
      });
    });
  }
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
}
