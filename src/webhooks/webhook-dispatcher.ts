/**
 * Attempts webhook deliveries (SPEC 6.1-6.3). Every attempt runs under a lease on its delivery
 * row, so the relay's first attempt, a Bull retry and a sweeper on any instance never send the
 * same attempt twice at once: first attempts come leased from the fan-out; any other attempt
 * claims its row first. An attempt POSTs the stored body with fresh signatures, then its
 * outcome is recorded (batched with others that finish at the same moment) and, on failure,
 * the next attempt is scheduled on WEBHOOK_RETRY_SCHEDULE as a Bull delayed job; after the
 * last one the delivery is `failed`. The row is the truth: a job Redis lost is found again by
 * the sweeper (webhook-sweeper.ts).
 *
 * A slow or dead receiver holds at most PER_WEBHOOK_CONCURRENCY attempts at a time; the rest of
 * its attempts wait in this process (or, past a bound, in the table for the sweeper), so it
 * cannot slow other webhooks' deliveries, and item writes never wait for any of it.
 */
import { InjectQueue, Process, Processor } from '@nestjs/bull';
import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import type { Job, Queue } from 'bull';
import { isIP } from 'node:net';
import { Agent } from 'undici';
import { newId } from '../common/ids';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { SecretBox } from '../crypto/secret-box';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { JobPayloads, QUEUES } from '../jobs/job-catalogue';
import { secretAad, signDelivery } from './signature';
import { guardedLookup, isPublicAddress } from './target-policy';

const PER_WEBHOOK_CONCURRENCY = 8;
/** Attempts of one webhook waiting in memory; beyond, the sweeper picks them from the table. */
const MAX_WAITING_PER_WEBHOOK = 1000;
/** Lease time beyond the receiver's timeout: a margin for queueing and recording. */
const LEASE_MARGIN_MS = 30_000;
const MAX_ERROR_LENGTH = 500;
const USER_AGENT = 'svc-webhooks/4.2.0';

export type DeliveryRef = JobPayloads['webhook.deliver'];

/** A delivery leased to this process, with everything its attempt needs. */
export interface Prepared extends DeliveryRef {
  event: string;
  eventId: string;
  body: string;
  /** Attempts made before this one. */
  attempts: number;
  url: string;
  secretSealed: string;
  /** When the lease ends (ms since the epoch). */
  leaseUntil: number;
}

interface Outcome {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

interface Recorded {
  ref: DeliveryRef;
  attempt: number;
  attemptId: string;
  outcome: Outcome;
  status: 'succeeded' | 'pending' | 'failed';
  delayMs: number;
}

type Waiting = Recorded & { resolve: () => void; reject: (err: unknown) => void };

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
  /**
   * Keep-alive connections per target origin, opened through the SSRF guard's own DNS lookup.
   * undici rather than node:http: half the CPU per request (bench/webhooks.ts, docs/events.md).
   * It follows no redirects.
   */
  private readonly agent: Agent;
  /** Opened secrets by sealed text: a webhook's secret is decrypted once, not per attempt. */
  private readonly secretCache = new Map<string, string>();
  private pending: Waiting[] = [];
  private flushing?: Promise<void>;
  private stopped = false;
  /** WEBHOOK_RETRY_SCHEDULE in milliseconds, parsed once. */
  private readonly retryDelaysMs: number[];

