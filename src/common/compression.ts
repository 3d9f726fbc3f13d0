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
import type { onRequestHookHandler, onSendHookHandler, RouteOptions } from 'fastify';

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

/** Ours, most preferred first: on equal weights, the one that packs JSON best. */
const ENCODINGS = ['br', 'gzip', 'deflate'] as const;

/** `coding [; q=weight]`, RFC 9110 12.4.2 and 12.5.3; `x-gzip` is gzip (12.5.3). */
const CODING = /^\s*([!#$%&'*+.^_`|~0-9a-z-]+)\s*(?:;\s*q\s*=\s*(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)\s*)?$/i;

/**
 * The coding an answer goes out in: the acceptable one (weight above 0) with the highest weight,
 * ours preferred on equal weights; `*` weighs every coding the header does not name; identity
 * when none is acceptable. The plugin reads `*` as gzip, so `gzip;q=0, *` got gzip (12.5.3).
 * Entries that do not parse are left out.
 */
export function chosenEncoding(header: string): string {
  const weights = new Map<string, number>();
  for (const entry of header.split(',')) {
    const m = CODING.exec(entry);
    if (m) weights.set(m[1].toLowerCase().replace(/^x-gzip$/, 'gzip'), m[2] === undefined ? 1 : Number(m[2]));
  }
  let best: string = 'identity';
  let bestWeight = 0;
  for (const encoding of ENCODINGS) {
    const weight = weights.get(encoding) ?? weights.get('*') ?? 0;
    if (weight > bestWeight) [best, bestWeight] = [encoding, weight];
  }
  return best;
}

/** Hands the plugin the one coding to use, which it then negotiates as itself. */
const negotiateEncoding: onRequestHookHandler = (request, _reply, done) => {
  const header = request.headers[ACCEPT_ENCODING];
  if (header !== undefined) request.headers[ACCEPT_ENCODING] = chosenEncoding(header);
  done();
};

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
  route.onRequest = [negotiateEncoding, ...[route.onRequest ?? []].flat()];
  route.onSend = [varyOnEncoding, ...[route.onSend ?? []].flat()];
}

/** Before the routes are added (app.init), whose answers it then compresses. */
export async function registerCompression(app: NestFastifyApplication): Promise<void> {
  app.getHttpAdapter().getInstance().addHook('onRoute', routeCompression);
  await app.register(fastifyCompress, { global: true, globalDecompression: false, threshold: MIN_BYTES, encodings: [...ENCODINGS] });
}
