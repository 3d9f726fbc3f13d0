/**
 * Owns webhook registrations and the reading side of their deliveries. A webhook belongs to
 * the credential that registered it: that credential (or an admin of the tenant) sees and
 * changes it, and it receives only what that credential may read (webhook-fanout.ts), and, when
 * it is an OAuth token, only within that token's scopes, kept as `credential_scopes`. Every
 * statement is scoped by tenant_id; the secret is stored sealed (crypto/secret-box.ts) and
 * returned only once, on creation. A change or removal is announced to every instance
 * (webhook-changes.ts) before it is answered, so first attempts still waiting are not sent to
 * the webhook as it was. Creation, changes, deletion and secret rotation are audited
 * (`webhook.created`, `webhook.updated`, `webhook.deleted`, `webhook.secret_rotated`) in the
 * transaction that makes them, naming who did it, the URL by its host alone (a path or query may
 * carry a receiver's token) and never a secret.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { actorOf, AuditService, changedFields } from '../audit/audit.service';
import { isAdmin } from '../auth/permissions';
import { ownerCredential, ownerCredentialSql, ownsWorkSql, type Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { newId } from '../common/ids';
import { decodeCursor, pageOf } from '../common/pagination';
import { validationError } from '../common/validation';
import { AppConfig } from '../config/app-config';
import { SecretBox } from '../crypto/secret-box';
import { generateSecret, PREVIOUS_SECRET, PREVIOUS_SECRET_EXPIRY, secretAad } from './signature';
import { assertTargetAddress, TargetRefused, urlProblem } from '../common/target-policy';
import { tokenScopesOf } from '../oidc/scopes';
import { succeeded } from './delivery-records';
import { WebhookChanges } from './webhook-changes';
import { WebhookDispatcher } from './webhook-dispatcher';
import {
  CreateWebhookDto, DeliveriesQuery, DeliveryList, DeliveryResponse, ListWebhooksQuery, RotateWebhookSecretDto, UpdateWebhookDto, WebhookHealth, WebhookList, WebhookResponse,
  WebhookTestResult,
} from './webhooks.dto';
import { FAILING, healthOf, NO_DELIVERIES } from './webhook-health';

export interface WebhookRow {
  tenant_id: string;
  id: string;
  url: string;
  events: string[];
  type_filter: string[] | null;
  disabled: boolean;
  secret_sealed: string;
  previous_secret_expires_at: Date | null;
  previous_secret_sealed: string | null;
  credential_id: string;
  created_at: Date;
  updated_at: Date;
}

const WEBHOOK_COLUMNS = `tenant_id, id, url, events, type_filter, disabled, secret_sealed,
  ${PREVIOUS_SECRET_EXPIRY('webhooks')} AS previous_secret_expires_at, ${PREVIOUS_SECRET('webhooks')} AS previous_secret_sealed, credential_id, created_at, updated_at`;

/** What `webhook.updated` names when it changed (`details.changed`): the fields a PATCH may set. */
const AUDITED_FIELDS = ['url', 'events', 'type_filter', 'disabled'] as const;

/** A webhook URL as the audit names it: its host (and port), never its path or query. */
const hostOf = (url: string) => new URL(url).host;

const notFound = () => ApiError.notFound('webhook_not_found', 'No such webhook');
const deliveryNotFound = () => ApiError.notFound('not_found', 'No such delivery of this webhook');
const DEFAULT_PREVIOUS_SECRET_SECONDS = 86_400;
/** Whether delivery `d` has a body to send: its own (rows stored before migration 3700) or its event's, while that is kept. */
const SENDABLE = `(d.body IS NOT NULL OR EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = d.tenant_id AND e.id = d.event_id))`;

/**
 * Which webhooks a caller sees and changes, as SQL over the two parameters `ownerOf` gives, from
 * `$at`: an admin, the tenant's; another credential, those it registered. Tokens of one OAuth
 * client or grant share their credential id, so a token owns only the webhooks registered within
 * its own scopes: a narrower token must not take over (and receive through) a wider one's. A
 * token's webhook registered before its scopes were kept (credential_scopes null) is an admin's
 * to manage.
 */
const OWNED_BY = (at: number) => `($${at}::text IS NULL OR ${ownsWorkSql('credential_id', 'credential_scopes', at)})`;

