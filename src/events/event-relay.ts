/**
 * The relay: moves committed events out of the outbox. Each pass claims undispatched events
 * with a lease (one statement, FOR UPDATE SKIP LOCKED, so instances share the work), publishes
 * them to every instance's event streams (Redis pub/sub) and hands the deliveries the webhook
 * fan-out plans to the dispatcher for their first attempts. The dispatcher records each
 * delivery with the outcome of its first attempt and marks the event dispatched once all of
 * its deliveries are recorded (delivery-records.ts). A relay that dies before that lets the
 * lease lapse: another pass takes the event up again and plans only the deliveries not yet
 * recorded. So every event reaches every subscriber at least once.
 *
 * It runs when a transaction that recorded events commits on this instance, when an instance
 * that does not deliver (EVENT_DELIVERY_ENABLED=false) announces such a commit on the Redis
 * channel `<prefix>events:wake`, and every POLL_MS regardless (events committed by an
 * instance that died before relaying them, or whose announcement was lost).
 */
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { RedisPubSub } from '../redis/redis.module';
import { WebhookDispatcher } from '../webhooks/webhook-dispatcher';
import { WebhookFanout } from '../webhooks/webhook-fanout';
import { EVENT_COLUMNS, StoredEvent } from './event-catalogue';
import { EventStream } from './event-stream';
import { Outbox } from './outbox';

const BATCH = 200;
const POLL_MS = 1000;
const WAKE_CHANNEL = 'events:wake';

@Injectable()
export class EventRelay implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Events');
  private timer?: NodeJS.Timeout;
  private draining?: Promise<void>;
  private again = false;
  private stopped = false;
  /** An announcement in flight, and whether another commit came meanwhile. */
  private announcing?: Promise<void>;
  private announceAgain = false;

  constructor(
    private readonly db: BookkeepingDb,
    private readonly outbox: Outbox,
    private readonly fanout: WebhookFanout,
    private readonly dispatcher: WebhookDispatcher,
    private readonly stream: EventStream,
    private readonly pubsub: RedisPubSub,
    private readonly config: AppConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (!this.config.EVENT_DELIVERY_ENABLED) {
      this.outbox.onCommit(() => this.announce());
      return;
    }
    this.outbox.onCommit(() => this.wake());
    this.timer = setInterval(() => this.wake(), POLL_MS);
    this.timer.unref();
    await this.pubsub.subscribe(WAKE_CHANNEL, () => this.wake());
    this.wake();
  }

  /** Tells the delivering instances that events were committed: one message at a time, coalesced. */
  private announce(): void {
    if (this.stopped) return;
    if (this.announcing) {
      this.announceAgain = true;
      return;
    }
    this.announcing = this.pubsub
      .publish(WAKE_CHANNEL, '')
      .catch((err: unknown) => this.logger.warn({ err }, 'could not announce committed events; the relays poll'))
      .finally(() => {
        this.announcing = undefined;
        if (this.announceAgain) {
          this.announceAgain = false;
          this.announce();
        }
      });
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await Promise.all([this.draining, this.announcing]);
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
    // Not past shutdown: events claimed then would wait out their lease before another
    // instance could take them, and a long backlog would hold the shutdown up.
    while (!this.stopped) {
      this.again = false;
      const leaseMs = this.dispatcher.leaseMs;
      const claimed = await this.db.query<StoredEvent & { reclaimed: boolean }>(
        `WITH next AS (
           SELECT tenant_id AS t_id, id AS e_id, relay_lease_until IS NOT NULL AS reclaimed FROM events
            WHERE dispatched_at IS NULL AND (relay_lease_until IS NULL OR relay_lease_until < now())
            ORDER BY seq LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
         UPDATE events SET relay_lease_until = now() + make_interval(secs => $1::float8 / 1000)
           FROM next WHERE tenant_id = next.t_id AND id = next.e_id
         RETURNING ${EVENT_COLUMNS}, next.reclaimed`,
        [leaseMs],
      );
      if (!claimed.length) return;
      const events = claimed.sort((a, b) => compareSeq(a.seq, b.seq));
      const deliveries = await this.fanout.plan(events, leaseMs);
      this.dispatcher.deliverFirst(events, deliveries);
      await this.stream.publish(events.map(({ reclaimed, ...event }) => event)); // eslint-disable-line @typescript-eslint/no-unused-vars
      if (claimed.length < BATCH && !this.again) return;
    }
  }
}

/** Outbox order: `seq` is a bigint, carried as text. */
function compareSeq(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}
