/**
 * Builds a ready (not yet listening) application from a config: checks that PostgreSQL and
 * Redis answer, creates the database when missing, and wires the HTTP platform, body parsing,
 * validation, logs and the API reference. main.ts and the e2e tests both start the service
 * through here.
 *
 * The HTTP platform is Fastify, not Express (ARCHITECTURE names Express): on this kind of
 * machine a minimal guarded Nest route cost 0.24-0.42 ms of CPU per request on Express and
 * 0.07-0.12 on Fastify, and a small search 0.73-0.91 against 0.48-0.59 (README, "HTTP
 * platform"). Routing keeps Express's rules, so clients see no change: paths match in any
 * case and with or without a trailing slash.
 */
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import Redis from 'ioredis';
import { Logger } from 'nestjs-pino';
import type { Logger as PinoLogger } from 'pino';
import { DataSource } from 'typeorm';
import { AppModule } from './app.module';
import { answerCredentialError, CredentialHook } from './auth/credential.hook';
import { answerHalfClosed, continueOnRead, registerBodyParsers } from './common/body-parsing';
import { BodylessRouteGuard } from './common/bodyless-routes';
import {
  BareHeaders,
  clientErrorHandler,
  dropBodyOfGet,
  frameworkErrors,
  PreRoutingStep,
  refuseUnsupported,
  refuseTransferCodings,
  refuseWhileClosing,
  requireHost,
  requireValidQuery,
} from './common/protocol-errors';
import { registerCompression } from './common/compression';
import { answerPreflight, corsHeaders, setCorsHeaders } from './common/cors';
import { createLogger, requestId, requestLogging } from './common/request-logging';
import { serializeJson } from './common/json-reply';
import { EVERY_RESPONSE, securityHeaders, setSecurityHeaders } from './common/security-headers';
import { redactUrl, StartupError } from './common/startup-error';
import { enterTenantContext } from './common/tenant-context';
import { orTimeout } from './common/timeout';
import { createValidationPipe } from './common/validation';
import { AppConfig, sizeBytes } from './config/app-config';
import { checkEncryptionKey } from './crypto/sealed-columns';
import { SecretBox } from './crypto/secret-box';
import { ensureDatabase, requireMigrated, runMigrations } from './database/data-source-options';
import { mountOpenApi } from './openapi/openapi';
import { RateLimitHook } from './rate-limit/rate-limit.hook';
import { OidcMount } from './oidc/oidc-mount';

async function checkRedis(url: string): Promise<void> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 3000 });
  client.on('error', () => undefined);
  // ioredis selects the URL's database on connecting, but a refusal (an index past the server's
  // `databases`) is only an error event: every connection would then work in database 0.
  const database = Number(client.options.db ?? 0);
  try {
    // connectTimeout bounds the TCP connect only: a server that accepts and never answers (the
    // ready check, the PING) held start-up for ever.
    const answers = async () => {
      await client.connect();
      await client.ping();
    };
    await orTimeout(answers(), 5000, 'Redis');
  } catch (err) {
    client.disconnect();
    throw new StartupError(
      `cannot reach Redis at ${redactUrl(url)} (${(err as Error).message}); start it (redis-server --daemonize yes) or set REDIS_URL`,
    );
  }
  try {
    if (database !== 0) await orTimeout(client.select(database), 5000, 'Redis');
  } catch (err) {
    throw new StartupError(`Redis at ${redactUrl(url)} refused database ${database} (${(err as Error).message}); set REDIS_URL's database number`);
  } finally {
    client.disconnect();
  }
}

/**
 * BLOB_DIR (uploads are staged there whatever the store) can be made and written: its nearest
 * existing ancestor is a directory this process may write. Created only by the first upload, so
 * an instance that never takes one leaves no trace; a directory below a file, or unwritable,
 * failed every upload with a 500 (or start-up with a bare ENOTDIR) rather than refusing to start.
 */
async function checkBlobDir(blobDir: string): Promise<void> {
  const wanted = resolve(blobDir);
  let at = wanted;
  for (;;) {
    const info = await stat(at).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw new StartupError(`BLOB_DIR ${wanted} cannot be used (${err.message}); set BLOB_DIR`);
    });
    if (info?.isDirectory()) break;
    if (info) throw new StartupError(`BLOB_DIR ${wanted} cannot be made: ${at} is not a directory; set BLOB_DIR`);
    at = dirname(at);
  }
  await access(at, constants.W_OK).catch((err: Error) => {
    throw new StartupError(`BLOB_DIR ${wanted} cannot be written (${err.message}); set BLOB_DIR or its permissions`);
  });
}

/**
 * Path parameters of any length reach their route, whose validation answers a bad one, as on
 * Express (find-my-way's default would answer 404 past 100 characters).
 */
const MAX_PARAM_LENGTH = 16 * 1024;

/** How long Node gives a request's headers by itself, when the whole request may take longer. */
const HEADERS_TIMEOUT_MS = 60_000;

