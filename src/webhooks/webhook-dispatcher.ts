/**
 * Attempts webhook deliveries (SPEC 6.1-6.3). An attempt claims its delivery row with a lease
 * (so the relay's first attempt, a Bull retry and a sweeper on any instance never send the same
 * attempt twice at once), POSTs the stored body with fresh signatures, records the outcome, and
 * on failure schedules the next attempt on WEBHOOK_RETRY_SCHEDULE as a Bull delayed job; after
 * the last one the delivery is `failed`. The row is the truth: a job Redis lost is found again
 * by the sweeper (webhook-sweeper.ts).
 *
 * A slow or dead receiver holds at most PER_WEBHOOK_CONCURRENCY attempts at a time; the rest of
 * its attempts wait in this process (or, past a bound, in the table for the sweeper), so it
 * cannot slow other webhooks' deliveries, and item writes never wait for any of it.
 */
import { InjectQueue, Process, Processor } from '@nestjs/bull';
import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Job, Queue } from 'bull';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { DataSource } from 'typeorm';
import { newId } from '../common/ids';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { SecretBox } from '../crypto/secret-box';
import { JobPayloads, QUEUES } from '../jobs/job-catalogue';
import { secretAad, signDelivery } from './signature';
import { guardedLookup, isPublicAddress } from './target-policy';

const PER_WEBHOOK_CONCURRENCY = 8;
/** Attempts of one webhook waiting in memory; beyond, the sweeper picks them from the table. */
const MAX_WAITING_PER_WEBHOOK = 1000;
const MAX_ERROR_LENGTH = 500;
const USER_AGENT = 'svc-webhooks/4.2.0';

export type DeliveryRef = JobPayloads['webhook.deliver'];

interface Claimed {
  event: string;
  event_id: string;
  body: string;
  attempts: number;
  url: string;
  secret_sealed: string;
}

interface Outcome {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** Runs at most `limit` tasks per key at once; the rest wait their turn. */
class KeyedLimiter {
  private readonly lanes = new Map<string, { running: number; waiting: Array<() => void> }>();

  constructor(private readonly limit: number) {}

  waiting(key: string): number {
    return this.lanes.get(key)?.waiting.length ?? 0;
  }

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    let lane = this.lanes.get(key);
    if (!lane) this.lanes.set(key, (lane = { running: 0, waiting: [] }));
    if (lane.running >= this.limit) await new Promise<void>((resolve) => lane!.waiting.push(resolve));
    lane.running++;
    try {
      return await task();
    } finally {
      lane.running--;
      const next = lane.waiting.shift();
      if (next) next();
      else if (lane.running === 0) this.lanes.delete(key);
    }
  }
}

