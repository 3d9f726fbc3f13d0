/**
 * Attempts webhook deliveries (SPEC 6.1-6.3). Every attempt runs under a lease, so the relay's
 * first attempt, a Bull retry and a sweeper on any instance never send the same attempt twice
 * at once. A first attempt comes from the relay under its event's lease, before its delivery
 * has a row; any later attempt claims its row first and is checked against the webhook's
 * subscription as it is then and the registering credential again (webhook-fanout.ts,
 * `stillSelects`, `recheck`). A first attempt goes out as planned only if,
 * when its turn comes, its webhook has not changed since (webhook-changes.ts) and its credential
 * is as the plan read it (neither revoked nor narrowed); otherwise it goes through its row like a
 * later attempt, to the webhook and for the credential as they are then (an attempt already sent
 * is not recalled). An attempt POSTs the body with fresh
 * signatures, then its outcome is recorded (delivery-records.ts: the first one inserts the
 * row) and, on failure, the next attempt is scheduled on WEBHOOK_RETRY_SCHEDULE as a Bull
 * delayed job; after the last one the delivery is `failed`. The row is the truth: a job Redis
 * lost is found again by the sweeper (webhook-sweeper.ts). Only instances with
 * EVENT_DELIVERY_ENABLED attempt anything; others pass admin retries on through the queue.
 *
 * A slow or dead receiver holds at most PER_WEBHOOK_CONCURRENCY attempts (and connections) of a
 * webhook at a time; the rest of its attempts wait in this process (or, past a bound, in the
 * table for the sweeper), so it cannot slow other webhooks' deliveries, those to the same host
 * included, and item writes never wait for any of it.
 */
import { InjectQueue } from '@nestjs/bull';
import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Queue } from 'bull';
import type { Agent } from 'undici';
import type { Principal } from '../auth/principal';
import { newId } from '../common/ids';
import { cutText } from '../common/input-policy';
import { KeyedLimiter } from '../common/keyed-limiter';
import { guardedAgent, literalAddressProblem, requestErrorText } from '../common/target-policy';
import { withinTimeout } from '../common/timeout';
import { isDependencyUnavailable } from '../common/unavailable';
import { SERVICE_VERSION } from '../common/version';
import { AppConfig } from '../config/app-config';
import { SecretBox } from '../crypto/secret-box';
import { BookkeepingDb } from '../database/bookkeeping-db';
import type { Audience } from '../events/event-catalogue';
import { JobPayloads, QUEUES } from '../jobs/job-catalogue';
import { DeliveryRecords, Outcome, Recorded, succeeded } from './delivery-records';
import { PREVIOUS_SECRET, secretAad, signDelivery } from './signature';
import { WebhookChanges } from './webhook-changes';
import { WebhookFanout } from './webhook-fanout';
import { AttemptTimeout, exchange } from './webhook-exchange';

/**
 * Attempts of one webhook at once. At 8, the bench's ten webhooks fell behind writes at full
 * speed once its tables were vacuumed (deliveries 3,000/s short of the 3,360/s owed; first
 * attempt p50 409 ms, p99 2 s); at 16, p50 32 ms and p99 60 ms (docs/events.md).
 */
export const PER_WEBHOOK_CONCURRENCY = 16;
/** Attempts of one webhook waiting in memory; beyond, the sweeper picks them from the table. */
export const MAX_WAITING_PER_WEBHOOK = 1000;
/**
 * A line that refused attempts and has drained to this many waiting asks the sweeper for a pass
 * at once (`whenRoom`): its deliveries in the table then follow at the receiver's pace. Waiting
 * the sweep interval instead, a 45,000-item bulk job reached a receiver that answered in
 * milliseconds at 50-100 deliveries a second (a pass's BATCH every 10 s). Half the line, so
 * that it still has attempts to run while the pass is read.
 */
const ROOM_FOR_SWEEP = MAX_WAITING_PER_WEBHOOK / 2;
/**
 * First attempts of one webhook running or waiting before their rows are written. Beyond, a
 * planned delivery's row is written before its attempt: a slow receiver then holds at most
 * this many of its events undispatched (their relay lease), which every relay pass steps over.
 */
const MAX_UNRECORDED_PER_WEBHOOK = PER_WEBHOOK_CONCURRENCY * 4;
/**
 * A first attempt still running after this long gets its row written (pending, leased here), so
 * that the delivery lists show it while a slow receiver keeps it waiting; the outcome then
 * updates the row. Most attempts end sooner and write their row once, with the outcome.
 */
