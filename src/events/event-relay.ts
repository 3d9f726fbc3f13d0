/**
 * The relay: moves committed events out of the outbox. Each batch, in one transaction, takes
 * undispatched events (FOR UPDATE SKIP LOCKED, so instances share the work), has the webhook
 * fan-out insert their deliveries, and marks them dispatched; after the commit it publishes
 * them to every instance's event streams (Redis pub/sub) and starts the first delivery
 * attempts. A crash before that commit leaves the events undispatched for the next pass; a
 * crash after it leaves deliveries due in the table for the sweeper. So every event reaches
 * every subscriber at least once.
 *
 * It runs when a transaction that recorded events commits on this instance, and every
 * POLL_MS regardless (events committed by an instance that died before relaying them).
 */
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { WebhookDispatcher } from '../webhooks/webhook-dispatcher';
import { WebhookFanout } from '../webhooks/webhook-fanout';
import { EVENT_COLUMNS, StoredEvent } from './event-catalogue';
import { EventStream } from './event-stream';
import { Outbox } from './outbox';

const BATCH = 200;
const POLL_MS = 1000;

@Injectable()
export class EventRelay implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Events');
  private timer?: NodeJS.Timeout;
  private draining?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(
    private readonly db: BookkeepingDb,
    private readonly outbox: Outbox,
    private readonly fanout: WebhookFanout,
    private readonly dispatcher: WebhookDispatcher,
    private readonly stream: EventStream,
  ) {}

  onApplicationBootstrap(): void {
    this.outbox.onCommit(() => this.wake());
    this.timer = setInterval(() => this.wake(), POLL_MS);
    this.timer.unref();
    this.wake();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.draining;
  }

  wake(): void {
    if (this.stopped) return;
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = this.drain()
      .catch((err: unknown) => {
        if (!this.stopped) this.logger.warn({ err }, 'event relay pass failed; retrying on the next poll');
      })
      .finally(() => {
        this.draining = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async drain(): Promise<void> {
    for (;;) {
      this.again = false;
      const { events, deliveries } = await this.db.transaction(async (sql) => {
        const batch = await sql<StoredEvent>(
          `SELECT ${EVENT_COLUMNS} FROM events WHERE dispatched_at IS NULL ORDER BY seq LIMIT ${BATCH} FOR UPDATE SKIP LOCKED`,
        );
        if (!batch.length) return { events: batch, deliveries: [] };
        const planned = await this.fanout.plan(sql, batch, this.dispatcher.leaseMs);
        await sql(`UPDATE events SET dispatched_at = now() WHERE (tenant_id, id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[]))`, [
          batch.map((e) => e.tenant_id),
          batch.map((e) => e.id),
        ]);
        return { events: batch, deliveries: planned };
      });
      if (!events.length) return;
      this.dispatcher.deliver(deliveries);
      await this.stream.publish(events);
      if (events.length < BATCH && !this.again) return;
    }
  }
}
