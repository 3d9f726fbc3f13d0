/**
 * Owns the audit log: `record` appends an event (consent given, grant revoked, a key, OAuth
 * client, webhook or tenant made, changed or ended, …) for a tenant; `GET /audit` (admin) lists
 * them newest first, or oldest first in transaction order for an export, by action if asked. A
 * change is recorded in the transaction that makes it, so one rolled back leaves no row; and by
 * who made it (`actorOf`), never with a secret.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { ownerCredential, type Principal } from '../auth/principal';
import { canonicalJson } from '../common/canonical-json';
import { newId } from '../common/ids';
import { decodeTransactionCursor, decodeCursor, encodeTransactionCursor, pageOf } from '../common/pagination';
import { AuditAction, AuditEvent, AuditList, ListAuditQuery } from './audit.dto';

interface AuditRow {
  id: string;
  action: AuditAction;
  client_id: string | null;
  user_id: string | null;
  grant_id: string | null;
  details: Record<string, unknown>;
  created_at: Date;
}

/**
 * Who made a change, as `details.actor`: the credential, named by what an admin can look up (a
 * key's id, a user's, a client's), never by anything a secret is derived from (a client token's
 * credential carries its secret's hash tag, so only the client is named). `bootstrap`: the
 * server's first key, made by nobody; `open_registration`: a client anyone registered.
 */
export interface AuditActor {
  kind: 'api_key' | 'user' | 'oauth_client' | 'bootstrap' | 'open_registration';
  id: string | null;
  /** The grant a user's token stands for. */
  grant_id?: string;
  /** The credential's tenant, when it is not the one whose log holds the row. */
  tenant_id?: string;
}

export const BOOTSTRAP_ACTOR: AuditActor = { kind: 'bootstrap', id: null };

/** Whoever registered a client through open registration (RFC 7591): anyone, unauthenticated. */
export const OPEN_REGISTRATION_ACTOR: AuditActor = { kind: 'open_registration', id: null };

export function actorOf(p: Principal): AuditActor {
  if (p.kind === 'api_key') return { kind: 'api_key', id: p.credentialId };
  if (p.userId) return { kind: 'user', id: p.userId, grant_id: p.credentialId };
  return { kind: 'oauth_client', id: ownerCredential(p.credentialId).replace(/^client:/, '') };
}

/**
 * `details.changed` of an update: the names of the fields whose value is not the one it was, by
 * their canonical JSON (a jsonb value comes back with its keys in PostgreSQL's order, not the
 * order they were sent in). `fields`: each name with its value before and after.
 */
export function changedFields(fields: Record<string, readonly [before: unknown, after: unknown]>): string[] {
  return Object.entries(fields)
    .filter(([, [before, after]]) => canonicalJson(before) !== canonicalJson(after))
    .map(([name]) => name);
}

/** What a user's security page lists of the rows about them. */
const USER_SECURITY_ACTIONS: AuditAction[] = ['auth.grant.created', 'auth.grant.revoked', 'user.created', 'user.updated'];

const toEvent = (r: AuditRow): AuditEvent => ({ ...r, created_at: r.created_at.toISOString() });

@Injectable()
export class AuditService {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** Appends an event; within `m`'s transaction when given, so it commits with what it records. */
  async record(
    e: { tenantId: string; action: AuditAction; clientId?: string; userId?: string; grantId?: string; details?: Record<string, unknown> },
    m: EntityManager = this.db.manager,
  ): Promise<void> {
    await m.query(
      `INSERT INTO audit_events (tenant_id, id, action, client_id, user_id, grant_id, details) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [e.tenantId, newId(), e.action, e.clientId ?? null, e.userId ?? null, e.grantId ?? null, e.details ?? {}],
    );
  }

  /**
   * A user's own recent events (their account's security page): apps given or refused access,
   * and their account made or changed (a new password, a new role), whoever did it.
   */
  async forUser(tenantId: string, userId: string, limit = 20): Promise<AuditEvent[]> {
    const rows: AuditRow[] = await this.db.query(
      `SELECT id, action, client_id, user_id, grant_id, details, created_at FROM audit_events
        WHERE tenant_id = $1 AND user_id = $2 AND action = ANY($4::text[]) ORDER BY created_at DESC, id DESC LIMIT $3`,
      [tenantId, userId, limit, USER_SECURITY_ACTIONS],
    );
    return rows.map(toEvent);
  }

  async list(p: Principal, q: ListAuditQuery): Promise<AuditList> {
    if (q.order === 'asc') return this.exportPage(p, q);
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'audit');
    const rows: AuditRow[] = await this.db.query(
      `SELECT id, action, client_id, user_id, grant_id, details, created_at FROM audit_events
        WHERE tenant_id = $1 AND ($2::text IS NULL OR action = $2) AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $5`,
      [p.tenantId, q.action ?? null, after?.createdAt ?? null, after?.id ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'audit');
    return { events: page.map(toEvent), next_cursor };
  }

  /**
   * Oldest first in transaction order (`order=asc`). Rows come in the order of their transactions' ids
   * (and of writing within one), and only rows of transactions older than every one still running
   * (`pg_snapshot_xmin`): a transaction given its id earlier can commit after later ones did, and
   * a reader that had passed its place would never see its rows. Those listed are final, so the
   * cursor of the last one is where the log goes on, now or later.
   */
  private async exportPage(p: Principal, q: ListAuditQuery): Promise<AuditList> {
    const after = decodeTransactionCursor(q.cursor, 'audit_export');
    // Named apart from the columns: ORDER BY a name sorts by the output column, here the text.
    const rows: Array<AuditRow & { position_txid: string; position_seq: string }> = await this.db.query(
      `SELECT id, action, client_id, user_id, grant_id, details, created_at, txid::text AS position_txid, seq::text AS position_seq FROM audit_events
        WHERE tenant_id = $1 AND ($2::text IS NULL OR action = $2) AND txid < pg_snapshot_xmin(pg_current_snapshot())
          AND ($3::xid8 IS NULL OR (txid, seq) > ($3::xid8, $4::bigint))
        ORDER BY txid, seq LIMIT $5`,
      [p.tenantId, q.action ?? null, after?.txid ?? null, after?.seq ?? null, q.limit ?? 50],
    );
    const last = rows.at(-1);
    return {
      events: rows.map(({ position_txid: _t, position_seq: _s, ...r }) => toEvent(r)),
      next_cursor: last ? encodeTransactionCursor({ txid: last.position_txid, seq: last.position_seq }, 'audit_export') : (q.cursor ?? null),
    };
  }
}
