/**
 * Builds a ready (not yet listening) application from a config: checks that PostgreSQL and
 * Redis answer, creates the database when missing, and wires body parsing, validation, logs
 * and the API reference. main.ts and the e2e tests both start the service through here.
 */
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import Redis from 'ioredis';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { redactUrl, StartupError } from './common/startup-error';
import { createValidationPipe } from './common/validation';
import { AppConfig } from './config/app-config';
import { ensureDatabase } from './database/data-source-options';
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

export async function createApp(config: AppConfig): Promise<NestExpressApplication> {
  await ensureDatabase(config.DATABASE_URL);
  await checkRedis(config.REDIS_URL);
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config), {
    bodyParser: false,
    bufferLogs: true,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  app.enableShutdownHooks();
  app.set('trust proxy', config.trustProxy);
  app.disable('x-powered-by');
  app.useBodyParser('json', { limit: config.JSON_BODY_LIMIT, type: ['application/json', 'application/*+json'] });
  app.useBodyParser('urlencoded', { limit: config.JSON_BODY_LIMIT, extended: false });
  app.useGlobalPipes(createValidationPipe());
  mountOpenApi(app, config);
  await app.init();
  return app;
}
