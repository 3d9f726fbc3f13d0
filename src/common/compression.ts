/**
 * Response compression: an answer of 1 KiB or more in a compressible type (JSON, text, not an
 * event stream) is sent br, gzip or deflate as the request's Accept-Encoding prefers, with
 * `Vary: Accept-Encoding`. A page of 100 items falls from 63 kB to 4 kB, /openapi.json from
 * 830 kB to 47 kB. `@fastify/compress` does the work, on the libuv thread pool past 8 KiB.
 *
 * Not compressed:
 * - blob downloads (`@Uncompressed()`): stored bytes with a strong ETag and the Content-Length a
 *   client checks its download against, often compressed already;
 * - event streams: an event must reach the client when it is sent, not when a block fills;
 * - the provider's pages and endpoints, answered before routing (oidc-mount.ts): the sign-in
 *   pages carry CSRF tokens beside reflected input, what a BREACH attack reads compressed sizes
 *   for.
 * Request bodies are not inflated here: body-parsing.ts does that within the body limits.
 */
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { RouteConfig } from '@nestjs/platform-fastify';
import fastifyCompress from '@fastify/compress';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set by @Uncompressed(): the route's answers are sent as they are. */
    uncompressed?: boolean;
  }
}

/** Smaller answers gain less than the bytes of headers and the work cost them. */
const MIN_BYTES = 1024;

/** Marks a route whose answers are never compressed. */
export const Uncompressed = () => RouteConfig({ uncompressed: true });

/** Before the routes are added (app.init), whose answers it then compresses. */
export async function registerCompression(app: NestFastifyApplication): Promise<void> {
  app.getHttpAdapter().getInstance().addHook('onRoute', (route) => {
    if (route.config?.uncompressed) route.compress = false;
  });
  await app.register(fastifyCompress, { global: true, globalDecompression: false, threshold: MIN_BYTES, encodings: ['br', 'gzip', 'deflate'] });
}
