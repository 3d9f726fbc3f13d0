/**
 * The safety net under Bull: every WEBHOOK_SWEEP_INTERVAL each instance looks in the table for
 * deliveries that are due (by at least one interval) and held by nobody, and attempts them.
 * That covers a retry job lost with Redis (flushed, failed over, down), a first attempt lost
 * with a crashed process, and attempts a saturated webhook could not queue in memory. Only on
 * instances that deliver (EVENT_DELIVERY_ENABLED).
 */
import { Injectable, Logger } from '@nestjs/common';
import { PeriodicTask } from '../common/periodic-task';
import { AppConfig } from '../config/app-config';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { DeliveryRef, WebhookDispatcher } from './webhook-dispatcher';

const BATCH = 500;

@Injectable()
export class WebhookSweeper extends PeriodicTask {
  constructor(
    private readonly db: BookkeepingDb,
    private readonly config: AppConfig,
    private readonly dispatcher: WebhookDispatcher,
  ) {
    super(new Logger('Webhooks'), 'webhook sweep failed');
  }

  protected intervalMs(): number | undefined {
    return this.config.EVENT_DELIVERY_ENABLED ? this.config.webhookSweepIntervalMs : undefined;
  }

  protected async pass(): Promise<number> {
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
  }
}
