/**
 * Changes to webhooks (PATCH, DELETE), heard by every instance through Redis. A first attempt is
 * planned with the webhook's URL and secret as they were (webhook-fanout.ts) and may then wait in
 * its dispatcher's line for a while behind a slow receiver: one whose webhook changed meanwhile
 * is not sent as planned but goes through the delivery's row, which reads the webhook as it is
 * (webhook-dispatcher.ts, `attemptFromRow`). That costs nothing per attempt: each change heard
 * gets a number in this process; a plan notes the number before it reads the webhooks, and its
 * attempts count as planned before every change heard after it. While the subscription is lost
 * a change may go unheard, so every plan counts as changed until it is back, and every plan made
 * before then too.
 */
import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { RedisPubSub } from '../redis/redis.module';

const CHANNEL = 'webhooks:changed';
/** How long an announcement may hold up the change's answer while Redis is slow. */
const PUBLISH_WAIT_MS = 1000;
/**
 * How long a change is remembered: longer than any first attempt can wait (its lease, the
 * receiver's timeout and 30 s, after which it is not sent as planned anyway).
 */
const REMEMBER_BEYOND_TIMEOUT_MS = 5 * 60_000;

@Injectable()
export class WebhookChanges implements OnModuleInit {
  private readonly logger = new Logger('Webhooks');
  private counter = 0;
  /** Per webhook, the number of its last change heard and when; oldest first. */
  private readonly heardAt = new Map<string, { mark: number; at: number }>();
  /** Plans noted before this number count as changed whatever their webhook (a change may have gone unheard). */
  private lostBefore = 0;
  /** The subscription is lost: a change made on another instance now goes unheard. */
  private deaf = false;
  private onHeard: (webhookId: string) => void = () => undefined;

  constructor(
    private readonly pubsub: RedisPubSub,
    private readonly config: AppConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    this.pubsub.onLost(() => (this.deaf = true));
    this.pubsub.onResubscribed(() => {
      this.deaf = false;
      this.lostBefore = ++this.counter;
    });
    await this.pubsub.subscribe(CHANNEL, (webhookId) => this.heard(webhookId));
  }

  /** What a plan notes before it reads the webhooks. */
  mark(): number {
    return this.counter;
  }

  /**
   * Whether the webhook changed, as far as this instance has heard, since a plan noted `mark`;
   * for a plan that `waited` in line since (a claim that reads the row and attempts at once did
   * not), also whether it may have changed unheard: the subscription is lost.
   */
  changedSince(webhookId: string, mark: number, waited: boolean): boolean {
    return (waited && this.deaf) || mark < this.lostBefore || (this.heardAt.get(webhookId)?.mark ?? 0) > mark;
  }

  /**
   * `listener` is called with each change heard, here or from another instance, after it
   * committed: the sweeper's cue to send a re-enabled webhook's due deliveries now.
   */
  whenHeard(listener: (webhookId: string) => void): void {
    this.onHeard = listener;
  }

  /**
   * After a change commits, before it is answered: heard here at once, and by the other
   * instances as Redis passes it on. Should Redis not take it, the others' subscriptions are
   * likely lost too, and count every plan as changed once back.
   */
  async announce(webhookId: string): Promise<void> {
    this.heard(webhookId);
    const sent = await withinTimeout(this.pubsub.publish(CHANNEL, webhookId).then(() => true), PUBLISH_WAIT_MS);
    if (!sent) this.logger.warn({ webhookId }, 'webhook change not announced (Redis); other instances may send attempts already planned for it');
  }

  private heard(webhookId: string): void {
    const now = Date.now();
    this.heardAt.delete(webhookId); // re-inserted last: the map stays in the order changes were heard
    this.heardAt.set(webhookId, { mark: ++this.counter, at: now });
    const forgetBefore = now - this.config.WEBHOOK_TIMEOUT_MS - REMEMBER_BEYOND_TIMEOUT_MS;
    for (const [id, { at }] of this.heardAt) {
      if (at >= forgetBefore) break;
      this.heardAt.delete(id);
    }
    this.onHeard(webhookId);
  }
}
