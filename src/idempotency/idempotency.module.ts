/**
 * Idempotency keys: `@Idempotent()` routes (idempotent.decorator.ts) replay their first
 * response to retries carrying the same `Idempotency-Key`. The interceptor is global but acts
 * only on decorated routes.
 */
import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyJanitor } from './idempotency.janitor';
import { IdempotencyStore } from './idempotency.store';

@Module({
  providers: [IdempotencyStore, IdempotencyJanitor, { provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor }],
})
export class IdempotencyModule {}
