/**
 * Bull on the service's Redis, every key under REDIS_PREFIX (`<prefix>bull:<queue>:…`), so
 * deployments and test runs sharing a server stay apart. Queues are registered here from the
 * catalogue (job-catalogue.ts); processors live with the module that owns the work.
 */
import { BullModule } from '@nestjs/bull';
import { Global, Module } from '@nestjs/common';
import Redis, { RedisOptions } from 'ioredis';
import { AppConfig } from '../config/app-config';
import { QUEUES } from './job-catalogue';

const queues = BullModule.registerQueue(...Object.values(QUEUES).map((name) => ({ name })));

@Global()
@Module({
  imports: [
    BullModule.forRootAsync({
      inject: [AppConfig],
      useFactory: (config: AppConfig) => ({
        prefix: `${config.REDIS_PREFIX}bull`,
        // Bull's blocking and subscriber connections must retry forever; its command
        // connection fails fast so a Redis outage cannot stall the code that enqueues.
        createClient: (type: string, options?: RedisOptions) =>
          new Redis(config.REDIS_URL, {
            ...options,
            ...(type === 'client' ? { maxRetriesPerRequest: 2 } : { maxRetriesPerRequest: null, enableReadyCheck: false }),
          }),
      }),
    }),
    queues,
  ],
  exports: [queues],
})
export class JobsModule {}
