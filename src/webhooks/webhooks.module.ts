/**
 * Webhooks: registrations (`/webhooks`), fan-out of outbox events to per-webhook deliveries,
 * signed delivery with retries on Bull and a sweeper beneath it, and the delivery log (what
 * attempts leave in it: delivery-records.ts), each webhook's health read from that log
 * (webhook-health.ts), and the deliveries' description in /openapi.json (openapi-webhooks.ts). Exports the fan-out and the dispatcher, which the events relay hands
 * each batch of claimed events.
 */
import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module';
import { AuthModule } from '../auth/auth.module';
import { TypesModule } from '../types/types.module';
import { DeliveryRecords } from './delivery-records';
import { WebhookChanges } from './webhook-changes';
import { WebhookDispatcher } from './webhook-dispatcher';
import { WebhookFanout } from './webhook-fanout';
import { WebhookSweeper } from './webhook-sweeper';
import { WebhooksController } from './webhooks.controller';
import { WebhooksService } from './webhooks.service';

@Module({
  imports: [AuditModule, AuthModule, TypesModule],
  controllers: [WebhooksController],
  providers: [WebhooksService, DeliveryRecords, WebhookChanges, WebhookDispatcher, WebhookFanout, WebhookSweeper],
  exports: [WebhookFanout, WebhookDispatcher],
})
export class WebhooksModule {}