const VISIBLE_AFTER_MS = 1000;
/** How long shutdown lets attempts under way finish before cutting their connections. */
const SHUTDOWN_GRACE_MS = 5000;
/** Lease time beyond the receiver's timeout: a margin for queueing and recording. */
const LEASE_MARGIN_MS = 30_000;
/** How long a connection to a receiver stays open idle when the receiver gives no `Keep-Alive: timeout=` hint. */
const IDLE_MS = 4000;
/** How long it may stay open idle whatever the receiver's hint says. */
const IDLE_MAX_MS = 10_000;
const MAX_ERROR_LENGTH = 500;
/** At most one warning this often for attempts that could not reach the database. */
const UNREACHABLE_LOG_MS = 10_000;
const USER_AGENT = `svc-webhooks/${SERVICE_VERSION}`;

export type DeliveryRef = JobPayloads['webhook.deliver'];

/** A delivery leased to this process, with everything its attempt needs. */
export interface Prepared extends DeliveryRef {
  event: string;
  eventId: string;
  /**
   * The bytes sent, shared by every attempt that sends the same body (the fan-out's per owner,
   * RecentBodies' for later attempts): undici sends a Buffer as it is but copies a string into a
   * new one per request, which held 1.6 GB for 1,600 attempts of 1 MB bodies to a receiver that
   * never answered.
   */
  body: Buffer;
  /** Attempts made before this one. */
  attempts: number;
  /** How many of the attempts before this one an admin forced: they do not count against the retry schedule. */
  forcedAttempts?: number;
  /** This attempt is an admin's (POST …/retry): recorded as forced, outside the schedule. */
  forced?: boolean;
  /** A forced attempt's: when the delivery's next scheduled attempt is due (ms since the epoch), null when it has none (it is not pending). */
  scheduledAt?: number | null;
  url: string;
  secretSealed: string;
  /** A rotated-out secret still honoured (POST /webhooks/{id}/secret): the delivery is signed with it too. */
  previousSecretSealed?: string | null;
  /** When the lease ends (ms since the epoch). */
  leaseUntil: number;
  /** Planned by the relay and not in the table yet: its first record inserts the row. */
  unrecorded?: boolean;
  /** The WebhookChanges mark the webhook was read under (by the plan, or the row's claim): a change heard since sends the attempt through its row again. */
  plannedAt?: number;
  /** Read by the row's claim, in the attempt's own slot: it waited in no line since (so losing the subscription meanwhile is no reason to read it again). */
  claimed?: boolean;
  /** A first attempt's: the credential that registered the webhook, looked up again before it goes out (a claim's checks did that already). */
  credentialId?: string;
  /** A first attempt's: that credential as the plan read it, which the body was rendered for. */
  credentialAsPlanned?: Principal;
}

/**
 * Leases a delivery for an attempt and reads what the attempt needs ($1 tenant, $2 delivery, $3
 * lease ms, $4 held by the caller, $5 the lease it holds, $6 forced; see claimAndAttempt). The row
 * is found by its key alone, then updated by its place (ctid): a plan with no statistics to go by
 * (a table never analysed) read the tenant's due deliveries through their index instead and
 * filtered them for this one, 0.5-0.8 s a claim at 300,000 of them. A row another transaction
 * updates meanwhile is skipped, not read again (its new version has another ctid): unclaimed,
 * which every such writer (a claim, a retry's lease, an outcome) leaves it anyway. The key's
 * conditions stay, so that nothing but this row can match.
 */
