/**
 * Watches that REDIS_PREFIX belongs to this deployment alone. Queues, caches and channels live
 * under it; a second deployment (another database) given the same prefix has its workers take
 * this one's jobs, which they do not find in their database and drop, and the other way round:
 * bulk jobs stay `queued` with nothing said. Each instance marks the prefix with its database's
 * identity (cluster and database name) and renews the mark every minute; finding another
 * deployment's mark, it warns (at most every ten minutes). A warning, not a refusal: a deployment
 * moved to a new database finds its old mark once, until it lapses.
 */
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import Redis from 'ioredis';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { REDIS } from '../redis/redis.module';

const RENEW_MS = 60_000;
const MARK_TTL_S = 300;
const WARN_EVERY_MS = 10 * 60_000;

@Injectable()
export class PrefixOwner implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Redis');
  private timer?: NodeJS.Timeout;
  private warnedAt = -Infinity;

  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const [row] = await this.db.query(`SELECT system_identifier::text || '/' || current_database() AS identity FROM pg_control_system()`).catch(() => []);
    const identity: string | undefined = row?.identity;
    if (identity === undefined) return; // a server that does not tell who it is: nothing to compare
    const check = () => this.check(identity).catch(() => undefined); // Redis away: the next check
    await check();
    this.timer = setInterval(check, RENEW_MS);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.timer);
  }

  private async check(identity: string): Promise<void> {
    const key = `${this.config.REDIS_PREFIX}deployment`;
    const marked = await this.redis.set(key, identity, 'EX', MARK_TTL_S, 'NX');
    if (marked) return;
    const owner = await this.redis.get(key);
    if (owner === identity) return void (await this.redis.expire(key, MARK_TTL_S));
    if (owner === null || Date.now() < this.warnedAt + WARN_EVERY_MS) return;
    this.warnedAt = Date.now();
    this.logger.warn(
      { redisPrefix: this.config.REDIS_PREFIX, otherDatabase: owner.split('/').slice(1).join('/') },
      'REDIS_PREFIX is in use by another deployment (another database): each takes the other\'s bulk jobs and webhook retries and drops them; give each deployment its own REDIS_PREFIX',
    );
  }
}
