/**
 * Owns the Redis connections: one for commands (rate limits, queues, caches) and one for
 * pub/sub subscriptions, which Redis requires to be separate. Keys and channels are prefixed
 * with REDIS_PREFIX so several deployments (or test runs) can share one server.
 */
import { Global, Inject, Injectable, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { AppConfig } from '../config/app-config';
import { withinTimeout } from '../common/timeout';

export const REDIS = Symbol('REDIS');

/**
 * How long a request waits for Redis where the request can go on without it (a rate-limit
 * count, a cache generation, a throttle, a notice to other instances): one that stops answering
 * costs each such request this much at most.
 */
export const REDIS_WAIT_MS = 500;

/** After such a wait went unanswered, how long those requests go on without asking Redis at all. */
export const REDIS_QUIET_MS = 5000;

/**
 * Asks Redis where the caller can go on without an answer: not at all while the client is not
 * connected (rather than waiting out its retries), at most REDIS_WAIT_MS while it is silent,
 * and then not again for REDIS_QUIET_MS, so the requests of an outage neither wait on it one
 * after another nor pile up commands it would run late once it answers again.
 */
export class OptionalRedis {
  private quietUntil = 0;

  constructor(
    private readonly redis: Redis,
    /** Monotonic milliseconds. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Whether `ask` would ask now. */
  get asking(): boolean {
    return this.redis.status === 'ready' && this.now() >= this.quietUntil;
  }

  /** The command's answer, or undefined when Redis is not asked, fails or does not answer in time. */
  async ask<T>(command: (redis: Redis) => Promise<T>): Promise<T | undefined> {
    if (!this.asking) return undefined;
    const answer = await withinTimeout(command(this.redis), REDIS_WAIT_MS);
    if (answer === undefined) this.quietUntil = this.now() + REDIS_QUIET_MS;
    return answer;
  }
}

/**
 * Calls `back` each time `client` is ready again after its connection closed (ioredis
 * reconnects by itself): what was sent or changed meanwhile may have been missed.
 */
export function onReconnect(client: Redis, back: () => void): void {
  let lost = false;
  client.on('close', () => (lost = true));
  client.on('ready', () => {
    if (!lost) return;
    lost = false;
    back();
  });
}

@Injectable()
export class RedisPubSub implements OnApplicationShutdown {
  private readonly logger = new Logger('Redis');
  private subscriber?: Redis;
  private closing = false;
  private readonly handlers = new Map<string, Array<(message: string) => void>>();
  private readonly resubscribed: Array<() => void> = [];
  private readonly lost: Array<() => void> = [];

  constructor(
    private readonly config: AppConfig,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  channel(name: string): string {
    return `${this.config.REDIS_PREFIX}${name}`;
  }

  /**
   * Fails at once while Redis is away, rather than waiting in the client's offline queue: a
   * message sent after the reconnection would reach subscribers late and out of order, and
   * what listens here has its own catch-up (Last-Event-ID replay, the relays' poll).
   */
  async publish(name: string, message: string): Promise<void> {
    if (this.redis.status !== 'ready') throw new Error(`Redis is not connected (${this.redis.status})`);
    await this.redis.publish(this.channel(name), message);
  }

  async subscribe(name: string, handler: (message: string) => void): Promise<void> {
    const channel = this.channel(name);
    if (!this.subscriber) {
      this.subscriber = this.redis.duplicate();
      this.subscriber.on('message', (ch: string, msg: string) => this.handlers.get(ch)?.forEach((h) => h(msg)));
      // The client reconnects and subscribes again by itself. Redis also drops a subscriber on
      // its own while staying up, when messages pile up unread past its output buffer limit.
      let lost = false;
      this.subscriber.on('close', () => {
        if (lost || this.closing) return;
        this.logger.warn('Redis subscription lost; subscribing again');
        lost = true;
        this.lost.forEach((listener) => listener());
      });
      this.subscriber.on('error', () => undefined);
      const subscriber = this.subscriber;
      onReconnect(subscriber, () => {
        lost = false;
        // ioredis says 'ready' once it has sent its SUBSCRIBE again, not once Redis has answered
        // it: a catch-up run at once could read its record before a message that then went
        // unheard. The same SUBSCRIBE sent here is answered after ioredis's. Should it fail, the
        // listeners catch up anyway: early is better than never.
        const catchUp = () => {
          this.logger.log('Redis subscription back; catching up');
          this.resubscribed.forEach((listener) => listener());
        };
        subscriber.subscribe(...this.handlers.keys()).then(catchUp, (err: unknown) => {
          this.logger.warn({ err }, 'Redis subscription not confirmed');
          catchUp();
        });
      });
    }
    const list = this.handlers.get(channel) ?? [];
    list.push(handler);
    this.handlers.set(channel, list);
    if (list.length === 1) await this.subscriber.subscribe(channel);
  }

  /**
   * `listener` runs each time the subscriptions are back after their connection was lost:
   * whatever was published meanwhile never arrives, so a listener with its own record of what
   * was sent catches up from it.
   */
  onResubscribed(listener: () => void): void {
    this.resubscribed.push(listener);
  }

  /** `listener` runs each time the subscriptions' connection is lost: until they are back, messages published go unheard here. */
  onLost(listener: () => void): void {
    this.lost.push(listener);
  }

  async onApplicationShutdown(): Promise<void> {
    this.closing = true;
    this.subscriber?.disconnect();
  }
}

@Global()
@Module({
  providers: [
    {
      provide: REDIS,
      inject: [AppConfig],
      useFactory: (config: AppConfig) => {
        const redis = new Redis(config.REDIS_URL, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
        // The client reconnects by itself: one line when the connection goes and one when it is
        // back, rather than ioredis's own line on stderr at every failed attempt.
        const logger = new Logger('Redis');
        let down = false;
        redis.on('error', (err: Error) => {
          if (!down) logger.warn({ err }, 'Redis connection lost; reconnecting');
          down = true;
        });
        onReconnect(redis, () => {
          if (down) logger.log('Redis connection back');
          down = false;
        });
        return redis;
      },
    },
    RedisPubSub,
  ],
  exports: [REDIS, RedisPubSub],
})
export class RedisModule implements OnApplicationShutdown {
  constructor(@Inject(REDIS) private readonly redis: Redis) {}

  onApplicationShutdown(): void {
    this.redis.disconnect();
  }
}