export const CLAIM = `UPDATE webhook_deliveries d SET lease_until = now() + make_interval(secs => $3::float8 / 1000), updated_at = now()
     FROM webhooks w
    WHERE d.ctid = (SELECT ctid FROM webhook_deliveries WHERE tenant_id = $1 AND id = $2)
      AND d.tenant_id = $1 AND d.id = $2 AND ($6 OR (d.status = 'pending' AND d.next_attempt_at <= now() + interval '1 second'))
      AND CASE WHEN $4 THEN d.lease_until > now() AND ($5::timestamptz IS NULL OR d.lease_until = $5::timestamptz)
               ELSE (d.lease_until IS NULL OR d.lease_until < now()) END
      AND w.tenant_id = d.tenant_id AND w.id = d.webhook_id AND NOT w.disabled
    RETURNING d.event, d.event_id AS "eventId", NULLIF(NULLIF(d.body, ''), 'null') AS body, d.attempts, d.forced_attempts AS "forcedAttempts", w.url, w.secret_sealed AS "secretSealed", ${PREVIOUS_SECRET('w')} AS "previousSecretSealed",
              CASE WHEN d.status = 'pending' THEN extract(epoch FROM d.next_attempt_at)::float8 * 1000 END AS "scheduledAt",
              w.credential_id AS "credentialId", w.credential_scopes AS "credentialScopes",
              w.events, w.type_filter AS "typeFilter", NULLIF(NULLIF(d.body, ''), 'null')::json -> 'item' ->> 'type' AS "itemType",
              (SELECT e.audience FROM events e WHERE e.tenant_id = d.tenant_id AND e.id = d.event_id) AS audience`;

