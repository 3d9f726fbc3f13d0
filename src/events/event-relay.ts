/**
 * The relay: moves committed events out of the outbox. Each pass claims undispatched events
 * with a lease (one statement, FOR UPDATE SKIP LOCKED), publishes them to every instance's event
 * streams (Redis pub/sub) and hands the deliveries the webhook fan-out plans to the dispatcher
 * for their first attempts. The dispatcher records each delivery with the outcome of its first
 * attempt and marks the event dispatched once all of its deliveries are recorded
 * (delivery-records.ts). A relay that dies before that lets the lease lapse: another pass takes
 * the event up again and plans only the deliveries not yet recorded. So every event reaches
 * every subscriber at least once.
 *
 * Publication order: the claim numbers each event it takes (`published_seq`, from a sequence),
 * and the claim and the publication on Redis run under one advisory lock across instances, so a
 * batch is published only after every batch numbered before it. Streams therefore see events
 * live in `published_seq` order, which is the order a Last-Event-ID replay follows
 * (event-stream.ts). The claim commits before the batch is published, so a stream that gets an
 * event live finds it in the outbox when it resumes. An event taken up again is numbered and
 * published again, at its new place; its first place stays (`first_published_seq`), which is
 * where a stream resuming after it resumes from, and goes with the new publication, so that
 * streams served past it leave the copy out. The fan-out plans a batch while it is being published,
 * under the lock; the attempts and their records run outside it, so instances still share them.
 *
 * It runs when a transaction that recorded events commits on this instance, when an instance
 * that does not deliver (EVENT_DELIVERY_ENABLED=false) announces such a commit on the Redis
 * channel `<prefix>events:wake`, and every POLL_MS regardless (events committed by an
 * instance that died before relaying them, or whose announcement was lost).
 */
import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { OutageLog } from '../common/outage-log';
import { orTimeout } from '../common/timeout';
import { isDependencyUnavailable } from '../common/unavailable';
import { AppConfig } from '../config/app-config';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { RedisPubSub } from '../redis/redis.module';
import { WebhookDispatcher } from '../webhooks/webhook-dispatcher';
import { WebhookFanout } from '../webhooks/webhook-fanout';
import { EVENT_COLUMNS } from './event-catalogue';
import { compareSeq, EventStream } from './event-stream';
import type { PublishedEvent } from './published-events';
import { Outbox } from './outbox';

const BATCH = 200;
const POLL_MS = 1000;
const WAKE_CHANNEL = 'events:wake';
/** pg_advisory_xact_lock id: one relay at a time numbers and publishes a batch. */
const PUBLISH_LOCK = 727_004;
/** How long a batch's publication may hold that lock. */
const PUBLISH_WAIT_MS = 2000;

type Claimed = PublishedEvent & { reclaimed: boolean };

