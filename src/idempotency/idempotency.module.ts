/**
 * Idempotency keys: `@Idempotent()` routes (idempotent.decorator.ts) replay their first
 * response to retries carrying the same `Idempotency-Key`. Global, so that the interceptor
 * the decorator puts on a route finds its store from any module.
 */
import { Global, Module } from '@nestjs/common';
import { IdempotencyJanitor } from './idempotency.janitor';
import { IdempotencyStore } from './idempotency.store';
import { ResponseSeal } from './response-seal';

@Global()
@Module({
  providers: [IdempotencyStore, IdempotencyJanitor, ResponseSeal],
  exports: [IdempotencyStore, ResponseSeal],
})
export class IdempotencyModule {}