@Injectable()
export class WebhookDispatcher implements OnApplicationShutdown {
  private readonly logger = new Logger('Webhooks');
  private readonly limiter = new KeyedLimiter(PER_WEBHOOK_CONCURRENCY);
  /** Deliveries queued or in flight in this process, so the sweeper does not queue them twice. */
  private readonly inFlight = new Set<string>();
  private readonly agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: PER_WEBHOOK_CONCURRENCY * 4 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: PER_WEBHOOK_CONCURRENCY * 4 }),
  };
  private stopped = false;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
    private readonly secrets: SecretBox,
    @InjectQueue(QUEUES.webhooks) private readonly queue: Queue<JobPayloads['webhook.deliver']>,
  ) {}

  onApplicationShutdown(): void {
    this.stopped = true;
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }

  /**
   * Attempts the delivery in the background, as soon as its webhook has a free slot; false when
   * the webhook's waiting line is full (the delivery stays due in the table for the sweeper).
   */
  attemptSoon(ref: DeliveryRef): boolean {
    if (this.stopped || this.inFlight.has(ref.deliveryId)) return true;
    if (this.limiter.waiting(ref.webhookId) >= MAX_WAITING_PER_WEBHOOK) return false;
    this.inFlight.add(ref.deliveryId);
    void this.limiter
      .run(ref.webhookId, () => this.attempt(ref))
      .catch((err: unknown) => this.logger.error({ err, deliveryId: ref.deliveryId }, 'webhook attempt failed unexpectedly'))
      .finally(() => this.inFlight.delete(ref.deliveryId));
    return true;
  }

  /** One attempt, if the delivery is due and nobody else holds it. */
  async attempt(ref: DeliveryRef): Promise<void> {
    if (this.stopped) return;
    const leaseMs = this.config.WEBHOOK_TIMEOUT_MS + 30_000;
    const [[claimed]]: [Claimed[], number] = await this.db.query(
      `UPDATE webhook_deliveries d SET lease_until = now() + make_interval(secs => $3::float8 / 1000), updated_at = now()
         FROM webhooks w
        WHERE d.tenant_id = $1 AND d.id = $2 AND d.status = 'pending' AND d.next_attempt_at <= now() + interval '1 second'
          AND (d.lease_until IS NULL OR d.lease_until < now())
          AND w.tenant_id = d.tenant_id AND w.id = d.webhook_id AND NOT w.disabled
        RETURNING d.event, d.event_id, d.body, d.attempts, w.url, w.secret_sealed`,
      [ref.tenantId, ref.deliveryId, leaseMs],
    );
    if (!claimed) return;
    const secret = await this.secrets.open(claimed.secret_sealed, secretAad(ref.tenantId, ref.webhookId));
    const attemptId = newId();
    const outcome = await this.send(claimed, secret, attemptId);
    await this.record(ref, claimed.attempts + 1, attemptId, outcome);
  }

  private async record(ref: DeliveryRef, attempt: number, attemptId: string, o: Outcome): Promise<void> {
    const ok = o.statusCode !== null && o.statusCode >= 200 && o.statusCode < 300;
    const delays = this.config.webhookRetryDelaysMs;
    const delay = ok || attempt > delays.length ? undefined : delays[attempt - 1];
    const status = ok ? 'succeeded' : delay === undefined ? 'failed' : 'pending';
    await this.db.query(
      `WITH logged AS (
         INSERT INTO webhook_delivery_attempts (tenant_id, delivery_id, attempt, id, status_code, duration_ms, error)
         VALUES ($1, $2, $3, $4, $5, $6, $7))
       UPDATE webhook_deliveries
          SET status = $8, attempts = $3, last_status_code = $5, last_error = $7, lease_until = NULL, updated_at = now(),
              next_attempt_at = CASE WHEN $8 = 'pending' THEN now() + make_interval(secs => $9::float8 / 1000) END
        WHERE tenant_id = $1 AND id = $2`,
      [ref.tenantId, ref.deliveryId, attempt, attemptId, o.statusCode, o.durationMs, o.error, status, delay ?? 0],
    );
    if (delay !== undefined) await this.scheduleRetry(ref, attempt, delay);
  }

  /** A Bull delayed job for the next attempt; when Redis cannot take it, the sweeper will. */
  private async scheduleRetry(ref: DeliveryRef, attempt: number, delayMs: number): Promise<void> {
    const job = this.queue.add('webhook.deliver', ref, {
      delay: delayMs,
      jobId: `${ref.deliveryId}:${attempt}`,
      removeOnComplete: true,
      removeOnFail: 1000,
    });
    if (!(await withinTimeout(job, 2000))) this.logger.warn({ deliveryId: ref.deliveryId }, 'retry not queued (Redis); the sweeper will pick it up');
  }

  private send(d: Claimed, secret: string, attemptId: string): Promise<Outcome> {
    const started = performance.now();
    const done = (statusCode: number | null, error: string | null): Outcome => ({
      statusCode,
      error: error?.slice(0, MAX_ERROR_LENGTH) ?? null,
      durationMs: Math.round(performance.now() - started),
    });
    const url = new URL(d.url);
    const allowPrivate = this.config.allowPrivateWebhookTargets;
    const host = url.hostname.replace(/^\[|\]$/g, '');
    // Literal addresses skip DNS, and with it guardedLookup: checked here instead.
    if (isIP(host) && !allowPrivate && !isPublicAddress(host)) return Promise.resolve(done(null, `refused: ${host} is not a public address`));
    const headers = {
      'Content-Type': 'application/json',
      'Content-Length': String(Buffer.byteLength(d.body)),
      'User-Agent': USER_AGENT,
      'X-Svc-Event': d.event,
      'X-Svc-Event-Id': d.event_id,
      'X-Svc-Delivery-Id': attemptId,
      ...signDelivery(secret, d.event_id, d.body, Math.floor(Date.now() / 1000)),
    };
    const transport = url.protocol === 'https:' ? https : http;
    return new Promise((resolve) => {
      let settled = false;
      const finish = (statusCode: number | null, error: string | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(done(statusCode, error));
      };
      const req = transport.request(
        url,
        { method: 'POST', headers, agent: this.agents[url.protocol as 'http:' | 'https:'], lookup: guardedLookup(allowPrivate) as never },
        (res) => {
          // The body is not needed; reading it lets the connection be reused. Redirects are not followed.
          res.resume();
          res.on('end', () => finish(res.statusCode ?? null, res.statusCode && res.statusCode >= 300 ? `HTTP ${res.statusCode}` : null));
          res.on('error', (err) => finish(res.statusCode ?? null, err.message));
        },
      );
      const timer = setTimeout(() => {
        finish(null, `timeout after ${this.config.WEBHOOK_TIMEOUT_MS} ms`);
        req.destroy();
      }, this.config.WEBHOOK_TIMEOUT_MS);
      req.on('error', (err) => finish(null, err.message));
      req.end(d.body);
    });
  }
}

/** Bull's side: a due retry runs through the same attempt, under the same per-webhook limit. */
@Processor(QUEUES.webhooks)
export class WebhookDeliveryProcessor {
  constructor(private readonly dispatcher: WebhookDispatcher) {}

  @Process({ name: 'webhook.deliver', concurrency: 16 })
  handle(job: Job<JobPayloads['webhook.deliver']>): void {
    this.dispatcher.attemptSoon(job.data);
  }
}
