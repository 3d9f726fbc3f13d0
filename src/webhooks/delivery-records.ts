/**
 * What attempts leave in the delivery table, by group commit: records gather for GATHER_MS, and
 * those that finish while a write is in flight go together in the next one. A delivery the
 * relay planned has no row until its first record, which inserts it with the first attempt's
 * outcome (or without an attempt: leased for one still to come in this process, or due for the
 * sweeper); a later attempt's outcome is appended to the row's attempt_log. The record that
 * completes an event's deliveries puts the event in the same write, marked dispatched. When a
 * write fails, its events stay undispatched: their relay lease lapses and the relay plans the
 * deliveries that have no row again (event-relay.ts).
 *
 * Two lines of writes, each with its group commit: first attempts' records (the inserted rows,
 * the events dispatched, a first attempt's outcome) on the first attempts' connections, and
 * later attempts' on the later attempts' (bookkeeping-db.ts). One line, whose write did both in
 * turn, held a healthy webhook's rows and its events' dispatch behind the updates of other
 * webhooks' retries whenever those waited for a connection.
 */
import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { setTimeout as delay } from 'node:timers/promises';
import { isDependencyUnavailable, isWriteCollision } from '../common/unavailable';
import { BookkeepingDb } from '../database/bookkeeping-db';
import type { DeliveryRef, Prepared } from './webhook-dispatcher';

export interface Outcome {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** An attempt succeeded when its receiver answered 2xx (SPEC 6.3.1). */
export const succeeded = (o: Outcome): boolean => o.statusCode !== null && o.statusCode >= 200 && o.statusCode < 300;

export interface Recorded {
  ref: DeliveryRef;
  /** Attempts made, this one included; 0 for a first delivery recorded without an attempt. */
  attempt: number;
  attemptId: string | null;
  outcome: Outcome | null;
  /** `unchanged`: an admin's forced attempt that failed, which leaves the row's status and next scheduled attempt as they were. */
  status: 'succeeded' | 'pending' | 'failed' | 'unchanged';
  delayMs: number;
  /** An admin's forced attempt: counted in `forced_attempts`, outside the retry schedule. */
  forced?: boolean;
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

/**
 * How long records gather before each write. Per statement, PostgreSQL spends about 0.2 ms of
 * CPU whatever its size, and a row about 0.01 ms (docs/events.md): at 2,000 deliveries/s,
 * writing as soon as the previous write returned made statements of 7 rows.
 */
const GATHER_MS = 10;
/** Waits before each retry of a record statement while the database is away. */
const RECORD_RETRIES_MS = [500, 1000, 2000, 4000];
/** The wait before a record statement that lost a deadlock goes again: the other transaction has its locks by then. */
const COLLISION_RETRY_MS = 10;

/**
 * A record statement again, while PostgreSQL is away, for a few seconds: a record given up
 * leaves its event to its lease, and the delivery is sent again once that lapses (a short
 * database blip re-sent a thousand deliveries). Each statement is atomic; one that committed
 * though its answer was lost fails again on its own rows, and the relay plans only the
 * deliveries without one. A statement that lost a deadlock (a webhook's deletion cascading to
 * the rows it updates, in another order) is rolled back whole and goes again at once.
 */
export async function retryingRecord(statement: () => Promise<void>, waitsMs: readonly number[] = RECORD_RETRIES_MS): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await statement();
    } catch (err) {
      const collided = isWriteCollision(err);
      if (attempt >= waitsMs.length || !(collided || isDependencyUnavailable(err))) throw err;
      await delay(collided ? COLLISION_RETRY_MS : waitsMs[attempt]);
    }
  }
}

