/**
 * Apps a tenant's admins block for its users (`/auth/blocked-clients`): an openly registered
 * client (RFC 7591), which any user may otherwise connect. Blocking one ends every grant it holds
 * from the tenant's users (their tokens refused from the next request), and its consent and device
 * pages then refuse them ("blocked by your workspace's admins"); unblocking lets them connect it
 * again. The tenant's own clients are changed or deleted instead (/auth/clients), and another
 * tenant's serve none of this tenant's users already.
 *
 * A consent at the same moment as the block cannot slip a grant in after it: both lock the
 * client's row (recordConsent shares it, the block takes it), so the consent either comes first
 * and its grant is ended with the others, or comes after and finds the app blocked.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { actorOf, AuditService } from '../audit/audit.service';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { decodeCursor, PageQuery, pageOf } from '../common/pagination';
import type { Client } from 'oidc-provider';
import { servesUser } from './client-registration';
import { BlockedClient, BlockedClientList, isClientId } from './clients.dto';
import { deleteGrant } from './oidc-adapter';
import { OAuthTokenCache } from './oauth-token-cache';

/** Whether the tenant's admins blocked the client for its users. */
export async function isBlockedFor(db: DataSource | EntityManager, tenantId: string, clientId: string): Promise<boolean> {
  const rows: unknown[] = await db.query(`SELECT 1 FROM blocked_clients WHERE tenant_id = $1 AND client_id = $2`, [tenantId, clientId]);
  return rows.length > 0;
}

/**
 * Why `user` may not connect the client, for the consent and device pages: it serves another
 * tenant's users (`blocked` false), or the user's tenant blocked it; undefined when they may.
 */
export async function appRefusal(db: DataSource, client: Client | undefined, clientId: string, user: { tenant_id: string }): Promise<{ blocked: boolean } | undefined> {
  if (!servesUser(client, user)) return { blocked: false };
  return (await isBlockedFor(db, user.tenant_id, clientId)) ? { blocked: true } : undefined;
}

interface BlockedRow {
  client_id: string;
  client_name: string | null;
  created_at: Date;
}

const toBlocked = (r: BlockedRow): BlockedClient => ({ client_id: r.client_id, client_name: r.client_name, created_at: r.created_at.toISOString() });

const noSuchApp = () => ApiError.notFound('not_found', 'No such openly registered app');

const BLOCKED_COLUMNS = `b.client_id, c.payload->>'client_name' AS client_name, b.created_at`;
const BLOCKED_FROM = `blocked_clients b LEFT JOIN oidc_models c ON c.model = 'Client' AND c.id = b.client_id`;

async function blockedRow(m: EntityManager, tenantId: string, clientId: string): Promise<BlockedRow | undefined> {
  const [row]: BlockedRow[] = await m.query(`SELECT ${BLOCKED_COLUMNS} FROM ${BLOCKED_FROM} WHERE b.tenant_id = $1 AND b.client_id = $2`, [tenantId, clientId]);
  return row;
}

@Injectable()
export class BlockedClientsService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly audit: AuditService,
    private readonly tokenCache: OAuthTokenCache,
  ) {}

  async list(p: Principal, page: PageQuery): Promise<BlockedClientList> {
    const limit = page.limit ?? 50;
    const after = decodeCursor(page.cursor, 'blocked_clients', isClientId);
    const rows: Array<BlockedRow & { id: string }> = await this.db.query(
      `SELECT ${BLOCKED_COLUMNS}, b.client_id AS id FROM ${BLOCKED_FROM}
        WHERE b.tenant_id = $1 AND ($2::timestamptz IS NULL OR (b.created_at, b.client_id) < ($2, $3::text))
        ORDER BY b.created_at DESC, b.client_id DESC LIMIT $4`,
      [p.tenantId, after?.createdAt ?? null, after?.id ?? null, limit + 1],
    );
    const { page: blocked, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'blocked_clients');
    return { blocked_clients: blocked.map(toBlocked), next_cursor };
  }

  /** Blocks an openly registered client for the tenant's users (idempotent) and ends their grants of it. */
  async block(p: Principal, clientId: string): Promise<BlockedClient> {
    const { blocked, revoked } = await this.db.transaction(async (m) => {
      const [client]: Array<{ tenant_id: string | null; client_name: string | null }> = await m.query(
        `SELECT payload->>'tenant_id' AS tenant_id, payload->>'client_name' AS client_name FROM oidc_models WHERE model = 'Client' AND id = $1 FOR UPDATE`,
        [clientId],
      );
      if (!client || (client.tenant_id !== null && client.tenant_id !== p.tenantId)) throw noSuchApp();
      if (client.tenant_id !== null) {
        throw ApiError.conflict('conflict', 'This is one of the tenant\'s own clients: change its scope or delete it at /auth/clients instead');
      }
      const inserted: Array<{ created_at: Date }> = await m.query(
        `INSERT INTO blocked_clients (tenant_id, client_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING created_at`,
        [p.tenantId, clientId],
      );
      const grants: Array<{ id: string; user_id: string }> = await m.query(
        `SELECT g.id, g.payload->>'accountId' AS user_id FROM oidc_models g JOIN users u ON u.id::text = g.payload->>'accountId'
          WHERE g.model = 'Grant' AND g.payload->>'clientId' = $1 AND u.tenant_id = $2`,
        [clientId, p.tenantId],
      );
      // A grant a revocation at the same moment deleted first is that revocation's to record.
      let revoked = 0;
      for (const grant of grants) {
        if (!(await deleteGrant(m, grant.id))) continue;
        revoked++;
        await this.audit.record({ tenantId: p.tenantId, action: 'auth.grant.revoked', clientId, userId: grant.user_id, grantId: grant.id, details: { by: 'client_blocked' } }, m);
      }
      if (inserted[0]) {
        await this.audit.record({ tenantId: p.tenantId, action: 'auth.client.blocked', clientId, details: { actor: actorOf(p), client_name: client.client_name, grants_revoked: revoked } }, m);
      }
      return { blocked: toBlocked((await blockedRow(m, p.tenantId, clientId))!), revoked };
    });
    if (revoked) await this.tokenCache.invalidate();
    return blocked;
  }

  async unblock(p: Principal, clientId: string): Promise<BlockedClient> {
    return this.db.transaction(async (m) => {
      const row = await blockedRow(m, p.tenantId, clientId);
      const [, deleted]: [unknown, number] = await m.query(`DELETE FROM blocked_clients WHERE tenant_id = $1 AND client_id = $2`, [p.tenantId, clientId]);
      if (!row || !deleted) throw ApiError.notFound('not_found', 'This app is not blocked');
      await this.audit.record({ tenantId: p.tenantId, action: 'auth.client.unblocked', clientId, details: { actor: actorOf(p), client_name: row.client_name } }, m);
      return toBlocked(row);
    });
  }
}