/** The parameters of OWNED_BY: the caller's credential as an owner (null for an admin) and token scopes (null for an API key). */
function ownerOf(p: Principal): [string | null, string[] | null] {
  return isAdmin(p) ? [null, null] : [ownerCredential(p.credentialId), tokenScopesOf(p)];
}

function toResponse(r: WebhookRow, health: WebhookHealth, secret?: string): WebhookResponse {
  return {
    id: r.id,
    url: r.url,
    events: r.events,
    type_filter: r.type_filter,
    disabled: r.disabled,
    ...(secret ? { secret } : {}),
    previous_secret_expires_at: r.previous_secret_expires_at?.toISOString() ?? null,
    credential_id: r.credential_id,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
    health,
  };
}

interface DeliveryRow {
  id: string;
  webhook_id: string;
  event: string;
  event_id: string;
  status: DeliveryResponse['status'];
  attempts: number;
  next_attempt_at: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  attempt_log: DeliveryResponse['attempt_log'];
}

function toDelivery(r: DeliveryRow): DeliveryResponse {
  return {
    id: r.id,
    webhook_id: r.webhook_id,
    event: r.event,
    event_id: r.event_id,
    status: r.status,
    attempts: r.attempts,
    next_attempt_at: r.status === 'pending' && r.next_attempt_at ? r.next_attempt_at.toISOString() : null,
    last_status_code: r.last_status_code,
    last_error: r.last_error,
    attempt_log: r.attempt_log,
    created_at: r.created_at.toISOString(),
  };
}

