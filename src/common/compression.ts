/**
 * Response compression: an answer of 1 KiB or more in a compressible type (JSON, text, not an
 * event stream) is sent br, gzip or deflate as the request's Accept-Encoding prefers. A page of
 * 100 items falls from 63 kB to 4 kB, /openapi.json from 830 kB to 47 kB. `@fastify/compress`
 * does the work, on the libuv thread pool past 8 KiB.
 *
 * Not compressed:
 * - blob downloads (`@Uncompressed()`): stored bytes with a strong ETag and the Content-Length a
 *   client checks its download against (and its byte ranges), often compressed already;
 * - event streams: an event must reach the client when it is sent, not when a block fills;
 * - everything under /auth/: the provider's endpoints answer before routing (oidc-mount.ts), and
 *   the sign-in, consent and device pages, Nest routes, carry CSRF tokens beside reflected input,
 *   what a BREACH attack reads compressed sizes for.
 * Request bodies are not inflated here: body-parsing.ts does that within the body limits.
 */
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { RouteConfig } from '@nestjs/platform-fastify';
import fastifyCompress from '@fastify/compress';
import type { onSendHookHandler, RouteOptions } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set by @Uncompressed(): the route's answers are sent as they are. */
    uncompressed?: boolean;
  }
}

/** Smaller answers gain less than the bytes of headers and the work cost them. */
const MIN_BYTES = 1024;

/** As the plugin writes it, which looks for it in lower case before adding its own. */
const ACCEPT_ENCODING = 'accept-encoding';

const NOT_COMPRESSED = /^\/auth(\/|$)/i;

/** Marks a route whose answers are never compressed. */
export const Uncompressed = () => RouteConfig({ uncompressed: true });

/**
 * Every answer of a route that may compress varies with Accept-Encoding, those sent as they are
 * (too small, not asked for, a 304) included (RFC 9110 12.5.5, 15.4.5); the plugin says so only
 * when it compresses. Beside a `Vary: Origin` CORS may have set.
 */
const varyOnEncoding: onSendHookHandler = (_request, reply, payload, done) => {
  const vary = reply.getHeader('vary');
  const given = vary === undefined ? [] : [vary].flat().map(String);
  if (!given.some((v) => v.toLowerCase().includes(ACCEPT_ENCODING))) reply.header('Vary', [...given, ACCEPT_ENCODING].join(', '));
  done(null, payload);
};

function routeCompression(route: RouteOptions): void {
  if (route.config?.uncompressed || NOT_COMPRESSED.test(route.url)) {
    route.compress = false;
    return;
  }
  route.onSend = [varyOnEncoding, ...[route.onSend ?? []].flat()];
}

/** Before the routes are added (app.init), whose answers it then compresses. */
export async function registerCompression(app: NestFastifyApplication): Promise<void> {
  app.getHttpAdapter().getInstance().addHook('onRoute', routeCompression);
  await app.register(fastifyCompress, { global: true, globalDecompression: false, threshold: MIN_BYTES, encodings: ['br', 'gzip', 'deflate'] });
}
