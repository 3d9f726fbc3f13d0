/**
 * Attempts webhook deliveries (SPEC 6.1-6.3). Every attempt runs under a lease, so the relay's
 * first attempt, a Bull retry and a sweeper on any instance never send the same attempt twice
 * at once. A first attempt comes from the relay under its event's lease, and its record
 * inserts the delivery row with the outcome (one row write per delivery); once every delivery
 * of an event is recorded, the same statement marks the event dispatched. Any later attempt
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
import { InjectQueue } from '@nestjs/bull';
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Queue } from 'bull';
import type { Agent } from 'undici';
import { newId } from '../common/ids';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { SecretBox } from '../crypto/secret-box';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { JobPayloads, QUEUES } from '../jobs/job-catalogue';
import { secretAad, signDelivery } from './signature';
import { guardedAgent, literalAddressProblem } from '../common/target-policy';

const PER_WEBHOOK_CONCURRENCY = 8;
/** Attempts of one webhook waiting in memory; beyond, the sweeper picks them from the table. */
const MAX_WAITING_PER_WEBHOOK = 1000;
/**
 * First attempts of one webhook running or waiting before their rows are written. Beyond, a
 * planned delivery's row is written before its attempt: a slow receiver then holds at most
 * this many of its events undispatched (their relay lease), which every relay pass steps over.
 */
const MAX_UNRECORDED_PER_WEBHOOK = PER_WEBHOOK_CONCURRENCY * 4;
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
  /** Planned by the relay and not in the table yet: its first record inserts the row. */
  unrecorded?: boolean;
}

interface Outcome {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

interface Recorded {
  ref: DeliveryRef;
  /** Attempts made, this one included; 0 for a first delivery recorded without an attempt. */
  attempt: number;
  attemptId: string | null;
  outcome: Outcome | null;
  status: 'succeeded' | 'pending' | 'failed';
  delayMs: number;
  /** A delivery planned by the relay: this record inserts its row. */
  insert?: Prepared;
  /** For an inserted row whose attempt is still to come in this process: its lease. */
  leaseMs?: number;
}

/** An event whose deliveries are all recorded. */
interface EventRef {
  tenantId: string;
  eventId: string;
}

const eventKey = (tenantId: string, eventId: string) => `${tenantId}:${eventId}`;

/** One attempt in a delivery's attempt_log, from the row source `o` of a recording statement. */
const ATTEMPT_ENTRY = `jsonb_build_object('attempt', o.attempt, 'id', o.attempt_id, 'status_code', o.status_code,
  'duration_ms', o.duration_ms, 'error', o.error, 'created_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`;

type Waiting = Recorded & { resolve: () => void; reject: (err: unknown) => void };

/** Runs at most `limit` tasks per key at once; the rest wait their turn. */
class KeyedLimiter {
  private readonly lanes = new Map<string, { running: number; waiting: Array<() => void> }>();

  constructor(private readonly limit: number) {}

  waiting(key: string): number {
    return this.lanes.get(key)?.waiting.length ?? 0;
  }