interface Waiting {
  record: Recorded;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** One line of group commits: the records waiting for its next write, and the write in flight. */
interface Line {
  pending: Waiting[];
  flushing?: Promise<void>;
}

/** Whether a record is a first attempt's (its row's insert, or the outcome of a first attempt whose row was written before it ended). */
const isFirst = (r: Recorded) => !!r.insert || (r.attempt === 1 && !r.forced);

@Injectable()
export class DeliveryRecords implements BeforeApplicationShutdown {
  private readonly first: Line = { pending: [] };
  private readonly later: Line = { pending: [] };
  /** Events whose deliveries are all recorded, marked dispatched with the first line's next write. */
  private dispatched: EventRef[] = [];
  /** Per event of a relay pass, its deliveries not recorded yet. */
  private readonly owed = new Map<string, number>();
  /** Events a record of which failed to be written: left to their lease, not marked dispatched. */
  private readonly tainted = new Set<string>();

  constructor(private readonly db: BookkeepingDb) {}

  /** Before the pools close. The dispatcher also drains what its last attempts recorded. */
  beforeApplicationShutdown(): Promise<void> {
    return this.drain();
  }

  /** Resolves once every record so far is written (or its write failed). */
  async drain(): Promise<void> {
    while (this.first.flushing || this.later.flushing) await Promise.all([this.first.flushing, this.later.flushing]);
  }

  /** A relay pass's deliveries, owed by their events; an event that owes none is dispatched with the next write. */
  expect(events: Array<{ tenant_id: string; id: string }>, planned: Prepared[]): void {
    for (const p of planned) {
      const key = eventKey(p.tenantId, p.eventId);
      this.owed.set(key, (this.owed.get(key) ?? 0) + 1);
    }
    for (const e of events) if (!this.owed.has(eventKey(e.tenant_id, e.id))) this.dispatched.push({ tenantId: e.tenant_id, eventId: e.id });
    if (this.dispatched.length) this.kick(this.first);
  }

  /**
   * Group commit: outcomes that finish while a write is in flight are written together by the
   * next one. Resolves once this outcome is written. The last record an event owes puts the
   * event in the same write, to be marked dispatched.
   */
  record(r: Recorded): Promise<void> {
    return new Promise((resolve, reject) => {
      const line = isFirst(r) ? this.first : this.later;
      line.pending.push({ record: r, resolve, reject });
      if (r.insert) {
        const key = eventKey(r.insert.tenantId, r.insert.eventId);
        const left = (this.owed.get(key) ?? 1) - 1;
        if (left > 0) this.owed.set(key, left);
        else {
          this.owed.delete(key);
          if (!this.tainted.delete(key)) this.dispatched.push({ tenantId: r.insert.tenantId, eventId: r.insert.eventId });
        }
      }
      this.kick(line);
    });
  }

  private kick(line: Line): void {
    line.flushing ??= this.flush(line).finally(() => (line.flushing = undefined));
  }

  private async flush(line: Line): Promise<void> {
    const first = line === this.first;
    while (line.pending.length || (first && this.dispatched.length)) {
      await delay(GATHER_MS);
      const batch = line.pending;
      const dispatched = first ? this.dispatched : [];
      line.pending = [];
      if (first) this.dispatched = [];
      try {
        await this.write(batch.map((w) => w.record), dispatched, first ? this.db.query : this.db.later);
        batch.forEach((w) => w.resolve());
      } catch (err) {
        // Events with a lost record stay undispatched: their lease lapses and the relay plans
        // the deliveries not recorded again.
        for (const { record: r } of batch) {
          if (!r.insert) continue;
          const key = eventKey(r.insert.tenantId, r.insert.eventId);
          if (this.owed.has(key)) this.tainted.add(key);
        }
        batch.forEach((w) => w.reject(err));
      }
    }
  }

  private async write(batch: Recorded[], dispatched: EventRef[], sql: BookkeepingDb['query']): Promise<void> {
    const inserts = batch.filter((r) => r.insert);
    const updates = batch.filter((r) => !r.insert);
    if (inserts.length || dispatched.length) await retryingRecord(() => this.insertFirsts(inserts, dispatched));
    if (updates.length) await retryingRecord(() => this.updateLater(updates, sql));
  }

