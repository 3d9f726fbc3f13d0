/**
 * Retention: events older than EVENT_RETENTION_DAYS leave the outbox (they can no longer be
 * replayed; a Last-Event-ID naming one gets `stream.reset`), and so do deliveries of that age:
 * finished ones, and pending ones not attempted within it (a disabled webhook's, or retries
 * scheduled past it), unless an attempt of one is under way. Undispatched events, and events
 * with a pending delivery (whose attempts render their bodies), are not deleted. Every instance
 * sweeps; the batched deletes are harmless when they overlap.
 */
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { PeriodicTask } from '../common/periodic-task';
import { AppConfig } from '../config/app-config';

const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
const BATCH = 5000;

@Injectable()
export class EventsJanitor extends PeriodicTask {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
  ) {
    super(new Logger('Events'), 'expired events could not be deleted');
  }

  protected intervalMs(): number {
    return SWEEP_INTERVAL_MS;
  }

  /** Returns how many events and deliveries it deleted. */
  protected async pass(): Promise<number> {
    let total = 0;
    for (const sql of [
      // First, so that their events go in the same pass. Found through the partial indexes on pending rows.
      `DELETE FROM webhook_deliveries WHERE ctid IN (
         SELECT ctid FROM webhook_deliveries WHERE status = 'pending' AND created_at < now() - make_interval(days => $1)
            AND (lease_until IS NULL OR lease_until < now()) LIMIT ${BATCH})`,
      `DELETE FROM events WHERE ctid IN (
         SELECT ctid FROM events e WHERE created_at < now() - make_interval(days => $1) AND dispatched_at IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.tenant_id = e.tenant_id AND d.event_id = e.id AND d.status = 'pending')
          LIMIT ${BATCH})`,
      `DELETE FROM webhook_deliveries WHERE ctid IN (SELECT ctid FROM webhook_deliveries WHERE created_at < now() - make_interval(days => $1) AND status <> 'pending' LIMIT ${BATCH})`,
    ]) {
      total += await this.inBatches(BATCH, async () => (await this.db.query(sql, [this.config.EVENT_RETENTION_DAYS]))[1]);
    }
    return total;
  }
}
