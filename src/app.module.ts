/** The root module: configuration, infrastructure, the exception filter and the domain modules. */
import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { LoggerModule } from 'nestjs-pino';
import type { Logger } from 'pino';
import { AuthModule } from './auth/auth.module';
import { EnvelopeExceptionFilter } from './common/exception.filter';
import { loggerParams } from './common/request-logging';
import { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { dataSourceOptions } from './database/data-source-options';
import { HealthController } from './health/health.controller';
import { IdempotencyModule } from './idempotency/idempotency.module';
import { KeysModule } from './keys/keys.module';
import { OpenApiModule } from './openapi/openapi.module';
import { RateLimitModule } from './rate-limit/rate-limit.module';
import { RedisModule } from './redis/redis.module';
import { TenantsModule } from './tenants/tenants.module';
import { ItemsModule } from './items/items.module';
import { TypesModule } from './types/types.module';
import { EdgesModule } from './edges/edges.module';
import { BlobsModule } from './blobs/blobs.module';
import { SearchModule } from './search/search.module';
import { CryptoModule } from './crypto/crypto.module';
import { JobsModule } from './jobs/jobs.module';
import { OutboxModule } from './events/outbox.module';
import { EventsModule } from './events/events.module';
import { WebhooksModule } from './webhooks/webhooks.module';
import { BulkModule } from './bulk/bulk.module';
import { UsersModule } from './users/users.module';
import { OidcModule } from './oidc/oidc.module';
import { IntegrationsModule } from './integrations/integrations.module';

@Module({})
export class AppModule {
  static forRoot(config: AppConfig, logger: Logger): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        LoggerModule.forRoot(loggerParams(logger)),
        TypeOrmModule.forRoot(dataSourceOptions(config)),
        RedisModule,
        CryptoModule,
        JobsModule,
        OutboxModule,
        AuthModule,
        RateLimitModule,
        OpenApiModule,
        KeysModule,
        TenantsModule,
        UsersModule,
        OidcModule,
        IntegrationsModule,
        IdempotencyModule,
        TypesModule,
        BulkModule,
        ItemsModule,
        EdgesModule,
        BlobsModule,
        SearchModule,
        WebhooksModule,
        EventsModule,
      ],
      controllers: [HealthController],
      providers: [{ provide: APP_FILTER, useClass: EnvelopeExceptionFilter }],
    };
  }
}
