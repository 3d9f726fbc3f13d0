/**
 * The safety net under Bull: every WEBHOOK_SWEEP_INTERVAL each instance looks in the table for
 * deliveries that are due (by at least one interval) and held by nobody, and attempts them.
 * That covers a retry job lost with Redis (flushed, failed over, down), a first attempt lost
 * with a crashed process, and attempts a saturated webhook could not queue in memory. Only on
 * instances that deliver (EVENT_DELIVERY_ENABLED).
 *
 * A pass takes at most BATCH deliveries, shared out in turns: each tenant's oldest due delivery
 * before any tenant's second, and within a tenant each webhook's before any webhook's second.
 * Taking the oldest BATCH instead, a dead receiver with more due deliveries than that filled
 * every pass with the same rows, and every other webhook's due deliveries, any tenant's, waited
 * until its backlog had been worked through. Left out of the pass, so that they take no turn:
 * deliveries queued or running in this process already (queuing one again does nothing, and,
 * unleased until their turn comes, they would be the oldest again at every pass), webhooks whose
 * line here is full (queuing is refused), and disabled webhooks (their deliveries wait, due,
 * to be enabled again).
 */
import { Injectable, Logger } from '@nestjs/common';
import { PeriodicTask } from '../common/periodic-task';
import { AppConfig } from '../config/app-config';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { DeliveryRef, WebhookDispatcher } from './webhook-dispatcher';

const BATCH = 500;

/**
 * One statement over every due delivery (the partial index of pending ones, by next_attempt_at):
 * with no index that leads with the webhook, finding each webhook's oldest means reading them
 * all, 34 ms for 55,000 due against 4 ms for the oldest 500 (docs/events.md, "Sweeper").
 * $1: the sweep interval (ms); $2: deliveries queued here; $3: webhooks whose line here is full.
 */
const DUE_IN_TURNS = `
  WITH due AS (
    SELECT d.tenant_id, d.id, d.webhook_id, d.next_attempt_at,
           row_number() OVER (PARTITION BY d.tenant_id, d.webhook_id ORDER BY d.next_attempt_at) AS in_webhook
      FROM webhook_deliveries d
      JOIN webhooks w ON w.tenant_id = d.tenant_id AND w.id = d.webhook_id AND NOT w.disabled
     WHERE d.status = 'pending' AND d.next_attempt_at <= now() - make_interval(secs => $1::float8 / 1000)
       AND (d.lease_until IS NULL OR d.lease_until < now())
       AND d.id <> ALL($2::uuid[]) AND d.webhook_id <> ALL($3::uuid[])
  ), turns AS (
    SELECT tenant_id, id, webhook_id, next_attempt_at,
           row_number() OVER (PARTITION BY tenant_id ORDER BY in_webhook, next_attempt_at) AS in_tenant
      FROM due WHERE in_webhook <= ${BATCH}
  )
  SELECT tenant_id, id, webhook_id FROM turns ORDER BY in_tenant, next_attempt_at LIMIT ${BATCH}`;

@Injectable()
export class WebhookSweeper extends PeriodicTask {
  /** Webhooks whose line here was full at the last pass: left out of the next while it still is. */
  private fullLines = new Set<string>();

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
    const here = this.dispatcher.queuedHere(this.fullLines);
    const due = await this.db.query<{ tenant_id: string; id: string; webhook_id: string }>(DUE_IN_TURNS, [
      this.config.webhookSweepIntervalMs,
      here.deliveryIds,
      here.fullWebhookIds,
    ]);
    this.fullLines = new Set(here.fullWebhookIds);
    let queued = 0;
    for (const d of due) {
      if (this.fullLines.has(d.webhook_id)) continue;
      const ref: DeliveryRef = { tenantId: d.tenant_id, deliveryId: d.id, webhookId: d.webhook_id };
      if (this.dispatcher.attemptSoon(ref)) queued++;
      else this.fullLines.add(d.webhook_id);
    }
    return queued;
  }
}