function adapter(config: AppConfig, logger: PinoLogger, preRouting: readonly PreRoutingStep[], bare: BareHeaders): FastifyAdapter {
  const timeout = config.REQUEST_TIMEOUT_MS;
  return new FastifyAdapter({
    trustProxy: config.trustProxy,
    genReqId: requestId,
    requestIdHeader: false,
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // Refusals below Nest, in the envelope too (protocol-errors.ts).
    frameworkErrors: frameworkErrors(preRouting),
    clientErrorHandler: clientErrorHandler(logger, bare),
    // A request whose headers and body have not all arrived within REQUEST_TIMEOUT_MS is 408
    // (clientErrorHandler). Fastify's default is no limit: a body sent a byte at a time held its
    // connection, and a handler waiting for it, for ever. The headers' own bound is Node's
    // default, 60 s or the whole request's if shorter (Node applies the longer of the two).
    // Node looks for late requests every connectionsCheckingInterval (30 s by default), here a
    // tenth of the bound at most, so that a short one holds too.
    requestTimeout: timeout,
    http: {
      requireHostHeader: false,
      headersTimeout: Math.min(HEADERS_TIMEOUT_MS, timeout),
      connectionsCheckingInterval: Math.min(30_000, timeout / 10),
    },
    return503OnClosing: false, // refuseWhileClosing answers in the envelope
  });
}

export async function createApp(config: AppConfig): Promise<NestFastifyApplication> {
  await ensureDatabase(config.DATABASE_URL);
  await checkRedis(config.REDIS_URL);
  await checkBlobDir(config.BLOB_DIR);
  if (config.MIGRATIONS_RUN) await runMigrations(config);
  else await requireMigrated(config);
  const logger = createLogger(config);
  const preRouting: PreRoutingStep[] = [];
  const bare: BareHeaders = {};
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config, logger), adapter(config, logger, preRouting, bare), {
    bodyParser: false,
    bufferLogs: true,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  // Started as documented (the default serves local development), but not as a deployment wants.
  if (config.isProduction && config.SVC_BASE_URL === undefined) {
    logger.warn(`SVC_BASE_URL is unset: the OAuth issuer and every absolute URL are ${config.baseUrl}, and sign-in cookies are not Secure; set it to the service's public https URL`);
  }
  try {
    // Before anything opens a secret: a wrong key is refused here, in one line (crypto/sealed-columns.ts).
    await checkEncryptionKey(app.get(SecretBox), app.get(DataSource), config);
  } catch (err) {
    await app.close();
    throw err;
  }
  app.enableShutdownHooks();
  // The pipeline before Nest's guards (ARCHITECTURE): request id and log line, credentials,
  // rate limit. Unknown routes and unparsable bodies pass through these too.
  const http = app.getHttpAdapter().getInstance();
  // First, so that every answer carries them, the provider's (handed over below) included.
  http.addHook('onRequest', securityHeaders);
  const logRequest = requestLogging(logger);
  http.addHook('onRequest', logRequest);
  http.addHook('onRequest', corsHeaders(config.corsOrigins));
  http.addHook('onRequest', dropBodyOfGet);
  const credentials = app.get(CredentialHook);
  const rateLimit = app.get(RateLimitHook);
  http.addHook('onRequest', credentials.onRequest);
  http.addHook('onRequest', rateLimit.onRequest);
  http.addHook('onRoute', rateLimit.onRoute);
  // After the rate limit, so that these refusals carry the X-RateLimit-* headers too.
  http.addHook('onRequest', answerCredentialError);
  http.addHook('onRequest', refuseWhileClosing(http));
  http.addHook('onRequest', requireHost);
  http.addHook('onRequest', refuseTransferCodings);
  http.addHook('onRequest', requireValidQuery);
  http.addHook('onRequest', answerPreflight);
  http.addHook('onRequest', app.get(OidcMount).onRequest);
  // The caller's tenant, for its share of the database pool (database/tenant-shared-pool.ts).
  http.addHook('preHandler', enterTenantContext);
  preRouting.push(
    async (_request, reply) => setSecurityHeaders(reply),
    (request, reply) => new Promise<void>((resolve) => logRequest.call(http, request, reply, () => resolve())),
    async (request, reply) => setCorsHeaders(config.corsOrigins, request, reply),
    (request, reply) => new Promise<void>((resolve) => credentials.onRequest(request, reply, () => resolve())),
    rateLimit.onRequest,
  );
  registerBodyParsers(http, sizeBytes(config.JSON_BODY_LIMIT)!);
  // JSON.stringify's bytes, a large page built as a Buffer (json-reply.ts). Fastify sends a
  // Buffer as it is; its typings only name a string.
  http.setReplySerializer((payload) => serializeJson(payload) as string);
  app.useGlobalPipes(createValidationPipe());
  // After AuthModule's guards (bearer, permission, input), which Nest registered as it created the app.
  app.useGlobalGuards(new BodylessRouteGuard());
  if (config.RESPONSE_COMPRESSION) await registerCompression(app);
  mountOpenApi(app, config);
  bare.of = async (address, method) => ({ ...EVERY_RESPONSE, ...(await rateLimit.unparsed(address, method)) });
  refuseUnsupported(app.getHttpServer(), logger, bare);
  answerHalfClosed(app.getHttpServer());
  continueOnRead(app.getHttpServer());
  await app.init();
  return app;
}
