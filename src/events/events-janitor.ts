/**
 * Retention: events older than EVENT_RETENTION_DAYS leave the outbox (they can no longer be
 * replayed; a Last-Event-ID naming one gets `stream.reset`), and so do finished deliveries of
 * that age. Undispatched events and pending deliveries are never deleted. Every instance
 * sweeps; the batched deletes are harmless when they overlap.
 */
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';

const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
const BATCH = 5000;

@Injectable()
export class EventsJanitor implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Events');
  private timer?: NodeJS.Timeout;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.timer);
  }

  async sweep(): Promise<void> {
    const days = this.config.EVENT_RETENTION_DAYS;
    try {
      for (const sql of [
        `DELETE FROM events WHERE ctid IN (SELECT ctid FROM events WHERE created_at < now() - make_interval(days => $1) AND dispatched_at IS NOT NULL LIMIT ${BATCH})`,
        `DELETE FROM webhook_deliveries WHERE ctid IN (SELECT ctid FROM webhook_deliveries WHERE created_at < now() - make_interval(days => $1) AND status <> 'pending' LIMIT ${BATCH})`,
      ]) {
        for (let n = BATCH; n === BATCH; ) [, n] = await this.db.query(sql, [days]);
      }
    } catch (err) {
      this.logger.warn({ err }, 'expired events could not be deleted');
    }
  }
}
