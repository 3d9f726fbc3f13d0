/**
 * Events: the relay that moves committed outbox events (outbox.ts, in OutboxModule) to webhook
 * deliveries and to the server-sent event stream `GET /events` on every instance (its cap on open
 * streams: stream-slots.ts), the same events as JSON pages for polling (`GET /events/history`), and the retention janitor. The event names and who may receive what are in event-catalogue.ts.
 */
import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { TypesModule } from '../types/types.module';
import { WebhooksModule } from '../webhooks/webhooks.module';
import { EventHistory } from './event-history';
import { EventRelay } from './event-relay';
import { EventStream } from './event-stream';
import { EventsJanitor } from './events-janitor';
import { EventsController } from './events.controller';
import { StreamSlots } from './stream-slots';

@Module({
  imports: [WebhooksModule, AuthModule, TypesModule],
  controllers: [EventsController],
  providers: [EventHistory, EventRelay, EventStream, EventsJanitor, StreamSlots],
})
export class EventsModule {}
