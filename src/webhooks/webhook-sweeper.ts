/**
 * The safety net under Bull: every WEBHOOK_SWEEP_INTERVAL each instance looks in the table for
 * deliveries that are due (by at least one interval, which leaves a retry to its Bull job;
 * deliveries never attempted, which no job waits for, as soon as they are due) and held by
 * nobody, and attempts them. That covers a retry job lost with Redis (flushed, failed over,
 * down), a first attempt lost with a crashed process, and attempts a saturated webhook could not
 * queue in memory. Only on instances that deliver (EVENT_DELIVERY_ENABLED).
 *
 * A backlog larger than a webhook's line (a bulk job's deliveries) does not wait an interval per
 * BATCH: a pass cut at BATCH runs the next at once when a line that refused nothing took some of
 * it, and a line that refused attempts asks for one when it has drained to half
 * (`WebhookDispatcher.whenRoom`), so such deliveries go at the receiver's pace; a slow or dead
 * receiver's line asks only as often as its attempts end, and neither holds up another's.
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
 *
 * A webhook changed (PATCH, DELETE: WebhookChanges, heard by every instance) brings a pass at
 * once that takes its due deliveries without the one-interval rule. A re-enabled webhook's due
 * retries had their Bull jobs come while it was disabled, and find nothing (the claim skips a
 * disabled webhook): without it they went out one to two intervals after it was enabled, and
 * its never-attempted ones up to one. Such a pass takes them in turns and within the webhook's
 * line like any other; an attempt whose job is still to come is not sent twice (the job finds
 * it queued here, or its row leased or no longer due). A webhook whose line was full, or that a
 * pass cut at BATCH may have left deliveries of, is taken so at the next pass too.
 */
import { Injectable, Logger } from '@nestjs/common';
import { PeriodicTask } from '../common/periodic-task';
import { AppConfig } from '../config/app-config';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { WebhookChanges } from './webhook-changes';
import { DeliveryRef, WebhookDispatcher } from './webhook-dispatcher';

export const BATCH = 500;

/**
 * Each webhook with pending deliveries is found by stepping through the index of pending
 * deliveries by (tenant, webhook), one probe per webhook (`owed`); each enabled one, unless its
 * line here is full, gives its oldest BATCH due deliveries; those are shared out in turns. No
 * step reads more than a webhook's head: reading every due delivery instead took 4-5 s at a
 * million (migration 4300). $1: the sweep interval (ms); $2: deliveries queued here; $3:
 * webhooks whose line here is full; $4: webhooks changed, whose due deliveries are taken at once.
 */
export const DUE_IN_TURNS = `
  WITH RECURSIVE owed AS (
    (SELECT tenant_id, webhook_id FROM webhook_deliveries WHERE status = 'pending' ORDER BY tenant_id, webhook_id LIMIT 1)
    UNION ALL
    SELECT n.tenant_id, n.webhook_id FROM owed o CROSS JOIN LATERAL (
      SELECT d.tenant_id, d.webhook_id FROM webhook_deliveries d
       WHERE d.status = 'pending' AND (d.tenant_id, d.webhook_id) > (o.tenant_id, o.webhook_id)
       ORDER BY d.tenant_id, d.webhook_id LIMIT 1) n
  ), due AS (
    SELECT w.tenant_id, d.id, w.id AS webhook_id, d.next_attempt_at,
           row_number() OVER (PARTITION BY w.tenant_id, w.id ORDER BY d.next_attempt_at) AS in_webhook
      FROM owed o
      JOIN webhooks w ON w.tenant_id = o.tenant_id AND w.id = o.webhook_id AND NOT w.disabled AND w.id <> ALL($3::uuid[])
      CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
         WHERE d.tenant_id = w.tenant_id AND d.webhook_id = w.id AND d.status = 'pending'
           AND d.next_attempt_at <= now()
           AND (d.attempts = 0 OR w.id = ANY($4::uuid[]) OR d.next_attempt_at <= now() - make_interval(secs => $1::float8 / 1000))
           AND (d.lease_until IS NULL OR d.lease_until < now())
           AND d.id <> ALL($2::uuid[])
         ORDER BY d.next_attempt_at LIMIT ${BATCH}) d
  ), turns AS (
    SELECT tenant_id, id, webhook_id, next_attempt_at,
           row_number() OVER (PARTITION BY tenant_id ORDER BY in_webhook, next_attempt_at) AS in_tenant
      FROM due
  )
  SELECT tenant_id, id, webhook_id FROM turns ORDER BY in_tenant, next_attempt_at LIMIT ${BATCH}`;

@Injectable()
export class WebhookSweeper extends PeriodicTask {
  /** Webhooks whose line here was full at the last pass: left out of the next while it still is. */
  private fullLines = new Set<string>();
  /** Webhooks changed since the last pass took them: their due deliveries go without waiting an interval. */
  private changed = new Set<string>();

  constructor(
    private readonly db: BookkeepingDb,
    private readonly config: AppConfig,
    private readonly dispatcher: WebhookDispatcher,
    changes: WebhookChanges,
  ) {
    super(new Logger('Webhooks'), 'webhook sweep failed');
    dispatcher.whenRoom(() => this.soon());
    changes.whenHeard((webhookId) => {
      if (!this.config.EVENT_DELIVERY_ENABLED) return;
      this.changed.add(webhookId);
      this.soon();
    });
  }

  protected intervalMs(): number | undefined {
    return this.config.EVENT_DELIVERY_ENABLED ? this.config.webhookSweepIntervalMs : undefined;
  }

  protected async pass(): Promise<number> {
    const here = this.dispatcher.queuedHere(this.fullLines);
    // Taken now, so that a change heard while the statement runs (which may read the webhook as it was) brings a pass of its own.
    const changed = [...this.changed];
    this.changed.clear();
    // On the later attempts' connections: a pass waits behind retries, never the relay behind a pass.
    const due = await this.db
      .later<{ tenant_id: string; id: string; webhook_id: string }>(DUE_IN_TURNS, [this.config.webhookSweepIntervalMs, here.deliveryIds, here.fullWebhookIds, changed])
      .catch((err: unknown) => {
        for (const id of changed) this.changed.add(id);
        throw err;
      });
    this.fullLines = new Set(here.fullWebhookIds);
    let queued = 0;
    const took = new Set<string>();
    for (const d of due) {
      if (this.fullLines.has(d.webhook_id)) continue;
      const ref: DeliveryRef = { tenantId: d.tenant_id, deliveryId: d.id, webhookId: d.webhook_id };
      if (this.dispatcher.attemptSoon(ref)) {
        queued++;
        took.add(d.webhook_id);
      } else this.fullLines.add(d.webhook_id);
    }
    for (const id of changed) if (due.length === BATCH || this.fullLines.has(id)) this.changed.add(id);
    // A pass cut at BATCH rows may have left due deliveries behind: the next pass at once, so long
    // as a line that refused nothing took some (it may take more). A line that refused gets its
    // next pass when it has drained to half (`whenRoom`): chained on its account, a slow
    // receiver freeing a place or two per pass would run passes back to back; left to the
    // interval, a line kept full by a dead receiver held the others' backlogs to one pass per
    // interval. Each chained pass queues attempts, so this ends when the due deliveries or the
    // lines' room run out.
    if (due.length === BATCH && [...took].some((id) => !this.fullLines.has(id))) this.soon();
    return queued;
  }
}