  /** Tasks of `key` running or waiting. */
  load(key: string): number {
    const lane = this.lanes.get(key);
    return lane ? lane.running + lane.waiting.length : 0;
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
export class WebhookDispatcher implements OnApplicationBootstrap, OnApplicationShutdown {
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
  /** Events whose deliveries are all recorded, marked dispatched with the next write. */
  private dispatched: EventRef[] = [];
  /** Per event of a relay pass, its deliveries not recorded yet. */
  private readonly owed = new Map<string, number>();
  /** Events a record of which failed to be written: left to their lease, not marked dispatched. */
  private readonly tainted = new Set<string>();
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
    this.agent = guardedAgent(config.allowPrivateWebhookTargets, {
      connections: PER_WEBHOOK_CONCURRENCY * 4,
      // The attempt's own timer bounds the whole exchange; these only must not cut it shorter.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  get leaseMs(): number {
    return this.config.WEBHOOK_TIMEOUT_MS + LEASE_MARGIN_MS;
  }

  /** Bull's side, on instances that deliver: a due retry runs through the same attempt, under the same per-webhook limit. */
  onApplicationBootstrap(): void {
    if (!this.config.EVENT_DELIVERY_ENABLED) return;
    this.queue
      .process('webhook.deliver', 16, async (job) => void this.attemptSoon(job.data))
      .catch((err: unknown) => this.logger.error({ err }, 'webhook retry worker stopped'));
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    await this.flushing;
    await this.agent.destroy();
  }

  /**
   * A relay pass: the first attempts of the deliveries planned for `events`. Usually a delivery
   * is attempted as soon as its webhook has a free slot, and its row is written with the
   * outcome. When its webhook already has MAX_UNRECORDED_PER_WEBHOOK attempts running or
   * waiting, the row is written first (leased to this process), so its event does not wait on
   * a slow receiver; when that webhook's line is full, the row is written due for the sweeper.
   * An event that owes nothing is marked dispatched at once.
   */
  deliverFirst(events: Array<{ tenant_id: string; id: string }>, planned: Prepared[]): void {
    if (this.stopped) return;
    for (const p of planned) {
      const key = eventKey(p.tenantId, p.eventId);
      this.owed.set(key, (this.owed.get(key) ?? 0) + 1);
    }
    for (const e of events) if (!this.owed.has(eventKey(e.tenant_id, e.id))) this.dispatched.push({ tenantId: e.tenant_id, eventId: e.id });
    for (const p of planned) {
      if (this.limiter.load(p.webhookId) < MAX_UNRECORDED_PER_WEBHOOK) {
        const first = { ...p, unrecorded: true };
        this.queueAttempt(first, () => this.attemptPrepared(first));
        continue;
      }
      const lineFull = this.limiter.waiting(p.webhookId) >= MAX_WAITING_PER_WEBHOOK;
      const written = this.recordUnattempted(p, lineFull ? undefined : this.leaseMs);
      if (lineFull) void written.catch(() => undefined);
      else
        this.queueAttempt(p, async () => {
          await written;
          await this.attemptPrepared(p);
        });
    }
    if (this.dispatched.length) this.kick();
  }

  /**
   * Any later attempt (a retry, the sweeper, an admin's retry): claims the row when its
   * webhook has a free slot. False when the webhook's waiting line is full (the delivery
   * stays due in the table for the sweeper). An instance that does not deliver passes it to
   * one that does, through the queue.
   */
  attemptSoon(ref: DeliveryRef): boolean {
    if (!this.config.EVENT_DELIVERY_ENABLED) {
      void this.enqueue(ref, 0, `${ref.deliveryId}:now:${newId()}`);
      return true;
    }
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
    if (this.stopped) return;
    // An attempt that could outlive its lease does not start, rather than risk two processes
    // sending it at once: a row's lease lapses and the sweeper takes the delivery; a planned
    // delivery is recorded due, for the sweeper likewise.
    if (Date.now() + this.config.WEBHOOK_TIMEOUT_MS + 1000 > d.leaseUntil) {
      if (d.unrecorded) await this.recordUnattempted(d, undefined);
      return;
    }
    const attemptId = newId();
    const outcome = await this.send(d, await this.secretOf(d), attemptId);
    const attempt = d.attempts + 1;
    const ok = outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300;
    const delays = this.retryDelaysMs;
    const delayMs = ok || attempt > delays.length ? 0 : delays[attempt - 1];
    const status = ok ? 'succeeded' : attempt > delays.length ? 'failed' : 'pending';
    await this.record({ ref: refOf(d), attempt, attemptId, outcome, status, delayMs, insert: d.unrecorded ? d : undefined });
  }

  /** A planned delivery's row before any attempt: leased for an attempt to come here, else due for the sweeper. */
  private recordUnattempted(d: Prepared, leaseMs: number | undefined): Promise<void> {
    return this.record({ ref: refOf(d), attempt: 0, attemptId: null, outcome: null, status: 'pending', delayMs: 0, insert: d, leaseMs });
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
   * next one. Resolves once this outcome is written. The last record an event owes puts the
   * event in the same write, to be marked dispatched.
   */
  private record(r: Recorded): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ ...r, resolve, reject });
      if (r.insert) {
        const key = eventKey(r.insert.tenantId, r.insert.eventId);
        const left = (this.owed.get(key) ?? 1) - 1;
        if (left > 0) this.owed.set(key, left);
        else {
          this.owed.delete(key);
          if (!this.tainted.delete(key)) this.dispatched.push({ tenantId: r.insert.tenantId, eventId: r.insert.eventId });
        }
      }
      this.kick();
    });
  }

