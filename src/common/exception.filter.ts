/**
 * Maps every thrown thing to the SPEC 2.9 envelope: ApiError as is, Nest's HttpExceptions
 * (unknown routes, and Fastify's own 4xx errors, which Nest wraps in them) by status, a
 * dependency that is away to a 503 with Retry-After, a transaction that lost to concurrent ones
 * (a deadlock) to a 409, and anything else to a 500; these leak nothing but a request id.
 */
import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, ErrorCode, retryAfterOf } from './api-error';
import { cutText } from './input-policy';
import { isDependencyUnavailable, isStatementCancelled, isWriteCollision, UNAVAILABLE_RETRY_AFTER_SECONDS } from './unavailable';

const CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  409: 'conflict',
  413: 'invalid_request',
  415: 'invalid_request',
  429: 'rate_limited',
};

/** The request a route 404 names back: its method and path, the query left out (it may hold secrets). */
export interface RequestLine {
  method: string;
  url: string;
}

const MAX_PATH_ECHOED = 256;

export function toApiError(err: unknown, requestId: string | undefined, request?: RequestLine): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof HttpException) {
    const status = err.getStatus();
    const code = CODE_BY_STATUS[status];
    if (status === 404 || status === 405) {
      const details = request && { method: request.method, path: cutText(request.url.split('?')[0], MAX_PATH_ECHOED) };
      return new ApiError(status, 'not_found', 'No such route', details);
    }
    if (code) return new ApiError(status, code, err.message);
  }
  const details = requestId ? { request_id: requestId } : undefined;
  if (isDependencyUnavailable(err)) return new ApiError(503, 'service_unavailable', 'A service this one depends on is unavailable; retry shortly', details);
  if (isStatementCancelled(err)) {
    return new ApiError(503, 'service_unavailable', 'The database did not finish this request in time and it changed nothing; retry shortly, or narrow it', details);
  }
  if (isWriteCollision(err)) return ApiError.conflict('conflict', 'The request collided with concurrent writes and changed nothing; send it again', details);
  return new ApiError(500, 'internal_error', 'Something went wrong on our side', details);
}

@Catch()
export class EnvelopeExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('Errors');

  catch(err: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<FastifyRequest | undefined>();
    const reply = ctx.getResponse<FastifyReply>();
    const requestId = req?.id ? String(req.id) : undefined;
    const apiError = toApiError(err, requestId, req);
    // A deliberate answer (an ApiError) is logged by its request line alone.
    if (apiError !== err) {
      if (apiError.status === 503) this.logger.warn({ err, req: { id: requestId } }, 'dependency unavailable');
      else if (apiError.status === 409) this.logger.warn({ err, req: { id: requestId } }, 'write collision');
      else if (apiError.status >= 500) this.logger.error({ err, req: { id: requestId } }, 'unhandled error');
    }
    if (reply.raw.headersSent) {
      reply.raw.destroy();
      return;
    }
    if (apiError.status === 401) reply.header('WWW-Authenticate', bearerChallenge(req, apiError));
    // SPEC 8.1: every 429 carries Retry-After, whichever limit refused (the rate limiter sets its
    // own); so does any other refusal about the moment (ApiError.busy).
    const retryAfter = retryAfterOf(apiError) ?? (apiError.status === 429 ? 1 : undefined);
    if (retryAfter !== undefined && !reply.hasHeader('Retry-After')) reply.header('Retry-After', String(retryAfter));
    if (apiError.status === 503) reply.header('Retry-After', UNAVAILABLE_RETRY_AFTER_SECONDS);
    reply.status(apiError.status).send(this.body(apiError));
  }

  /** The error as the route's clients read errors: the SPEC's envelope here. */
  protected body(apiError: ApiError): unknown {
    return apiError.toEnvelope();
  }
}

/**
 * For the few routes Nest serves in OAuth's place (userinfo): the same handling, with the error
 * in RFC 6749's form (`{"error","error_description"}`), which their clients parse. Bound per controller.
 */
@Catch()
export class OAuthErrorFormFilter extends EnvelopeExceptionFilter {
  protected override body(apiError: ApiError): unknown {
    const error = apiError.status === 503 ? 'temporarily_unavailable' : apiError.status >= 500 ? 'server_error' : 'invalid_request';
    return { error, error_description: apiError.message };
  }
}

/** RFC 6750 3: a 401 names the scheme; `invalid_token` when a token was presented and refused. */
function bearerChallenge(req: FastifyRequest | undefined, apiError: ApiError): string {
  const presented = /^Bearer\s+\S/i.test(req?.headers.authorization ?? '');
  return presented ? `Bearer realm="svc", error="invalid_token", error_description="${apiError.message.replace(/["\\]/g, '')}"` : 'Bearer realm="svc"';
}
