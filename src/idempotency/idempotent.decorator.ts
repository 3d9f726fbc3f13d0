/**
 * `@Idempotent()` marks a route whose retries, sent with the same `Idempotency-Key` header,
 * return the first response instead of running again: it puts IdempotencyInterceptor on that
 * route only (a global interceptor would cost every other request an rxjs pipeline, ~10% of
 * the service's CPU per request on a search). It also documents the header in the OpenAPI
 * description of the route.
 */
import { applyDecorators, UseInterceptors } from '@nestjs/common';
import { ApiHeader } from '@nestjs/swagger';
import { IDEMPOTENCY_KEY_HEADER } from './idempotency-key';
import { IdempotencyInterceptor } from './idempotency.interceptor';

export const Idempotent = () =>
  applyDecorators(
    UseInterceptors(IdempotencyInterceptor),
    ApiHeader({
      name: IDEMPOTENCY_KEY_HEADER,
      required: false,
      description:
        'Makes the request safe to retry: for 24 hours (IDEMPOTENCY_TTL_HOURS), a request from the same credential with the same key ' +
        'returns the first response (status, body and `Location`) with `Idempotent-Replayed: true` instead of running again. The same key with a ' +
        'different method, path or body is 409 `conflict`; a retry while the first request still runs waits for it. 5xx and 429 ' +
        'responses are not kept, so their retry runs again. 1-255 visible ASCII characters; use a random UUID.',
      schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]{1,255}$' },
    }),
  );