  private kick(): void {
    this.flushing ??= this.flush().finally(() => (this.flushing = undefined));
  }

  private async flush(): Promise<void> {
    while (this.pending.length || this.dispatched.length) {
      const batch = this.pending;
      const dispatched = this.dispatched;
      this.pending = [];
      this.dispatched = [];
      try {
        await this.write(batch, dispatched);
        batch.forEach((r) => r.resolve());
      } catch (err) {
        // Events with a lost record stay undispatched: their lease lapses and the relay plans
        // the deliveries not recorded again.
        for (const r of batch) {
          if (!r.insert) continue;
          const key = eventKey(r.insert.tenantId, r.insert.eventId);
          if (this.owed.has(key)) this.tainted.add(key);
        }
        batch.forEach((r) => r.reject(err));
      }
    }
  }

  private async write(batch: Recorded[], dispatched: EventRef[]): Promise<void> {
    const inserts = batch.filter((r) => r.insert);
    const updates = batch.filter((r) => !r.insert);
    if (inserts.length || dispatched.length) await this.insertFirsts(inserts, dispatched);
    if (updates.length) await this.updateLater(updates);
    await Promise.all(batch.filter((r) => r.status === 'pending' && r.outcome).map((r) => this.scheduleRetry(r)));
  }

  /** Rows for planned deliveries, with their first outcome, and the events now dispatched. */
  private async insertFirsts(batch: Recorded[], dispatched: EventRef[]): Promise<void> {
    const column = <T>(f: (r: Recorded) => T) => batch.map(f);
    const bodies = [...new Set(batch.map((r) => r.insert!.body))];
    const bodyIndex = new Map(bodies.map((b, i) => [b, i + 1]));
    // A webhook deleted meanwhile has its deliveries dropped by the join, not failing the batch.
    await this.db.query(
      `WITH recorded AS (
         INSERT INTO webhook_deliveries (tenant_id, id, webhook_id, event_id, event, body, status, attempts, next_attempt_at,
                                         last_status_code, last_error, attempt_log, lease_until)
         SELECT o.tenant_id, o.id, o.webhook_id, o.event_id, o.event, ($6::text[])[o.body], o.status, o.attempt,
                CASE WHEN o.status = 'pending' THEN now() + make_interval(secs => o.delay_ms / 1000) END,
                o.status_code, o.error, CASE WHEN o.attempt = 0 THEN '[]'::jsonb ELSE jsonb_build_array(${ATTEMPT_ENTRY}) END,
                now() + make_interval(secs => o.lease_ms / 1000)
           FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $7::int[], $8::int[], $9::uuid[], $10::int[],
                       $11::int[], $12::text[], $13::text[], $14::float8[], $17::float8[])
                AS o(tenant_id, id, webhook_id, event_id, event, body, attempt, attempt_id, status_code, duration_ms, error, status, delay_ms, lease_ms)
           JOIN webhooks w ON w.tenant_id = o.tenant_id AND w.id = o.webhook_id
         RETURNING 1)
       UPDATE events SET dispatched_at = now(), relay_lease_until = NULL
        WHERE (tenant_id, id) IN (SELECT * FROM unnest($15::uuid[], $16::uuid[]))`,
      [
        column((r) => r.ref.tenantId),
        column((r) => r.ref.deliveryId),
        column((r) => r.ref.webhookId),
        column((r) => r.insert!.eventId),
        column((r) => r.insert!.event),
        bodies,
        column((r) => bodyIndex.get(r.insert!.body)),
        column((r) => r.attempt),
        column((r) => r.attemptId),
        column((r) => r.outcome?.statusCode ?? null),
        column((r) => r.outcome?.durationMs ?? null),
        column((r) => r.outcome?.error ?? null),
        column((r) => r.status),
        column((r) => r.delayMs),
        dispatched.map((e) => e.tenantId),
        dispatched.map((e) => e.eventId),
        column((r) => r.leaseMs ?? null),
      ],
    );
  }

