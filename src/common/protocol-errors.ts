/**
 * The envelope for requests refused by the HTTP layer, before Nest (or routing) sees them:
 * - Node's parser (`clientError`): a malformed request line or header, an unknown method,
 *   conflicting Content-Length and Transfer-Encoding, headers past the size limit (431), a
 *   request that took too long to arrive (408). No request object exists yet, so the response
 *   carries a fresh X-Request-Id that the log line names too, and the headers every response
 *   has (`BareHeaders`: the security headers, and the X-RateLimit-* ones of the client address's
 *   bucket of unrouted paths, SPEC 8.1).
 * - Fastify's router (`frameworkErrors`): a URL that is not validly percent-encoded. The router
 *   runs no onRequest hook for it, so the refusal runs the pipeline's log line, credential and
 *   rate-limit steps itself: it is logged, counts against the caller's bucket and carries the
 *   X-RateLimit-* headers like every other response (SPEC 8.1).
 * - A query string that is not validly percent-encoded (`requireValidQuery`): the router does
 *   not look at the query, and Fastify's parser keeps bad escapes as text.
 * - An HTTP/1.1 request without a Host header (Node's own answer would be an empty 400), an
 *   `Expect` other than `100-continue` (Node's: a bare 417), and `CONNECT` (Node's: a closed
 *   connection), answered on the server itself (`refuseUnsupported`).
 * - A request that reaches the server while it closes (Fastify's: a bare 503), `refuseWhileClosing`.
 * - A transfer coding Node reads past without applying it, and any in an HTTP/1.0 request
 *   (`refuseTransferCodings`).
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { randomUUID } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { answersInOAuthForm } from '../rate-limit/rate-limit.policy';
import { ApiError } from './api-error';
import { announcesBody, isPercentEncoded } from './body-parsing';
import { toApiError } from './exception.filter';
import { requestFields } from './request-logging';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from './unavailable';

function refusal(code: string | undefined): ApiError {
  if (code === 'HPE_HEADER_OVERFLOW') return new ApiError(431, 'invalid_request', 'The request headers are too large');
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return new ApiError(408, 'invalid_request', 'The request did not arrive in time');
  return new ApiError(400, 'invalid_request', 'The request is not valid HTTP/1.1');
}

/**
 * The headers every response carries, for one answered below Fastify (client address, method):
 * `of` is set once the application exists (app.factory.ts); until then, and should it fail, none.
 */
export interface BareHeaders {
  of?: (address: string | undefined, method: string) => Promise<Record<string, string>>;
}

async function headersOf(bare: BareHeaders, address: string | undefined, method: string): Promise<Record<string, string>> {
  return (await bare.of?.(address, method).catch(() => undefined)) ?? {};
}

/** Writes the envelope as a whole response on a bare socket and closes it (no body for HEAD). */
function answerOnSocket(socket: Duplex, apiError: ApiError, id: string, head: boolean, headers: Record<string, string>): void {
  if (socket.writable) {
    const body = JSON.stringify(apiError.toEnvelope());
    const more = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
    socket.write(
      `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status]}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${id}\r\n${more}Connection: close\r\n\r\n${head ? '' : body}`,
    );
  }
  socket.destroy();
}

/** Sockets whose refusal is being written: the parser reports every further chunk of them again. */
const answering = new WeakSet<Duplex>();

