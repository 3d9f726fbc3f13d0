/**
 * Bull on the service's Redis, every key under REDIS_PREFIX (`<prefix>bull:<queue>:…`), so
 * deployments and test runs sharing a server stay apart. Queues are registered here from the
 * catalogue (job-catalogue.ts); processors live with the module that owns the work. Watches
 * that no other deployment shares the prefix (prefix-owner.ts), and closes the queues within a
 * deadline (queue-closer.ts).
 */
import { BullModule } from '@nestjs/bull';
import { Global, Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { QUEUES } from './job-catalogue';
import { PrefixOwner } from './prefix-owner';
import { QueueCloser } from './queue-closer';

const queues = [
  BullModule.registerQueue({ name: QUEUES.webhooks }),
  // A bulk job holds its Bull job for its whole run: Bull's lock on it follows the job's
  // lease (BULK_JOB_LEASE), so the job of a worker that died is handed on about as soon as
  // its lease lapses. The bulk_jobs row, not Bull's stall count, decides when a job is done.
  BullModule.registerQueueAsync({
    name: QUEUES.bulk,
    inject: [AppConfig],
    useFactory: (config: AppConfig) => ({
      settings: { lockDuration: config.bulkJobLeaseMs, stalledInterval: config.bulkJobLeaseMs, maxStalledCount: 1_000_000 },
    }),
  }),
];

@Global()
@Module({
  imports: [
    BullModule.forRootAsync({
      inject: [AppConfig],
      // Bull makes (and on shutdown closes) its own connections from the URL; enqueueing code
      // bounds its waits itself (webhook-dispatcher.ts), since Bull's command connection
      // queues commands while Redis is away. Bull reads the URL's host, port, database and
      // credentials but not its scheme: a rediss:// URL is TLS here as ioredis makes it for the
      // service's other connections (without it, Bull spoke plain text to a TLS port, and bulk
      // jobs stayed queued while /health said Redis was up).
      useFactory: (config: AppConfig) => ({
        url: config.REDIS_URL,
        prefix: `${config.REDIS_PREFIX}bull`,
        ...(/^rediss:/i.test(config.REDIS_URL) && { redis: { tls: {} } }),
      }),
    }),
    ...queues,
  ],
  providers: [PrefixOwner, QueueCloser],
  exports: queues,
})
export class JobsModule {}