  /** The outcome of a later attempt, appended to its row's attempt_log. */
  private async updateLater(batch: Recorded[]): Promise<void> {
    const column = <T>(f: (r: Recorded) => T) => batch.map(f);
    await this.db.query(
      `UPDATE webhook_deliveries d
          SET status = o.status, attempts = o.attempt, last_status_code = o.status_code, last_error = o.error,
              lease_until = NULL, updated_at = now(),
              next_attempt_at = CASE WHEN o.status = 'pending' THEN now() + make_interval(secs => o.delay_ms / 1000) END,
              attempt_log = d.attempt_log || jsonb_build_array(${ATTEMPT_ENTRY})
         FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::uuid[], $5::int[], $6::int[], $7::text[], $8::text[], $9::float8[])
              AS o(tenant_id, delivery_id, attempt, attempt_id, status_code, duration_ms, error, status, delay_ms)
        WHERE d.tenant_id = o.tenant_id AND d.id = o.delivery_id`,
      [
        column((r) => r.ref.tenantId),
        column((r) => r.ref.deliveryId),
        column((r) => r.attempt),
        column((r) => r.attemptId),
        column((r) => r.outcome!.statusCode),
        column((r) => r.outcome!.durationMs),
        column((r) => r.outcome!.error),
        column((r) => r.status),
        column((r) => r.delayMs),
      ],
    );
  }

  /** A Bull delayed job for the next attempt. */
  private scheduleRetry(r: Recorded): Promise<void> {
    return this.enqueue(r.ref, r.delayMs, `${r.ref.deliveryId}:${r.attempt}`);
  }

  /** An attempt through the queue; when Redis cannot take it, the sweeper will. */
  private async enqueue(ref: DeliveryRef, delayMs: number, jobId: string): Promise<void> {
    const job = this.queue.add('webhook.deliver', ref, { delay: delayMs, jobId, removeOnComplete: true, removeOnFail: 1000 });
    if (!(await withinTimeout(job, 2000))) this.logger.warn({ deliveryId: ref.deliveryId }, 'attempt not queued (Redis); the sweeper will pick it up');
  }

  private send(d: Prepared, secret: string, attemptId: string): Promise<Outcome> {
    const started = performance.now();
    const done = (statusCode: number | null, error: string | null): Outcome => ({
      statusCode,
      error: error?.slice(0, MAX_ERROR_LENGTH) ?? null,
      durationMs: Math.round(performance.now() - started),
    });
    const url = new URL(d.url);
    const refused = literalAddressProblem(url, this.config.allowPrivateWebhookTargets);
    if (refused) return Promise.resolve(done(null, refused));
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

const refOf = (d: DeliveryRef): DeliveryRef => ({ tenantId: d.tenantId, deliveryId: d.deliveryId, webhookId: d.webhookId });

/** An attempt's error as the delivery log shows it: the cause's message where undici wraps one. */
function errorText(err: Error): string {
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error ? cause.message : err.message;
}