@Injectable()
export class WebhooksService {
  /** Webhooks a test request of this instance is being sent to (`test`). */
  private readonly testing = new Set<string>();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
    private readonly secrets: SecretBox,
    private readonly dispatcher: WebhookDispatcher,
    private readonly changes: WebhookChanges,
    private readonly audit: AuditService,
  ) {}

  async create(p: Principal, dto: CreateWebhookDto): Promise<WebhookResponse> {
    await this.assertTarget(dto.url);
    const id = newId();
    const secret = dto.secret ?? generateSecret();
    const sealed = await this.secrets.seal(secret, secretAad(p.tenantId, id));
    // In a transaction of its own, which marks an Idempotency-Key applied as it commits (claim-applied.ts).
    const [row]: WebhookRow[] = await this.db.transaction(async (m) => {
      // Counted under a lock of the tenant's registrations, so creations at once cannot pass the cap together.
      await m.query(`SELECT pg_advisory_xact_lock(hashtextextended('webhooks:' || $1, 0))`, [p.tenantId]);
      const [{ tenant, own, by_user: user }]: Array<{ tenant: number; own: number; by_user: number }> = await m.query(
        `SELECT count(*)::int AS tenant, (count(*) FILTER (WHERE ${ownerCredentialSql('credential_id')} = $2))::int AS own,
                (count(*) FILTER (WHERE user_id = $3))::int AS by_user
           FROM webhooks WHERE tenant_id = $1`,
        [p.tenantId, ownerCredential(p.credentialId), p.userId ?? null],
      );
      const max = this.config.WEBHOOKS_MAX_PER_TENANT;
      if (tenant >= max) throw ApiError.conflict('conflict', `The tenant has ${tenant} webhooks, the most it may have; delete one first`, { limit: max });
      // Any credential may register webhooks; one that is not an admin's cannot take the tenant's whole allowance.
      const mine = this.config.WEBHOOKS_MAX_PER_CREDENTIAL;
      if (!isAdmin(p) && own >= mine) {
        throw ApiError.conflict('conflict', `This credential has ${own} webhooks, the most a non-admin credential may have; delete one first`, { limit: mine });
      }
      const users = this.config.WEBHOOKS_MAX_PER_USER;
      if (user >= users) throw ApiError.conflict('conflict', `Your apps hold ${user} webhooks, the most one user's may have; delete one first`, { limit: users });
      const inserted: WebhookRow[] = await m.query(
        `INSERT INTO webhooks (tenant_id, id, url, events, type_filter, disabled, secret_sealed, credential_id, credential_scopes, user_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${WEBHOOK_COLUMNS}`,
        [p.tenantId, id, dto.url, dto.events, dto.type_filter ?? null, dto.disabled ?? false, sealed, p.credentialId, tokenScopesOf(p), p.userId ?? null],
      );
      await this.audit.record(
        { tenantId: p.tenantId, action: 'webhook.created', details: { actor: actorOf(p), webhook_id: id, host: hostOf(dto.url), events: dto.events } },
        m,
      );
      return inserted;
    });
    // Just registered: no delivery of it can exist yet.
    return toResponse(row, NO_DELIVERIES, secret);
  }

  /** A page of webhooks with their health, read for the whole page in one more statement. */
  async list(p: Principal, q: ListWebhooksQuery): Promise<WebhookList> {
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'webhooks');
    const rows: WebhookRow[] = await this.db.query(
      `SELECT ${WEBHOOK_COLUMNS} FROM webhooks
        WHERE tenant_id = $1 AND ${OWNED_BY(4)}
          AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))
          AND (NOT $7 OR ${FAILING('webhooks.id')})
        ORDER BY created_at DESC, id DESC LIMIT $6`,
      [p.tenantId, after?.createdAt ?? null, after?.id ?? null, ...ownerOf(p), limit + 1, q.health === 'failing'],
    );
    const { page: webhooks, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'webhooks');
    const health = await healthOf(this.db, p.tenantId, webhooks.map((r) => r.id));
    return { webhooks: webhooks.map((r) => toResponse(r, health.get(r.id) ?? NO_DELIVERIES)), next_cursor };
  }

  async get(p: Principal, id: string): Promise<WebhookResponse> {
    return this.withHealth(await this.find(p, id));
  }

  /**
   * One test request at a time per webhook (on this instance): each holds a connection of the
   * deliveries' agent for up to WEBHOOK_TIMEOUT_MS, and a caller looping on the route would
   * otherwise send a receiver as many signed requests at once as the rate limit lets through.
   */
  async test(p: Principal, id: string): Promise<WebhookTestResult> {
    const w = await this.find(p, id);
    if (this.testing.has(w.id)) throw ApiError.busy('A test request to this webhook is under way; send another once it has ended');
    this.testing.add(w.id);
    const sent = await this.dispatcher
      .ping({ tenantId: p.tenantId, webhookId: w.id, url: w.url, secretSealed: w.secret_sealed, previousSecretSealed: w.previous_secret_sealed })
      .finally(() => this.testing.delete(w.id));
    return { event_id: sent.eventId, id: sent.attemptId, status_code: sent.statusCode, duration_ms: sent.durationMs, error: sent.error, succeeded: succeeded(sent) };
  }

  /**
   * Changes only the fields given, in one statement: a PATCH that rewrote the others from what it
   * read would undo a concurrent PATCH of another field that was already acknowledged. The row is
   * locked first only to tell the audit log which fields changed.
   */
  async update(p: Principal, id: string, dto: UpdateWebhookDto): Promise<WebhookResponse> {
    if (dto.url !== undefined) await this.assertTarget(dto.url);
    const row = await this.db.transaction(async (m) => {
      const [before]: WebhookRow[] = await m.query(
        `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE tenant_id = $1 AND id = $2 AND ${OWNED_BY(3)} FOR NO KEY UPDATE`,
        [p.tenantId, id, ...ownerOf(p)],
      );
      if (!before) throw notFound();
      const [[after]]: [WebhookRow[], number] = await m.query(
        `UPDATE webhooks SET url = coalesce($3, url), events = coalesce($4, events),
                type_filter = CASE WHEN $5 THEN $6::text[] ELSE type_filter END, disabled = coalesce($7, disabled), updated_at = now()
          WHERE tenant_id = $1 AND id = $2 RETURNING ${WEBHOOK_COLUMNS}`,
        [p.tenantId, id, dto.url ?? null, dto.events ?? null, dto.type_filter !== undefined, dto.type_filter ?? null, dto.disabled ?? null],
      );
      const changed = changedFields(Object.fromEntries(AUDITED_FIELDS.map((f) => [f, [before[f], after[f]] as const])));
      if (changed.length) {
        await this.audit.record(
          {
            tenantId: p.tenantId,
            action: 'webhook.updated',
            details: { actor: actorOf(p), webhook_id: id, changed, ...(changed.includes('url') && { host: hostOf(after.url) }) },
          },
          m,
        );
      }
      return after;
    });
    await this.changes.announce(row.id);
    return this.withHealth(row);
  }

  /**
   * A new signing secret (given, or generated). The one it replaces keeps signing beside it for
   * `expire_previous_in` seconds (a day unless said), so receivers can take the new one without
   * refusing a delivery meanwhile; a rotation during that time drops the older one.
   */
  async rotateSecret(p: Principal, id: string, dto: RotateWebhookSecretDto): Promise<WebhookResponse> {
    const secret = dto.secret ?? generateSecret();
    const sealed = await this.secrets.seal(secret, secretAad(p.tenantId, id));
    const expireIn = dto.expire_previous_in ?? DEFAULT_PREVIOUS_SECRET_SECONDS;
    const row = await this.db.transaction(async (m) => {
      // In an UPDATE, the right-hand `secret_sealed` is the row's value before it.
      const [[rotated]]: [WebhookRow[], number] = await m.query(
        `UPDATE webhooks SET previous_secret_sealed = CASE WHEN $4 > 0 THEN secret_sealed END,
                previous_secret_expires_at = CASE WHEN $4 > 0 THEN now() + make_interval(secs => $4) END,
                secret_sealed = $3, updated_at = now()
          WHERE tenant_id = $1 AND id = $2 AND ${OWNED_BY(5)} RETURNING ${WEBHOOK_COLUMNS}`,
        [p.tenantId, id, sealed, expireIn, ...ownerOf(p)],
      );
      if (!rotated) throw notFound();
      await this.audit.record(
        { tenantId: p.tenantId, action: 'webhook.secret_rotated', details: { actor: actorOf(p), webhook_id: id, expire_previous_in: expireIn } },
        m,
      );
      return rotated;
    });
    await this.changes.announce(row.id);
    return this.withHealth(row, secret);
  }

  /** Removes the webhook with its deliveries; answers what it was. */
  async remove(p: Principal, id: string): Promise<WebhookResponse> {
    const current = await this.find(p, id);
    // Read before its deliveries go with it.
    const answer = await this.withHealth(current);
    await this.db.transaction(async (m) => {
      const [, deleted]: [unknown, number] = await m.query(`DELETE FROM webhooks WHERE tenant_id = $1 AND id = $2`, [p.tenantId, current.id]);
      // Gone already (a deletion at the same moment, which is audited and answered 200): 404, as a deletion after it gets.
      if (!deleted) throw notFound();
      await this.audit.record(
        { tenantId: p.tenantId, action: 'webhook.deleted', details: { actor: actorOf(p), webhook_id: current.id, host: hostOf(current.url) } },
        m,
      );
    });
    await this.changes.announce(current.id);
    return answer;
  }

  async deliveries(p: Principal, webhookId: string, q: DeliveriesQuery): Promise<DeliveryList> {
    const webhook = await this.find(p, webhookId);
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'deliveries');
    const rows = await this.deliveryRows(
      `d.tenant_id = $1 AND d.webhook_id = $2 AND ($3::text IS NULL OR d.status = $3)
       AND ($4::timestamptz IS NULL OR (d.created_at, d.id) < ($4, $5::uuid))
       ORDER BY d.created_at DESC, d.id DESC LIMIT $6`,
      [p.tenantId, webhook.id, q.status ?? null, after?.createdAt ?? null, after?.id ?? null, limit + 1],
    );
    const { page: deliveries, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'deliveries');
    return { deliveries: deliveries.map(toDelivery), next_cursor };
  }

  async delivery(p: Principal, webhookId: string, deliveryId: string): Promise<DeliveryResponse> {
    const webhook = await this.find(p, webhookId);
    const [row] = await this.deliveryRows(`d.tenant_id = $1 AND d.webhook_id = $2 AND d.id = $3`, [p.tenantId, webhook.id, deliveryId]);
    if (!row) throw deliveryNotFound();
    return toDelivery(row);
  }

  /**
   * Admin: attempts a delivery at once, whatever its state, as an extra attempt: its status and
   * next scheduled attempt stay as they are unless it succeeds (WebhookDispatcher). Not while an
   * attempt holds its lease (under way, or queued to start, on some instance): clearing the lease
   * would let another instance send it at the same time. Not for a disabled webhook either,
   * whose deliveries are not attempted.
   */
  async retry(p: Principal, webhookId: string, deliveryId: string): Promise<DeliveryResponse> {
    const webhook = await this.find(p, webhookId);
    // The webhook is checked in the statement too: one disabled since `find` holds the retry back.
    // The retry takes the lease for its own attempt, here or (on an instance that does not
    // deliver) through the queue, so that a second retry at the same moment is 409 rather than a
    // 202 that attempts nothing.
    // In a transaction, which marks an Idempotency-Key applied as it commits (claim-applied.ts):
    // a retry that took the lease is never sent again for the same key. One that took nothing
    // is refused inside it, so that the key stays free (a busy 409 is not kept).
    const lease = await this.db.transaction(async (m) => {
      const [rows, updated]: [Array<{ lease: string }>, number] = await m.query(
        `UPDATE webhook_deliveries d SET updated_at = now(), lease_until = now() + make_interval(secs => $4::float8 / 1000)
           FROM webhooks w
          WHERE d.tenant_id = $1 AND d.webhook_id = $2 AND d.id = $3 AND (d.lease_until IS NULL OR d.lease_until < now())
            AND w.tenant_id = d.tenant_id AND w.id = d.webhook_id AND NOT w.disabled AND ${SENDABLE}
          RETURNING d.lease_until::text AS lease`,
        [p.tenantId, webhook.id, deliveryId, this.dispatcher.leaseMs],
      );
      if (!updated) throw await this.whyNotRetried(m, p.tenantId, webhook.id, deliveryId);
      return rows[0].lease;
    });
    this.dispatcher.attemptLeased({ tenantId: p.tenantId, deliveryId, webhookId: webhook.id, lease });
    const [row] = await this.deliveryRows(`d.tenant_id = $1 AND d.id = $2`, [p.tenantId, deliveryId]);
    return toDelivery(row);
  }

  private async whyNotRetried(m: EntityManager, tenantId: string, webhookId: string, deliveryId: string): Promise<ApiError> {
    const [found]: Array<{ disabled: boolean; sendable: boolean }> = await m.query(
      `SELECT w.disabled, ${SENDABLE} AS sendable
         FROM webhook_deliveries d JOIN webhooks w ON w.tenant_id = d.tenant_id AND w.id = d.webhook_id
        WHERE d.tenant_id = $1 AND d.webhook_id = $2 AND d.id = $3`,
      [tenantId, webhookId, deliveryId],
    );
    if (!found) return deliveryNotFound();
    if (found.disabled) return ApiError.conflict('conflict', 'The webhook is disabled: enable it (PATCH disabled: false) to retry its deliveries');
    if (!found.sendable) return ApiError.conflict('conflict', 'The event of this delivery is no longer kept (EVENT_RETENTION_DAYS): there is no body to send');
    // Else its lease was held when the retry looked (and may have ended since: the retry can be sent again).
    return ApiError.busy('An attempt of this delivery is under way or about to start; retry once it has ended');
  }

  private deliveryRows(where: string, params: unknown[]): Promise<DeliveryRow[]> {
    return this.db.query(
      `SELECT d.id, d.webhook_id, d.event, d.event_id, d.status, d.attempts, d.next_attempt_at, d.last_status_code, d.last_error, d.attempt_log, d.created_at
         FROM webhook_deliveries d WHERE ${where}`,
      params,
    );
  }

  private async withHealth(row: WebhookRow, secret?: string): Promise<WebhookResponse> {
    const health = await healthOf(this.db, row.tenant_id, [row.id]);
    return toResponse(row, health.get(row.id) ?? NO_DELIVERIES, secret);
  }

  private async find(p: Principal, id: string): Promise<WebhookRow> {
    const [row]: WebhookRow[] = await this.db.query(
      `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE tenant_id = $1 AND id = $2 AND ${OWNED_BY(3)}`,
      [p.tenantId, id, ...ownerOf(p)],
    );
    if (!row) throw notFound();
    return row;
  }

  private async assertTarget(url: string): Promise<void> {
    const allowPrivate = this.config.allowPrivateWebhookTargets;
    const problem = urlProblem(url, allowPrivate);
    if (problem) throw validationError([{ field: 'url', message: problem }]);
    try {
      await assertTargetAddress(url, allowPrivate);
    } catch (err) {
      if (err instanceof TargetRefused) throw validationError([{ field: 'url', message: err.message }]);
      throw err;
    }
  }
}
