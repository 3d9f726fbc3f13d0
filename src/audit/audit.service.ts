/**
 * Owns the audit log: `record` appends an event (consent given, grant revoked, …) for a tenant;
 * `GET /audit` (admin) lists them newest first, by action if asked.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { Principal } from '../auth/principal';
import { newId } from '../common/ids';
import { decodeCursor, pageOf } from '../common/pagination';
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

  /** A user's own recent events (their account's security page). */
  async forUser(tenantId: string, userId: string, limit = 20): Promise<AuditEvent[]> {
    const rows: AuditRow[] = await this.db.query(
      `SELECT id, action, client_id, user_id, grant_id, details, created_at FROM audit_events
        WHERE tenant_id = $1 AND user_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3`,
      [tenantId, userId, limit],
    );
    return rows.map(toEvent);
  }

  async list(p: Principal, q: ListAuditQuery): Promise<AuditList> {
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
}