export function clientErrorHandler(logger: Logger, bare: BareHeaders) {
  return (err: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed || answering.has(socket)) return;
    // Bytes after a request that asked to close the connection: that request still gets its
    // answer, after which the connection closes, and what followed is never read (RFC 9112 9.6).
    // Refusing here would destroy the socket under the answer in progress.
    if (err.code === 'HPE_CLOSED_CONNECTION') return;
    answering.add(socket);
    socket.pause(); // nothing more of this request is read while its answer waits for the rate limit
    const apiError = refusal(err.code);
    const id = randomUUID();
    logger.warn({ req: { id, remoteAddress: socket.remoteAddress }, res: { statusCode: apiError.status }, parserError: err.code }, 'request refused by the HTTP parser');
    // The chunk that failed need not hold the request line, so the method is not known: every
    // such refusal counts as a write (one bucket, the stricter), and only a HEAD seen gets no body.
    const head = Buffer.isBuffer(err.rawPacket) && err.rawPacket.subarray(0, 5).toString('latin1') === 'HEAD ';
    void headersOf(bare, socket.remoteAddress, '').then((headers) => answerOnSocket(socket, apiError, id, head, headers));
  };
}

/** What Node would answer by itself, in the envelope: an unknown `Expect`, and `CONNECT`. */
export function refuseUnsupported(server: Server, logger: Logger, bare: BareHeaders): void {
  // Logged as the request hook logs a request, which never sees these.
  const logRefusal = (req: IncomingMessage, id: string, status: number) =>
    logger.warn({ req: requestFields(req, id), res: { statusCode: status } }, 'request refused');
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const apiError = new ApiError(417, 'invalid_request', 'Only "Expect: 100-continue" is supported');
    const body = JSON.stringify(apiError.toEnvelope());
    const id = randomUUID();
    logRefusal(req, id, apiError.status);
    void headersOf(bare, req.socket.remoteAddress, req.method ?? '').then((headers) => {
      res.writeHead(417, {
        ...headers,
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body),
        'X-Request-Id': id,
        Connection: 'close',
      });
      res.end(req.method === 'HEAD' ? undefined : body);
    });
  });
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    socket.pause();
    const apiError = new ApiError(400, 'invalid_request', 'CONNECT is not supported: this is not a proxy');
    const id = randomUUID();
    logRefusal(req, id, apiError.status);
    void headersOf(bare, req.socket.remoteAddress, 'CONNECT').then((headers) => answerOnSocket(socket, apiError, id, false, headers));
  });
}

/** A step of the request pipeline that a refusal before routing still takes. */
export type PreRoutingStep = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** `steps` is filled once the application exists (the adapter, which needs this, is made first). */
export function frameworkErrors(steps: readonly PreRoutingStep[]) {
  return async (error: FastifyError, request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    let apiError: ApiError;
    try {
      for (const step of steps) {
        await step(request, reply);
        if (reply.sent) return;
      }
      apiError =
        error.statusCode === 400 ? new ApiError(400, 'invalid_request', 'The URL is not validly percent-encoded') : toApiError(error, request.id);
    } catch (err) {
      apiError = toApiError(err, request.id);
    }
    void reply.header('X-Request-Id', request.id).status(apiError.status).send(apiError.toEnvelope());
  };
}

/**
 * The body of a GET or HEAD request means nothing (RFC 9110 9.3.1) and no route reads one, so it
 * is read to its end and dropped before the request is handled. Left unread, the answer went out
 * with `Connection: close` while the body was still arriving, and the closed socket reset the
 * connection midway through a large answer (GET /openapi.json) to a client that sends all of its
 * body before it reads, as simple clients do. REQUEST_TIMEOUT_MS bounds the wait (app.factory.ts).
 */
export const dropBodyOfGet: onRequestHookHandler = (request, _reply, done) => {
  const { method, headers, raw } = request;
  if ((method !== 'GET' && method !== 'HEAD') || !announcesBody(headers) || raw.readableEnded) return done();
  let waiting = true;
  const go = () => {
    if (!waiting) return;
    waiting = false;
    done();
  };
  raw.once('end', go).once('close', go).resume();
};

/**
 * A request that reaches a server already closing (pipelined, or on a kept-alive connection
 * that was busy when the shutdown began): 503 in the envelope, with Retry-After, where Fastify's
 * own answer (`return503OnClosing`, turned off) would be a bare body without either. Its
 * response closes the connection, so the client's next request goes to another instance.
 */