  /** Rows for planned deliveries, with their first outcome, and the events now dispatched. */
  private async insertFirsts(batch: Recorded[], dispatched: EventRef[]): Promise<void> {
    const column = <T>(f: (r: Recorded) => T) => batch.map(f);
    // A webhook deleted meanwhile has its deliveries dropped by the join, not failing the batch:
    // the lock waits for a deletion under way and then skips the row, where the join alone (as of
    // the statement's start) would keep it and the foreign key would refuse the whole batch. No
    // body is stored: a later attempt renders it from the event (migration 3700).
    await this.db.query(
      `WITH recorded AS (
         INSERT INTO webhook_deliveries (tenant_id, id, webhook_id, event_id, event, status, attempts, next_attempt_at,
                                         last_status_code, last_error, attempt_log, lease_until)
         SELECT o.tenant_id, o.id, o.webhook_id, o.event_id, o.event, o.status, o.attempt,
                CASE WHEN o.status = 'pending' THEN now() + make_interval(secs => o.delay_ms / 1000) END,
                o.status_code, o.error, CASE WHEN o.attempt = 0 THEN '[]'::jsonb ELSE jsonb_build_array(${ATTEMPT_ENTRY}) END,
                now() + make_interval(secs => o.lease_ms / 1000)
           FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::int[], $7::uuid[], $8::int[],
                       $9::int[], $10::text[], $11::text[], $12::float8[], $15::float8[])
                AS o(tenant_id, id, webhook_id, event_id, event, attempt, attempt_id, status_code, duration_ms, error, status, delay_ms, lease_ms)
           JOIN webhooks w ON w.tenant_id = o.tenant_id AND w.id = o.webhook_id
            FOR KEY SHARE OF w
         RETURNING 1)
       UPDATE events SET dispatched_at = now(), relay_lease_until = NULL
        WHERE (tenant_id, id) IN (SELECT * FROM unnest($13::uuid[], $14::uuid[]))`,
      [
        column((r) => r.ref.tenantId),
        column((r) => r.ref.deliveryId),
        column((r) => r.ref.webhookId),
        column((r) => r.insert!.eventId),
        column((r) => r.insert!.event),
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

  /** A delivery given up without an attempt (its webhook's credential may no longer receive it): failed, with why. */
  async abandon(ref: DeliveryRef, reason: string): Promise<void> {
    await this.db.later(
      `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_until = NULL, last_error = $3, updated_at = now()
        WHERE tenant_id = $1 AND id = $2`,
      [ref.tenantId, ref.deliveryId, reason],
    );
  }

  /**
   * The outcome of a later attempt, appended to its row's attempt_log. A forced attempt that
   * failed (`unchanged`) keeps the row's status and next_attempt_at: a pending delivery's
   * scheduled retry stays when it was, a failed one stays failed.
   */
  private async updateLater(batch: Recorded[], sql: BookkeepingDb['query']): Promise<void> {
    const column = <T>(f: (r: Recorded) => T) => batch.map(f);
    await sql(
      `UPDATE webhook_deliveries d
          SET status = CASE WHEN o.status = 'unchanged' THEN d.status ELSE o.status END,
              attempts = o.attempt, last_status_code = o.status_code, last_error = o.error,
              lease_until = NULL, updated_at = now(), forced_attempts = d.forced_attempts + o.forced::int,
              next_attempt_at = CASE WHEN o.status = 'unchanged' THEN d.next_attempt_at
                                     WHEN o.status = 'pending' THEN now() + make_interval(secs => o.delay_ms / 1000) END,
              attempt_log = d.attempt_log || jsonb_build_array(${ATTEMPT_ENTRY})
         FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::uuid[], $5::int[], $6::int[], $7::text[], $8::text[], $9::float8[], $10::bool[])
              AS o(tenant_id, delivery_id, attempt, attempt_id, status_code, duration_ms, error, status, delay_ms, forced)
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
        column((r) => r.forced === true),
      ],
    );
  }
}