@Injectable()
export class WebhookDispatcher implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('Webhooks');
  private readonly limiter = new KeyedLimiter(PER_WEBHOOK_CONCURRENCY);
  /**
   * Attempts queued or in flight in this process, by delivery: the sweeper does not queue a
   * delivery twice, and shutdown waits on them.
   */
  private readonly inFlight = new Map<string, Promise<void>>();
  /**
   * Keep-alive connections per target origin, opened through the SSRF guard's own DNS lookup.
   * undici rather than node:http: half the CPU per request (bench/webhooks.ts, docs/events.md).
   * It follows no redirects.
   */
  private readonly agent: Agent;
  /** Opened secrets by sealed text: a webhook's secret is decrypted once, not per attempt. */
  private readonly secretCache = new Map<string, string>();
  private stopped = false;
  /** Webhooks whose line refused an attempt (left in the table) since it last had room. */
  private readonly refused = new Set<string>();
  private onRoom: () => void = () => undefined;
  /** Attempts that failed for want of the database since the last warning of it (`attemptFailed`). */
  private unreachable = { count: 0, loggedAt: 0 };
  /** WEBHOOK_RETRY_SCHEDULE in milliseconds, parsed once. */
  private readonly retryDelaysMs: number[];

  constructor(
    private readonly db: BookkeepingDb,
    private readonly records: DeliveryRecords,
    private readonly fanout: WebhookFanout,
    private readonly changes: WebhookChanges,
    private readonly config: AppConfig,
    private readonly secrets: SecretBox,
    @InjectQueue(QUEUES.webhooks) private readonly queue: Queue<JobPayloads['webhook.deliver']>,
  ) {
    this.retryDelaysMs = config.webhookRetryDelaysMs;
    this.agent = guardedAgent(config.allowPrivateWebhookTargets, {
      // No cap per receiver host: the per-webhook limit is the only one. Webhooks often share a
      // host (one receiver, several paths, several tenants), and any cap shared between them let
      // some hold every connection: at 256 per host, 17 webhooks whose receiver hung left another
      // webhook's attempts queued behind theirs for up to WEBHOOK_TIMEOUT_MS, which its timer then
      // counted (docs/events.md). A host gets at most PER_WEBHOOK_CONCURRENCY connections per
      // webhook sending to it; idle keep-alive connections are still reused first.
      // The attempt's own timer bounds the whole exchange; these only must not cut it shorter.
      headersTimeout: 0,
      bodyTimeout: 0,
      // Idle connections are the agent's, per origin and shared by the webhooks there, not a
      // webhook's: nothing closes them when a webhook is deleted or re-pointed, only their idle
      // time. A receiver's `Keep-Alive: timeout=` hint (less undici's 2 s margin) is taken up to
      // IDLE_MAX_MS rather than undici's 600 s, with which a receiver kept up to 16 sockets per
      // webhook open ten minutes after its last delivery, or its webhook's deletion; without a
      // hint, IDLE_MS. A webhook that delivers more often than that reuses its connections.
      keepAliveTimeout: IDLE_MS,
      keepAliveMaxTimeout: IDLE_MAX_MS,
    });
  }

  get leaseMs(): number {
    return this.config.WEBHOOK_TIMEOUT_MS + LEASE_MARGIN_MS;
  }

  /** Bull's side, on instances that deliver: a due retry runs through the same attempt, under the same per-webhook limit. */
  onApplicationBootstrap(): void {
    if (!this.config.EVENT_DELIVERY_ENABLED) return;
    this.queue
      .process('webhook.deliver', 16, async ({ data }) => void (data.lease ? this.attemptLeased({ ...data, lease: data.lease }) : this.attemptSoon(data)))
      .catch((err: unknown) => this.logger.error({ err }, 'webhook retry worker stopped'));
  }

  /**
   * Before the pools close: no attempt starts from here on (those waiting for a slot are left to
   * their leases, like any unrecorded first attempt); those under way get SHUTDOWN_GRACE_MS to
   * end, then their connections are cut (recorded as failed attempts, retried on the schedule),
   * and their records are written.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    const settled = Promise.allSettled([...this.inFlight.values()]);
    if (!(await withinTimeout(settled, SHUTDOWN_GRACE_MS))) await this.agent.destroy();
    await settled;
    await this.records.drain();
  }

  async onApplicationShutdown(): Promise<void> {
    if (!this.agent.destroyed) await this.agent.destroy();
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
    this.records.expect(events, planned);
    for (const p of planned) {
      if (this.limiter.load(p.webhookId) < MAX_UNRECORDED_PER_WEBHOOK) {
        const first = { ...p, unrecorded: true };
        this.queueAttempt(first, () => this.attemptPrepared(first));
        continue;
      }
      const lineFull = this.limiter.waiting(p.webhookId) >= MAX_WAITING_PER_WEBHOOK;
      if (lineFull) this.refused.add(p.webhookId);
      const written = this.recordUnattempted(p, lineFull ? undefined : this.leaseMs);
      // Heard at once: the attempt below may not start before the write fails. A failed write
      // leaves the event to its lease, and the relay plans the delivery again.
      written.catch(() => undefined);
      if (!lineFull)
        this.queueAttempt(p, async () => {
          await written;
          await this.attemptPrepared(p);
        });
    }
  }

  /**
   * A later attempt (a retry from the queue, the sweeper's): claims the row when its webhook has
   * a free slot. False when the webhook's waiting line is full (the delivery stays due in the
   * table for the sweeper).
   */
  attemptSoon(ref: DeliveryRef): boolean {
    return this.queueAttempt(ref, () => this.claimAndAttempt(ref));
  }

  /**
   * An admin's retry whose statement took the row's lease (`ref.lease`): no other retry or sweeper
   * can take the delivery meanwhile. It is attempted here under that lease, or, on an instance
   * that does not deliver, by the one instance whose claim still finds that lease. Should the
   * webhook's line be full, or the job be lost, the lease lapses and the sweeper takes it.
   */
  attemptLeased(ref: DeliveryRef & { lease: string }): void {
    if (!this.config.EVENT_DELIVERY_ENABLED) void this.enqueue(ref, 0, `${ref.deliveryId}:now:${newId()}`);
    else this.queueAttempt(ref, () => this.claimAndAttempt(ref, ref.lease));
  }

  private queueAttempt(ref: DeliveryRef, attempt: () => Promise<void>): boolean {
    if (this.stopped || this.inFlight.has(ref.deliveryId)) return true;
    if (this.limiter.waiting(ref.webhookId) >= MAX_WAITING_PER_WEBHOOK) {
      this.refused.add(ref.webhookId);
      return false;
    }
    const running = this.limiter
      .run(ref.webhookId, attempt)
      .catch((err: unknown) => this.attemptFailed(err, ref))
      .finally(() => {
        this.inFlight.delete(ref.deliveryId);
        this.roomMade(ref.webhookId);
      });
    this.inFlight.set(ref.deliveryId, running);
    return true;
  }

  /**
   * An attempt that ended in an error rather than an outcome. The database out of reach (or its
   * bookkeeping pool out of connections for 5 s: thousands of retries due at once) is no bug:
   * the delivery stays due, or its lease lapses, and the sweeper takes it up again, so the
   * attempts back off to its interval. Said once per UNREACHABLE_LOG_MS with how many, not once
   * per attempt (2,254 error lines in 4 minutes, with 8,400 retries of a dead receiver due).
   */
  private attemptFailed(err: unknown, ref: DeliveryRef): void {
    if (!isDependencyUnavailable(err)) return void this.logger.error({ err, deliveryId: ref.deliveryId }, 'webhook attempt failed unexpectedly');
    this.unreachable.count++;
    if (Date.now() < this.unreachable.loggedAt + UNREACHABLE_LOG_MS) return;
    this.logger.warn({ err, attempts: this.unreachable.count }, 'webhook attempts left to the sweeper: their bookkeeping could not reach the database');
    this.unreachable = { count: 0, loggedAt: Date.now() };
  }

  /**
   * `listener` is called when a line that refused attempts has drained to ROOM_FOR_SWEEP: the
   * sweeper's cue for a pass now rather than at its interval. Once per refusal, so a receiver
   * that is slow or dead asks for a pass only as often as its attempts end.
   */
  whenRoom(listener: () => void): void {
    this.onRoom = listener;
  }

  private roomMade(webhookId: string): void {
    if (!this.refused.has(webhookId) || this.limiter.waiting(webhookId) > ROOM_FOR_SWEEP) return;
    this.refused.delete(webhookId);
    this.onRoom();
  }

  /**
   * Claims the row (`held`: one this process holds the lease of already, for a first attempt
   * sent through its row, or the lease an admin's retry took for this attempt, which only one
   * claim can find unchanged, whatever the delivery's status) and attempts it as the webhook and
   * its credential are now: not at all when the webhook's subscription no longer selects the
   * event, or the credential may no longer receive it (the delivery is then `failed`, with why).
   */
  private async claimAndAttempt(ref: DeliveryRef, held: boolean | string = false, forced = typeof held === 'string'): Promise<void> {
    if (this.stopped) return;
    type Claimed = Omit<Prepared, keyof DeliveryRef | 'leaseUntil' | 'credentialId' | 'credentialAsPlanned' | 'body'> & {
      /** Stored only by rows written before migration 3700; the others' is rendered from the event. */
      body: string | null;
      credentialId: string;
      credentialScopes: string[] | null;
      events: string[];
      typeFilter: string[] | null;
      /** An item event's item type, from the body (null for other events): what `type_filter` matches. */
      itemType: string | null;
      /** The event's audience, with the types' ancestors as they were when it was written; null once the event is no longer kept. */
      audience: Audience | null;
    };
    // Noted before the claim reads the webhook: a PATCH or DELETE answered while the checks below
    // run sends the attempt through the row again (attemptPrepared), not to the webhook as it was.
    const mark = this.changes.mark();
    // A forced attempt takes the delivery as it is, whatever its status and however far off its
    // next scheduled attempt: the admin's retry leaves both alone, and so does its outcome, unless
    // it succeeds. A stored body of 'null' or '' stands for none: migration 3700's down put it
    // there, and an earlier release's up() left it. The event's is sent, and '' is never cast.
    // A first attempt sent through its row stays on the first attempts' connections; every other
    // claim takes the later attempts' (bookkeeping-db.ts), which the relay never waits for.
    const sql = held === true ? this.db.query : this.db.later;
    const [claimed] = await sql<Claimed>(
      CLAIM,
      [ref.tenantId, ref.deliveryId, this.leaseMs, held !== false, typeof held === 'string' ? held : null, forced],
    );
    if (!claimed) {
      if (held !== false) await this.releaseIfDisabled(ref, held);
      return;
    }
    const { credentialId, credentialScopes, events, typeFilter, itemType, audience, ...delivery } = claimed;
    // A webhook narrowed since the delivery was planned no longer gets it, at its new URL or old.
    if (!(await this.fanout.stillSelects(ref.tenantId, events, typeFilter, { name: delivery.event, itemType, audience })))
      return this.records.abandon(refOf(ref), 'The webhook no longer subscribes to this event');
    const allowed = await this.fanout.recheck(ref.tenantId, delivery.eventId, credentialId, credentialScopes, sql);
    if (!allowed) return this.records.abandon(refOf(ref), 'The credential that registered the webhook may no longer receive this event');
    const body = allowed.body ?? (delivery.body === null ? null : Buffer.from(delivery.body));
    // Events are kept while a delivery of theirs is pending; one made due after that (an admin's retry of a finished delivery racing the janitor) has nothing to send.
    if (body === null) return this.records.abandon(refOf(ref), 'Its event is no longer kept (EVENT_RETENTION_DAYS): there is no body to send');
    await this.attemptPrepared({ ...ref, ...delivery, body, leaseUntil: Date.now() + this.leaseMs, plannedAt: mark, claimed: true, forced });
  }

  /**
   * A row this process held the lease of (a first attempt written leased to it, a retry it had
   * claimed before a change was heard, an admin's retry) that the claim did not take because its
   * webhook was disabled meanwhile: the lease is given up, since the pass that enabling the
   * webhook brings takes only unleased rows (held, they waited out the lease and a sweep
   * interval). A webhook enabled again between the claim and this keeps the lease, which lapses.
   */
  private async releaseIfDisabled(ref: DeliveryRef, held: true | string): Promise<void> {
    await this.db.later(
      `UPDATE webhook_deliveries d SET lease_until = NULL
         FROM webhooks w
        WHERE d.tenant_id = $1 AND d.id = $2 AND d.status = 'pending' AND d.lease_until > now() AND ($3::timestamptz IS NULL OR d.lease_until = $3::timestamptz)
          AND w.tenant_id = d.tenant_id AND w.id = d.webhook_id AND w.disabled`,
      [ref.tenantId, ref.deliveryId, typeof held === 'string' ? held : null],
    );
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
    if (d.plannedAt !== undefined && !(await this.stillAsPlanned(d))) return this.attemptFromRow(d);
    const attemptId = newId();
    let revealed = false;
    const reveal = d.unrecorded
      ? setTimeout(() => {
          revealed = true;
          // Should this write fail, the event's lease lapses and the relay plans the delivery again.
          this.recordUnattempted(d, this.leaseMs).catch(() => undefined);
        }, VISIBLE_AFTER_MS)
      : undefined;
    const outcome = await this.send(d, await this.secretsOf(d), attemptId);
    clearTimeout(reveal);
    const attempt = d.attempts + 1;
    const ok = succeeded(outcome);
    const delays = this.retryDelaysMs;
    const scheduled = attempt - (d.forcedAttempts ?? 0); // the attempts the schedule has made, this one included
    const delayMs = ok || d.forced || scheduled > delays.length ? 0 : delays[Math.max(scheduled, 1) - 1];
    // An admin's forced attempt is outside the schedule: failing, it leaves the delivery's status
    // and next scheduled attempt as they were (README), so a pending delivery's retry stays due when it was.
    const status = ok ? 'succeeded' : d.forced ? 'unchanged' : scheduled > delays.length ? 'failed' : 'pending';
    const recorded: Recorded = { ref: refOf(d), attempt, attemptId, outcome, status, delayMs, forced: d.forced, insert: d.unrecorded && !revealed ? d : undefined };
    await this.records.record(recorded);
    if (status === 'pending') await this.scheduleRetry(recorded);
    // The scheduled attempt's job may have come while this one held the lease, and found nothing
    // to claim: it is queued again for its time (a job that finds the delivery not due does nothing).
    else if (status === 'unchanged' && d.scheduledAt != null) await this.enqueue(refOf(d), Math.max(0, d.scheduledAt - Date.now()), `${d.deliveryId}:${attempt}`);
  }

  /**
   * Whether an attempt may go out as its webhook was read, now that its turn has come: the
   * webhook has not changed since (no database read: WebhookChanges), and, for a first attempt,
   * the credential that registered it is still what the body was rendered for: not revoked, not
   * narrowed (a cached look-up).
   */
  private async stillAsPlanned(d: Prepared): Promise<boolean> {
    if (this.changes.changedSince(d.webhookId, d.plannedAt!, !d.claimed)) return false;
    return d.credentialId === undefined || this.fanout.registrantAsPlanned(d.tenantId, d.credentialId, d.credentialAsPlanned!);
  }

  /**
   * A first attempt whose webhook changed, or whose credential was revoked or changed, while it
   * waited: its row (written now if it has none, leased here) is claimed again and attempted as a
   * later attempt is, with the webhook's URL, secret, `events` and `type_filter` and the credential
   * as they are now (the body rendered again for it). A webhook deleted meanwhile keeps no row; a
   * disabled one's row is not claimed, and waits, due, for the webhook to be enabled again; a
   * delivery of an event the webhook no longer subscribes to, or that the credential may no longer
   * read, is `failed`.
   */
  private async attemptFromRow(d: Prepared): Promise<void> {
    if (d.unrecorded) await this.recordUnattempted(d, this.leaseMs);
    await this.claimAndAttempt(refOf(d), true, d.forced);
  }

  /** A planned delivery's row before any attempt: leased for an attempt to come here, else due for the sweeper. */
  private recordUnattempted(d: Prepared, leaseMs: number | undefined): Promise<void> {
    return this.records.record({ ref: refOf(d), attempt: 0, attemptId: null, outcome: null, status: 'pending', delayMs: 0, insert: d, leaseMs });
  }

  /** The secrets the attempt is signed with: the webhook's, and one rotated out that is still honoured. */
  private async secretsOf(d: Prepared): Promise<string[]> {
    const sealed = d.previousSecretSealed ? [d.secretSealed, d.previousSecretSealed] : [d.secretSealed];
    return Promise.all(sealed.map((s) => this.openSecret(s, d)));
  }

  private async openSecret(sealed: string, d: DeliveryRef): Promise<string> {
    let secret = this.secretCache.get(sealed);
    if (secret === undefined) {
      secret = await this.secrets.open(sealed, secretAad(d.tenantId, d.webhookId));
      if (this.secretCache.size > 10_000) this.secretCache.clear();
      this.secretCache.set(sealed, secret);
    }
    return secret;
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

  private send(d: Prepared, secrets: string[], attemptId: string): Promise<Outcome> {
    const started = performance.now();
    const done = (statusCode: number | null, error: string | null): Outcome => ({
      statusCode,
      error: error === null ? null : cutText(error, MAX_ERROR_LENGTH),
      durationMs: Math.round(performance.now() - started),
    });
    const url = new URL(d.url);
    const refused = literalAddressProblem(url, this.config.allowPrivateWebhookTargets);
    if (refused) return Promise.resolve(done(null, refused));
    const headers = {
      'Content-Type': 'application/json',
      'Content-Length': String(d.body.length),
      'User-Agent': USER_AGENT,
      'X-Svc-Event': d.event,
      'X-Svc-Event-Id': d.eventId,
      'X-Svc-Delivery-Id': attemptId,
      ...signDelivery(secrets, d.eventId, d.body, Math.floor(Date.now() / 1000)),
    };
    return exchange(this.agent, url, headers, d.body, this.config.WEBHOOK_TIMEOUT_MS).then(
      (statusCode) => done(statusCode, statusCode >= 300 ? `HTTP ${statusCode}` : null),
      (err: Error) => done(null, err instanceof AttemptTimeout ? err.message : requestErrorText(err)),
    );
  }

  /**
   * One signed `webhook.test` request to a webhook, now and outside its line (POST
   * /webhooks/{id}/test): no event, no delivery row, no retry, the receiver's answer returned.
   * Signed, addressed and guarded as every attempt is; on any instance, delivering or not.
   */
  async ping(w: { tenantId: string; webhookId: string; url: string; secretSealed: string; previousSecretSealed: string | null }): Promise<Outcome & { eventId: string; attemptId: string }> {
    const eventId = newId();
    const attemptId = newId();
    const d: Prepared = {
      tenantId: w.tenantId,
      deliveryId: attemptId,
      webhookId: w.webhookId,
      event: TEST_EVENT,
      eventId,
      body: Buffer.from(JSON.stringify({ event: TEST_EVENT, webhook: { id: w.webhookId } })),
      attempts: 0,
      url: w.url,
      secretSealed: w.secretSealed,
      previousSecretSealed: w.previousSecretSealed,
      leaseUntil: 0,
    };
    return { ...(await this.send(d, await this.secretsOf(d), attemptId)), eventId, attemptId };
  }

  /**
   * What the sweeper leaves out of a pass (webhook-sweeper.ts): the deliveries queued or running
   * in this process, which queuing again does nothing for, and those of `webhookIds` whose line
   * here is full, where queuing is refused.
   */
  queuedHere(webhookIds: Iterable<string>): { deliveryIds: string[]; fullWebhookIds: string[] } {
    return {
      deliveryIds: [...this.inFlight.keys()],
      fullWebhookIds: [...webhookIds].filter((id) => this.limiter.waiting(id) >= MAX_WAITING_PER_WEBHOOK),
    };
  }
}

/** The event name of a test request (`ping`), which no subscription selects and no stream carries. */
export const TEST_EVENT = 'webhook.test';

const refOf = (d: DeliveryRef): DeliveryRef => ({ tenantId: d.tenantId, deliveryId: d.deliveryId, webhookId: d.webhookId });