/** How often a closing server looks for connections that have become idle. */
const IDLE_SWEEP_MS = 100;

export function refuseWhileClosing(http: FastifyInstance): onRequestHookHandler {
  let closing = false;
  http.addHook('preClose', (done) => {
    closing = true;
    // server.close() closes the connections idle when it is called; one whose request was in
    // flight then stayed open once answered (keep-alive) and held the shutdown to its 25 s
    // deadline. So connections are closed as they become idle, until the server has closed.
    const idle = setInterval(() => http.server.closeIdleConnections(), IDLE_SWEEP_MS).unref();
    http.server.once('close', () => clearInterval(idle));
    done();
  });
  return (request, reply, done) => {
    if (!closing) return done();
    const message = 'This instance is shutting down; send the request again';
    // The OAuth endpoints' clients read RFC 6749's error form, as for any other outage.
    const body = answersInOAuthForm(request.method, request.url.split('?')[0])
      ? { error: 'temporarily_unavailable', error_description: message }
      : new ApiError(503, 'service_unavailable', message).toEnvelope();
    void reply.status(503).header('Retry-After', UNAVAILABLE_RETRY_AFTER_SECONDS).header('Connection', 'close').header('Cache-Control', 'no-store').send(body);
  };
}

/**
 * A query string that is not validly percent-encoded (`%zz`, or escapes that are not UTF-8): 400,
 * as the router answers such a path (and as a form's are refused, isPercentEncoded). Fastify's
 * query parser keeps a bad escape as text, so `?tags=%E0` matched a tag spelt "%E0" while
 * `/items/%E0` was refused.
 */
export const requireValidQuery: onRequestHookHandler = (request, reply, done) => {
  const { url } = request;
  const start = url.indexOf('?');
  if (start < 0) return done();
  const end = url.indexOf('#', start);
  if (isPercentEncoded(url.slice(start + 1, end < 0 ? undefined : end))) return done();
  void reply.status(400).send(new ApiError(400, 'invalid_request', 'The query string is not validly percent-encoded').toEnvelope());
};

/**
 * A transfer coding other than `chunked` is refused: none is implemented. Node's parser refuses
 * a request whose last coding is not `chunked`, but reads the chunks of `gzip, chunked` as if
 * the gzip were not there, so a gzipped body was read as plain JSON. 400 like the parser's own
 * refusal, not RFC 9112 6.1's 501: here a 5xx says the service failed (500, or 503 and send it
 * again; README, "Errors"), and no input is to make it answer one (test/fuzz/oracles.ts).
 */
export const refuseTransferCodings: onRequestHookHandler = (request, reply, done) => {
  const codings = request.headers['transfer-encoding']?.split(',').map((c) => c.trim().toLowerCase()).filter(Boolean);
  if (codings !== undefined && request.raw.httpVersion === '1.0') {
    // HTTP/1.0 has no transfer codings: such a message's framing is faulty (RFC 9112 6.1), and its
    // connection is not to be used again.
    const apiError = new ApiError(400, 'invalid_request', 'An HTTP/1.0 request cannot use Transfer-Encoding', { transfer_encoding: request.headers['transfer-encoding'] });
    void reply.status(400).header('Connection', 'close').send(apiError.toEnvelope());
    return;
  }
  if (codings === undefined || (codings.length === 1 && codings[0] === 'chunked')) return done();
  const apiError = new ApiError(400, 'invalid_request', 'Unsupported Transfer-Encoding: only chunked is implemented', {
    transfer_encoding: request.headers['transfer-encoding'],
  });
  void reply.status(400).send(apiError.toEnvelope());
};

/** HTTP/1.1 requires Host (RFC 9112 3.2); Node's check is turned off so the refusal can be ours. */
export const requireHost: onRequestHookHandler = (request, reply, done) => {
  if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
    void reply.status(400).send(new ApiError(400, 'invalid_request', 'An HTTP/1.1 request needs a Host header').toEnvelope());
    return;
  }
  done();
};
