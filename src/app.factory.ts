/**
 * Builds a ready (not yet listening) application from a config: checks that PostgreSQL and
 * Redis answer, creates the database when missing, and wires body parsing, validation, logs
 * and the API reference. main.ts and the e2e tests both start the service through here.
 */
import { NestFactory } from '@nestjs/core';
import type { NextFunction, Request, Response } from 'express';
import type { IncomingMessage } from 'node:http';
import type { NestExpressApplication } from '@nestjs/platform-express';
import Redis from 'ioredis';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import type { BodyErrorCarrier } from './auth/guards';
import { createLogger, requestLogging } from './common/request-logging';
import { redactUrl, StartupError } from './common/startup-error';
import { createValidationPipe } from './common/validation';
import { AppConfig } from './config/app-config';
import { ensureDatabase, runMigrations } from './database/data-source-options';
import { mountOpenApi } from './openapi/openapi';

async function checkRedis(url: string): Promise<void> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 3000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.ping();
  } catch (err) {
    throw new StartupError(
      `cannot reach Redis at ${redactUrl(url)} (${(err as Error).message}); start it (redis-server --daemonize yes) or set REDIS_URL`,
    );
  } finally {
    client.disconnect();
  }
}

/**
 * A body the parsers refuse (malformed JSON, too large, bad charset) is not answered here but
 * kept on the request and thrown by ContentTypeGuard: the response then goes through request
 * logging, credentials and rate limiting like any other (X-Request-Id, X-RateLimit-*) and
 * the request counts against its caller's limit.
 */
function deferBodyErrors(err: unknown, req: Request & BodyErrorCarrier, _res: Response, next: NextFunction): void {
  const type = (err as { type?: unknown } | undefined)?.type;
  const status = Number((err as { status?: unknown } | undefined)?.status);
  if (typeof type === 'string' && status >= 400 && status < 500) {
    req.bodyError = err;
    return next();
  }
  next(err);
}

/** Routes that read their request body as a raw stream: `/blobs` (any case, as Express routes it). */
const RAW_BODY_PATH = /^\/blobs(?:[/?]|$)/i;

/**
 * A body parser's `type` test: the usual media types, except on raw-body routes, where a
 * parser would consume (and buffer) the upload before the controller could stream it, e.g.
 * a blob uploaded as application/json.
 */
function parsedUnlessRaw(types: string[]): (req: IncomingMessage) => boolean {
  return (req) => !RAW_BODY_PATH.test(req.url ?? '') && Boolean((req as Request).is(types));
}

export async function createApp(config: AppConfig): Promise<NestExpressApplication> {
  await ensureDatabase(config.DATABASE_URL);
  await checkRedis(config.REDIS_URL);
  if (config.MIGRATIONS_RUN) await runMigrations(config);
  const logger = createLogger(config);
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config, logger), {
    bodyParser: false,
    bufferLogs: true,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  app.enableShutdownHooks();
  app.set('trust proxy', config.trustProxy);
  app.disable('x-powered-by');
  // Express would hash every response body (SHA-1) into a weak ETag: per-caller JSON that no
  // client revalidates (the API defines no conditional requests) and ~3% of a search's CPU.
  app.set('etag', false);
  app.use(requestLogging(logger));
  app.useBodyParser('json', { limit: config.JSON_BODY_LIMIT, type: parsedUnlessRaw(['application/json', 'application/*+json']) });
  app.useBodyParser('urlencoded', { limit: config.JSON_BODY_LIMIT, extended: false, type: parsedUnlessRaw(['application/x-www-form-urlencoded']) });
  app.use(deferBodyErrors);
  app.useGlobalPipes(createValidationPipe());
  mountOpenApi(app, config);
  await app.init();
  return app;
}
