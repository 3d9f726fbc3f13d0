/**
 * Owns a webhook's `health`: what its recent deliveries say about its receiver, read from the
 * delivery table when a webhook is answered. Nothing is kept for it: the delivery path writes
 * what it wrote before (docs/events.md: a write per delivery on that path costs item-write
 * throughput), so health costs only its readers.
 *
 * The work per webhook is bounded, through indexes that exist already: its newest
 * HEALTH_WINDOW deliveries (`webhook_deliveries_list`, in event order, their attempt_logs read
 * with them), for a webhook with no success (or no failure) among those the newest delivery
 * that is `succeeded` (or `failed`) (`webhook_deliveries_by_status`), and its pending
 * deliveries counted up to PENDING_CAP (`webhook_deliveries_due_by_webhook`). A page of webhooks
 * is one statement.
 *
 * Definitions (the README's and the OpenAPI document's):
 * - `last_success_at`, `last_failure_at`: the latest attempt that got a 2xx, and the latest that
 *   did not (another status, or no answer), among the window's deliveries; when the window holds
 *   none, that of the newest delivery whose status is `succeeded` (`failed`). Attempts of older
 *   deliveries that are still pending are not read.
 * - `last_attempt_at`, `last_status` (`succeeded` | `failed`), `last_status_code`: the later of
 *   those two attempts, and its HTTP status (null: no answer came).
 * - `consecutive_failures`: the window's deliveries, newest first, up to the first `succeeded`
 *   one, that were attempted (`attempts` > 0) and did not succeed: `failed`, or `pending` with a
 *   retry to come. Deliveries not attempted yet are passed over. At most HEALTH_WINDOW.
 * - `pending`: deliveries not yet settled (waiting for a first attempt or a retry), at most
 *   PENDING_CAP.
 * A webhook is `failing` (`GET /webhooks?health=failing`) when its consecutive_failures is at
 * least 1: the newest of its window's attempted deliveries has not succeeded.
 */
import type { DataSource } from 'typeorm';
import type { WebhookHealth } from './webhooks.dto';

/** How many of a webhook's newest deliveries health reads. */
export const HEALTH_WINDOW = 50;
/** The most pending deliveries health counts. */
export const PENDING_CAP = 1000;

/** A webhook with no delivery: just registered, or none of its events came yet. */
export const NO_DELIVERIES: WebhookHealth = Object.freeze({
  last_attempt_at: null,
  last_status: null,
  last_status_code: null,
  last_success_at: null,
  last_failure_at: null,
  consecutive_failures: 0,
  pending: 0,
});

/** The newest HEALTH_WINDOW deliveries of the webhook `hook` (an SQL expression of its id), tenant `$1`. */
const WINDOW = (hook: string, columns: string) => `SELECT ${columns} FROM webhook_deliveries
   WHERE tenant_id = $1 AND webhook_id = ${hook} ORDER BY created_at DESC, id DESC LIMIT ${HEALTH_WINDOW}`;

/** An attempt_log's entries as rows, with whether each got a 2xx (delivery-records.ts `succeeded`, in SQL). */
const ATTEMPTS = (log: string) => `jsonb_to_recordset(${log}) AS a(status_code int, created_at timestamptz)`;
const OK = `coalesce(a.status_code BETWEEN 200 AND 299, false)`;

/**
 * The latest attempt with (`ok`) or without a 2xx of the newest delivery of `status`: read only
 * for a webhook whose window has no such attempt (the join `inWindow` of `latest` found none).
 */
function olderAttempt(alias: string, inWindow: string, ok: boolean, status: 'succeeded' | 'failed'): string {
  return `LEFT JOIN LATERAL (
      SELECT a.created_at AS at, a.status_code AS code
        FROM (SELECT attempt_log FROM webhook_deliveries
               WHERE tenant_id = $1 AND webhook_id = h.id AND status = '${status}' ORDER BY created_at DESC, id DESC LIMIT 1) d,
             ${ATTEMPTS('d.attempt_log')}
       WHERE ${inWindow}.at IS NULL AND ${ok ? '' : 'NOT '}${OK} ORDER BY a.created_at DESC LIMIT 1) ${alias} ON true`;
}

