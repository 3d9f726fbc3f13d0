/** Rate limiting (SPEC 8.1): the request hook that runs right after credential resolution. */
import { Module } from '@nestjs/common';
import { RateLimitHook } from './rate-limit.hook';

@Module({ providers: [RateLimitHook], exports: [RateLimitHook] })
export class RateLimitModule {}