  constructor(
    private readonly db: BookkeepingDb,
    private readonly config: AppConfig,
    private readonly secrets: SecretBox,
    @InjectQueue(QUEUES.webhooks) private readonly queue: Queue<JobPayloads['webhook.deliver']>,
  ) {
    this.retryDelaysMs = config.webhookRetryDelaysMs;
    this.agent = new Agent({
      connections: PER_WEBHOOK_CONCURRENCY * 4,
      connect: { lookup: guardedLookup(config.allowPrivateWebhookTargets) as never },
      // The attempt's own timer bounds the whole exchange; these only must not cut it shorter.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  get leaseMs(): number {
    return this.config.WEBHOOK_TIMEOUT_MS + LEASE_MARGIN_MS;
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    await this.flushing;
    await this.agent.destroy();
  }

  /** First attempts, leased by the fan-out: sent as soon as each webhook has a free slot. */
  deliver(prepared: Prepared[]): void {
    for (const p of prepared) this.queueAttempt(p, () => this.attemptPrepared(p));
  }

  /**
   * Any later attempt (a retry, the sweeper, an admin's retry): claims the row when its
   * webhook has a free slot. False when the webhook's waiting line is full (the delivery
   * stays due in the table for the sweeper).
   */
  attemptSoon(ref: DeliveryRef): boolean {
    return this.queueAttempt(ref, () => this.claimAndAttempt(ref));
  }

  private queueAttempt(ref: DeliveryRef, attempt: () => Promise<void>): boolean {
    if (this.stopped || this.inFlight.has(ref.deliveryId)) return true;
    if (this.limiter.waiting(ref.webhookId) >= MAX_WAITING_PER_WEBHOOK) return false;
    this.inFlight.add(ref.deliveryId);
    void this.limiter
      .run(ref.webhookId, attempt)
      .catch((err: unknown) => this.logger.error({ err, deliveryId: ref.deliveryId }, 'webhook attempt failed unexpectedly'))
      .finally(() => this.inFlight.delete(ref.deliveryId));
    return true;
  }

  private async claimAndAttempt(ref: DeliveryRef): Promise<void> {
    if (this.stopped) return;
    const [claimed] = await this.db.query<Omit<Prepared, keyof DeliveryRef | 'leaseUntil'>>(
      `UPDATE webhook_deliveries d SET lease_until = now() + make_interval(secs => $3::float8 / 1000), updated_at = now()
         FROM webhooks w
        WHERE d.tenant_id = $1 AND d.id = $2 AND d.status = 'pending' AND d.next_attempt_at <= now() + interval '1 second'
          AND (d.lease_until IS NULL OR d.lease_until < now())
          AND w.tenant_id = d.tenant_id AND w.id = d.webhook_id AND NOT w.disabled
        RETURNING d.event, d.event_id AS "eventId", d.body, d.attempts, w.url, w.secret_sealed AS "secretSealed"`,
      [ref.tenantId, ref.deliveryId, this.leaseMs],
    );
    if (claimed) await this.attemptPrepared({ ...ref, ...claimed, leaseUntil: Date.now() + this.leaseMs });
  }

  private async attemptPrepared(d: Prepared): Promise<void> {
    // A lease that could run out before the attempt ends is left to lapse: the sweeper takes
    // the delivery then, rather than two processes sending it at once.
    if (this.stopped || Date.now() + this.config.WEBHOOK_TIMEOUT_MS + 1000 > d.leaseUntil) return;
    const attemptId = newId();
    const outcome = await this.send(d, await this.secretOf(d), attemptId);
    const attempt = d.attempts + 1;
    const ok = outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300;
    const delays = this.retryDelaysMs;
    const delayMs = ok || attempt > delays.length ? 0 : delays[attempt - 1];
    const status = ok ? 'succeeded' : attempt > delays.length ? 'failed' : 'pending';
    await this.record({ ref: { tenantId: d.tenantId, deliveryId: d.deliveryId, webhookId: d.webhookId }, attempt, attemptId, outcome, status, delayMs });
  }

  private async secretOf(d: Prepared): Promise<string> {
    let secret = this.secretCache.get(d.secretSealed);
    if (secret === undefined) {
      secret = await this.secrets.open(d.secretSealed, secretAad(d.tenantId, d.webhookId));
      if (this.secretCache.size > 10_000) this.secretCache.clear();
      this.secretCache.set(d.secretSealed, secret);
    }
    return secret;
  }

  /**
   * Group commit: outcomes that finish while a write is in flight are written together by the
   * next one. Resolves once this outcome is written.
   */
  private record(r: Recorded): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ ...r, resolve, reject });
      this.flushing ??= this.flush().finally(() => (this.flushing = undefined));
    });
  }

  private async flush(): Promise<void> {
    while (this.pending.length) {
      const batch = this.pending;
      this.pending = [];
      try {
        await this.write(batch);
        batch.forEach((r) => r.resolve());
      } catch (err) {
        batch.forEach((r) => r.reject(err));
      }
    }
  }

  private async write(batch: Recorded[]): Promise<void> {
    const column = <T>(f: (r: Recorded) => T) => batch.map(f);
    await this.db.query(
      `UPDATE webhook_deliveries d
          SET status = o.status, attempts = o.attempt, last_status_code = o.status_code, last_error = o.error,
              lease_until = NULL, updated_at = now(),
              next_attempt_at = CASE WHEN o.status = 'pending' THEN now() + make_interval(secs => o.delay_ms / 1000) END,
              attempt_log = d.attempt_log || jsonb_build_array(jsonb_build_object(
                'attempt', o.attempt, 'id', o.id, 'status_code', o.status_code, 'duration_ms', o.duration_ms, 'error', o.error,
                'created_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
         FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::uuid[], $5::int[], $6::int[], $7::text[], $8::text[], $9::float8[])
              AS o(tenant_id, delivery_id, attempt, id, status_code, duration_ms, error, status, delay_ms)
        WHERE d.tenant_id = o.tenant_id AND d.id = o.delivery_id`,
      [
        column((r) => r.ref.tenantId),
        column((r) => r.ref.deliveryId),
        column((r) => r.attempt),
        column((r) => r.attemptId),
        column((r) => r.outcome.statusCode),
        column((r) => r.outcome.durationMs),
        column((r) => r.outcome.error),
        column((r) => r.status),
        column((r) => r.delayMs),
      ],
    );
    await Promise.all(batch.filter((r) => r.status === 'pending').map((r) => this.scheduleRetry(r)));
  }

  /** A Bull delayed job for the next attempt; when Redis cannot take it, the sweeper will. */
  private async scheduleRetry(r: Recorded): Promise<void> {
    const job = this.queue.add('webhook.deliver', r.ref, {
      delay: r.delayMs,
      jobId: `${r.ref.deliveryId}:${r.attempt}`,
      removeOnComplete: true,
      removeOnFail: 1000,
    });
    if (!(await withinTimeout(job, 2000))) this.logger.warn({ deliveryId: r.ref.deliveryId }, 'retry not queued (Redis); the sweeper will pick it up');
  }

  private send(d: Prepared, secret: string, attemptId: string): Promise<Outcome> {
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
      'X-Svc-Event-Id': d.eventId,
      'X-Svc-Delivery-Id': attemptId,
      ...signDelivery(secret, d.eventId, d.body, Math.floor(Date.now() / 1000)),
    };
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.config.WEBHOOK_TIMEOUT_MS);
    return this.agent
      .request({ origin: url.origin, path: url.pathname + url.search, method: 'POST', headers, body: d.body, signal: abort.signal })
      .then(async (res) => {
        // The body is not needed; reading it lets the connection be reused.
        await res.body.dump();
        return done(res.statusCode, res.statusCode >= 300 ? `HTTP ${res.statusCode}` : null);
      })
      .catch((err: Error) => done(null, abort.signal.aborted ? `timeout after ${this.config.WEBHOOK_TIMEOUT_MS} ms` : errorText(err)))
      .finally(() => clearTimeout(timer));
  }
}

/** An attempt's error as the delivery log shows it: the cause's message where undici wraps one. */
function errorText(err: Error): string {
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error ? cause.message : err.message;
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