@Injectable()
export class EventRelay implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Events');
  /** While Redis or PostgreSQL is away every pass and announcement fails alike: one line, then a summary a minute (outage-log.ts). */
  private readonly passFailures = new OutageLog(this.logger, 'event relay pass failed; retrying on the next poll');
  private readonly announceFailures = new OutageLog(this.logger, 'could not announce committed events; the relays poll');
  private timer?: NodeJS.Timeout;
  private draining?: Promise<void>;
  private again = false;
  private stopped = false;
  /** An announcement in flight, and whether another commit came meanwhile. */
  private announcing?: Promise<void>;
  private announceAgain = false;
  /** The last publication number of batches this relay could not publish, until it tells the streams (`EventStream.publishThrough`). */
  private unpublishedThrough?: string;

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
      .then(
        () => this.announceFailures.succeeded(),
        (err: unknown) => (isDependencyUnavailable(err) ? this.announceFailures.failed(err) : this.logger.warn({ err }, 'could not announce committed events; the relays poll')),
      )
      .finally(() => {
        this.announcing = undefined;
        if (this.announceAgain) {
          this.announceAgain = false;
          this.announce();
        }
      });
  }

  /** Before the pools close: a pass under way finishes; events committed from here on are left to the other instances' relays. */
  async beforeApplicationShutdown(): Promise<void> {
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
      .then(
        (published) => {
          if (published) this.passFailures.succeeded();
        },
        (err: unknown) => {
          if (this.stopped) return;
          if (isDependencyUnavailable(err)) this.passFailures.failed(err);
          else this.logger.warn({ err }, 'event relay pass failed; retrying on the next poll');
        },
      )
      .finally(() => {
        this.draining = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** Whether it published anything (a batch, or the notice of unpublished ones): a pass with nothing to publish says nothing of Redis. */
  private async drain(): Promise<boolean> {
    let published = false;
    // Not past shutdown: events claimed then would wait out their lease before another
    // instance could take them, and a long backlog would hold the shutdown up.
    while (!this.stopped) {
      this.again = false;
      const { claimed, through, unpublished } = await this.pass(this.dispatcher.leaseMs);
      if (unpublished) {
        if (this.unpublishedThrough === undefined || compareSeq(through!, this.unpublishedThrough) > 0) this.unpublishedThrough = through;
        throw unpublished;
      }
      // A batch published after the unpublished ones tells the streams of them (its numbers do not follow).
      if (claimed) {
        this.unpublishedThrough = undefined;
        published = true;
      } else if (this.unpublishedThrough !== undefined) {
        published = (await this.tellUnpublished(this.unpublishedThrough)) || published;
      }
      if (claimed < BATCH && !this.again) return published;
    }
    return published;
  }

  /** Tried again at each poll until Redis takes it: quietly, as the failed publication was already logged. Whether Redis took it. */
  private async tellUnpublished(through: string): Promise<boolean> {
    try {
      await orTimeout(this.stream.publishThrough(through), PUBLISH_WAIT_MS, 'publishing events on Redis');
      if (this.unpublishedThrough === through) this.unpublishedThrough = undefined;
      return true;
    } catch {
      return false; // Redis still away
    }
  }

  /**
   * One batch: claims it, numbering it, and publishes it on Redis, holding the publish lock
   * until the publication is done; meanwhile the fan-out plans its deliveries and their first
   * attempts start. The lock lives in a transaction of its own connection so that the claim
   * commits before the batch is published: a stream that receives an event live and resumes
   * from it must find its number in the outbox. A batch that could not be published is
   * answered with the error: its numbers stand, so resuming streams replay it, open streams
   * catch up on it once they hear the next batch (EventStream.noticeGap) or, should none come,
   * this relay's notice once Redis takes messages again (`tellUnpublished`), and webhooks, which
   * do not depend on Redis, still get it.
   */
  private pass(leaseMs: number): Promise<{ claimed: number; through?: string; unpublished?: unknown }> {
    return this.db.underLock(PUBLISH_LOCK, async () => {
      // The numbers follow `seq` within the batch: nextval runs over the rows in claim order.
      const claimed = await this.db.query<Claimed>(
        `WITH next AS (
           SELECT t_id, e_id, reclaimed, nextval('events_published_seq') AS p FROM (
             SELECT tenant_id AS t_id, id AS e_id, relay_lease_until IS NOT NULL AS reclaimed FROM events
              WHERE dispatched_at IS NULL AND (relay_lease_until IS NULL OR relay_lease_until < now())
              ORDER BY seq LIMIT ${BATCH} FOR UPDATE SKIP LOCKED) claimable)
         UPDATE events SET relay_lease_until = now() + make_interval(secs => $1::float8 / 1000), published_seq = next.p,
                           first_published_seq = coalesce(first_published_seq, next.p)
           FROM next WHERE tenant_id = next.t_id AND id = next.e_id
         RETURNING ${EVENT_COLUMNS}, published_seq::text AS published_seq, nullif(first_published_seq, next.p)::text AS first_published_seq, next.reclaimed`,
        [leaseMs],
      );
      if (!claimed.length) return { claimed: 0 };
      const events = claimed.sort((a, b) => compareSeq(a.published_seq, b.published_seq));
      // Bounded: every instance's relay waits on this lock while Redis is away.
      const publishing = orTimeout(this.stream.publish(events.map(asPublished)), PUBLISH_WAIT_MS, 'publishing events on Redis')
        .then(() => undefined, (err: unknown) => err);
      let unpublished: unknown;
      try {
        this.dispatcher.deliverFirst(events, await this.fanout.plan(events, leaseMs));
      } finally {
        unpublished = await publishing; // the lock is held until the publication is done either way
      }
      return { claimed: events.length, through: events[events.length - 1].published_seq, unpublished };
    });
  }
}

/** A claimed event as streams get it: its first place only when this is a later publication. */
function asPublished({ reclaimed, first_published_seq, ...event }: Claimed): PublishedEvent { // eslint-disable-line @typescript-eslint/no-unused-vars
  return first_published_seq ? { ...event, first_published_seq } : event;
}
