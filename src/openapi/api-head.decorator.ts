/**
 * Fastify answers HEAD on every GET route by running the GET's handler and dropping the body,
 * so openapi.ts documents each GET path's HEAD as the GET's answers without their bodies. A
 * handler that answers HEAD differently (the connector callback, which must not spend its
 * single-use state on a link checker's probe) says so with `@ApiHeadSuccesses({ 200: '…' })`:
 * these successes replace the GET's 1xx–3xx answers in the HEAD operation, its errors stay the GET's.
 */
import { ApiExtension } from '@nestjs/swagger';

/** Read and removed by openapi.ts once the HEAD operation is written. */
export const HEAD_SUCCESSES_EXTENSION = 'x-head-successes';

export const ApiHeadSuccesses = (successes: Record<number, string>) => ApiExtension(HEAD_SUCCESSES_EXTENSION, successes);
