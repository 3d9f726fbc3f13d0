/** Rate limiting (SPEC 8.1): the middleware that runs right after credential resolution. */
import { Module } from '@nestjs/common';
import { RateLimitMiddleware } from './rate-limit.middleware';

@Module({ providers: [RateLimitMiddleware], exports: [RateLimitMiddleware] })
export class RateLimitModule {}
