/**
 * The safety net under Bull: every WEBHOOK_SWEEP_INTERVAL each instance looks in the table for
 * deliveries that are due (by at least one interval) and held by nobody, and attempts them.
 * That covers a retry job lost with Redis (flushed, failed over, down), a first attempt lost
 * with a crashed process, and attempts a saturated webhook could not queue in memory. Only on
 * instances that deliver (EVENT_DELIVERY_ENABLED).
 */
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { DeliveryRef, WebhookDispatcher } from './webhook-dispatcher';

const BATCH = 500;

@Injectable()
export class WebhookSweeper implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Webhooks');
  private timer?: NodeJS.Timeout;
  private running = false;

  constructor(
    private readonly db: BookkeepingDb,
    private readonly config: AppConfig,
    private readonly dispatcher: WebhookDispatcher,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.config.EVENT_DELIVERY_ENABLED) return;
    this.timer = setInterval(() => void this.sweep(), this.config.webhookSweepIntervalMs);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.timer);
  }

  async sweep(): Promise<number> {
    if (this.running) return 0;
    this.running = true;
    try {
      const due = await this.db.query<{ tenant_id: string; id: string; webhook_id: string }>(
        `SELECT d.tenant_id, d.id, d.webhook_id FROM webhook_deliveries d
           JOIN webhooks w ON w.tenant_id = d.tenant_id AND w.id = d.webhook_id AND NOT w.disabled
          WHERE d.status = 'pending' AND d.next_attempt_at <= now() - make_interval(secs => $1::float8 / 1000)
            AND (d.lease_until IS NULL OR d.lease_until < now())
          ORDER BY d.next_attempt_at LIMIT ${BATCH}`,
        [this.config.webhookSweepIntervalMs],
      );
      const refs: DeliveryRef[] = due.map((d) => ({ tenantId: d.tenant_id, deliveryId: d.id, webhookId: d.webhook_id }));
      for (const ref of refs) this.dispatcher.attemptSoon(ref);
      return refs.length;
    } catch (err) {
      this.logger.warn({ err }, 'webhook sweep failed');
      return 0;
    } finally {
      this.running = false;
    }
  }
}