/**
 * Whether the webhook `hook` (an SQL expression of its id, tenant `$1`) is failing: the newest
 * attempted delivery of its window has not succeeded, which is consecutive_failures > 0.
 */
export const FAILING = (hook: string) => `coalesce((SELECT r.status <> 'succeeded' FROM (${WINDOW(hook, 'status, attempts, created_at, id')}) r
   WHERE r.attempts > 0 ORDER BY r.created_at DESC, r.id DESC LIMIT 1), false)`;

const HEALTH_SQL = `
  WITH recent AS MATERIALIZED (
    SELECT h.id AS webhook_id, d.attempts, d.attempt_log, d.reached_success
      FROM unnest($2::uuid[]) AS h(id)
      -- reached_success: true from the newest succeeded delivery on, to the oldest, where
      -- consecutive failures stop; over each webhook's rows in the order the index gave them (no sort).
      CROSS JOIN LATERAL (
        SELECT attempts, attempt_log, bool_or(status = 'succeeded') OVER (ORDER BY created_at DESC, id DESC) AS reached_success
          FROM (${WINDOW('h.id', 'status, attempts, attempt_log, created_at, id')}) w) d
  ), streaks AS (
    SELECT webhook_id, count(*) FILTER (WHERE attempts > 0 AND NOT reached_success)::int AS failures FROM recent GROUP BY webhook_id
  ), latest AS (
    SELECT DISTINCT ON (webhook_id, ok) webhook_id, ok, at, code
      FROM (SELECT r.webhook_id, ${OK} AS ok, a.created_at AS at, a.status_code AS code FROM recent r, ${ATTEMPTS('r.attempt_log')}) x
     ORDER BY webhook_id, ok, at DESC
  )
  SELECT h.id AS webhook_id,
         coalesce(ok.at, ok_older.at) AS success_at, coalesce(ok.code, ok_older.code) AS success_code,
         coalesce(bad.at, bad_older.at) AS failure_at, coalesce(bad.code, bad_older.code) AS failure_code,
         coalesce(s.failures, 0) AS consecutive_failures,
         (SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries
                                 WHERE tenant_id = $1 AND webhook_id = h.id AND status = 'pending' LIMIT ${PENDING_CAP}) p)::int AS pending
    FROM unnest($2::uuid[]) AS h(id)
    LEFT JOIN streaks s ON s.webhook_id = h.id
    LEFT JOIN latest ok ON ok.webhook_id = h.id AND ok.ok
    LEFT JOIN latest bad ON bad.webhook_id = h.id AND NOT bad.ok
    ${olderAttempt('ok_older', 'ok', true, 'succeeded')}
    ${olderAttempt('bad_older', 'bad', false, 'failed')}`;

interface HealthRow {
  webhook_id: string;
  success_at: Date | null;
  success_code: number | null;
  failure_at: Date | null;
  failure_code: number | null;
  consecutive_failures: number;
  pending: number;
}

function toHealth(r: HealthRow): WebhookHealth {
  // A success and a failure recorded in one millisecond: the success is taken as the later.
  const lastOk = r.success_at !== null && (r.failure_at === null || r.success_at >= r.failure_at);
  const last = lastOk ? r.success_at : r.failure_at;
  return {
    last_attempt_at: last?.toISOString() ?? null,
    last_status: last === null ? null : lastOk ? 'succeeded' : 'failed',
    last_status_code: last === null ? null : lastOk ? r.success_code : r.failure_code,
    last_success_at: r.success_at?.toISOString() ?? null,
    last_failure_at: r.failure_at?.toISOString() ?? null,
    consecutive_failures: r.consecutive_failures,
    pending: r.pending,
  };
}

/** The health of each of the tenant's webhooks `ids` (all of one page), by id, in one statement. */
export async function healthOf(db: DataSource, tenantId: string, ids: string[]): Promise<Map<string, WebhookHealth>> {
  if (!ids.length) return new Map();
  const rows: HealthRow[] = await db.query(HEALTH_SQL, [tenantId, ids]);
  return new Map(rows.map((r) => [r.webhook_id, toHealth(r)]));
}
