/**
 * A user's OAuth grants (SPEC 5.8) and provider sessions: what the account pages list and
 * revoke. Revoking a grant deletes it with every token and code it issued (at once: each API
 * request reads its token's row; a used refresh token stays a tombstone, so presenting it is
 * still `token_reuse_detected`) and leaves an `auth.grant.revoked` audit row.
 *
 * Signing out everywhere ends the provider's sessions and increments the user's `session_epoch`,
 * which voids every account-pages cookie set until then (account-session.ts).
 */
import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AuditActor, AuditService } from '../audit/audit.service';
import { decodeSecondsCursor, pageOf } from '../common/pagination';
import { AppConfig } from '../config/app-config';
import { endSignIns, type UserRow } from '../users/users.service';
import { isClientId } from './clients.dto';
import { deleteGrant } from './oidc-adapter';
import { OAuthTokenCache } from './oauth-token-cache';
import { OidcProvider } from './oidc-provider';

export interface GrantView {
  id: string;
  client_id: string;
  client_name: string;
  scope: string;
  created_at: string;
  expires_at: string | null;
}

export interface SessionView {
  /** A digest of the session's id: the id itself is the browser's `_session` cookie, which would sign in as the user. */
  id: string;
  signed_in_at: string;
  expires_at: string | null;
}

const sessionViewId = (sessionId: string) => createHash('sha256').update(`session-view:${sessionId}`).digest('base64url');

/** When a grant was issued, in whole seconds; lists are newest first. */
const GRANT_IAT = `COALESCE((payload->>'iat')::bigint, 0)`;

const iso = (epochSeconds: unknown) => (typeof epochSeconds === 'number' ? new Date(epochSeconds * 1000).toISOString() : null);

@Injectable()
export class GrantsService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly oidc: OidcProvider,
    private readonly audit: AuditService,
    private readonly config: AppConfig,
    private readonly tokenCache: OAuthTokenCache,
  ) {}

  /** Every grant of the user, newest first: the account pages' list (one grant per app). */
  async list(userId: string): Promise<GrantView[]> {
    return (await this.page(userId, null)).grants;
  }

  /** A page of the user's grants, newest first (`limit` null: all of them). */
  async page(userId: string, limit: number | null = 50, cursor?: string): Promise<{ grants: GrantView[]; next_cursor: string | null }> {
    const position = decodeSecondsCursor(cursor, 'grants', isClientId);
    const rows: Array<{ id: string; iat: string }> = await this.db.query(
      `SELECT id, ${GRANT_IAT} AS iat FROM oidc_models
        WHERE model = 'Grant' AND payload->>'accountId' = $1 AND (expires_at IS NULL OR expires_at > now())
          AND ($2::bigint IS NULL OR (${GRANT_IAT}, id) < ($2, $3::text))
        ORDER BY ${GRANT_IAT} DESC, id DESC LIMIT $4`,
      [userId, position?.seconds ?? null, position?.id ?? null, limit === null ? null : limit + 1],
    );
    const { page, next_cursor } = limit === null ? { page: rows, next_cursor: null } : pageOf(rows, limit, (r) => new Date(Number(r.iat) * 1000), 'grants');
    // A grant revoked since the page was read is left out (its page is one shorter).
    const views = await Promise.all(page.map((r) => this.get(userId, r.id)));
    return { grants: views.filter((v): v is GrantView => v !== undefined), next_cursor };
  }

  /** Display names of clients by id, for activity lists; a client gone since shows its id. */
  async clientNames(clientIds: Array<string | null>): Promise<Map<string, string>> {
    const provider = await this.oidc.get();
    const ids = [...new Set(clientIds.filter((id): id is string => !!id))];
    const clients = await Promise.all(ids.map((id) => provider.Client.find(id)));
    return new Map(ids.map((id, n) => [id, clients[n]?.clientName ?? id]));
  }

  async get(userId: string, id: string): Promise<GrantView | undefined> {
    const provider = await this.oidc.get();
    const grant = await provider.Grant.find(id);
    if (!grant || grant.accountId !== userId) return undefined;
    const client = await provider.Client.find(grant.clientId!);
    const scope = [grant.getOIDCScope(), grant.getResourceScope(this.config.baseUrl)].filter(Boolean).join(' ');
    return {
      id,
      client_id: grant.clientId!,
      client_name: client?.clientName ?? grant.clientId!,
      scope,
      created_at: iso(grant.iat)!,
      expires_at: iso(grant.exp),
    };
  }

  /**
   * Revokes the user's grant (`by` the user, or an admin: `actor`): the grant as it was; undefined
   * when there is no such grant of theirs, also when a revocation at the same time (another click,
   * the app at the revocation endpoint) deleted it first: that one audits it, so a grant revoked in
   * a race gets one `auth.grant.revoked` row, not one each. The row is written in the deletion's
   * transaction: a revocation whose row cannot be written does not happen (a 500 that had
   * revoked the grant left no trace, and its retry a 404).
   */
  async revoke(user: Pick<UserRow, 'id' | 'tenant_id'>, id: string, by: string, actor?: AuditActor): Promise<GrantView | undefined> {
    const grant = await this.get(user.id, id);
    if (!grant) return undefined;
    const details = { by, ...(actor && { actor }) };
    const revoked = await this.db.transaction(async (m) => {
      if (!(await deleteGrant(m, id))) return false;
      await this.audit.record({ tenantId: user.tenant_id, action: 'auth.grant.revoked', clientId: grant.client_id, userId: user.id, grantId: id, details }, m);
      return true;
    });
    if (!revoked) return undefined;
    await this.tokenCache.invalidate();
    return grant;
  }

  /** The provider's sessions, the sign-ins apps use; the account pages' own cookie is stored nowhere to list. */
  async sessions(userId: string): Promise<SessionView[]> {
    const rows: Array<{ id: string; payload: { loginTs?: number; iat?: number; exp?: number } }> = await this.db.query(
      `SELECT id, payload FROM oidc_models WHERE model = 'Session' AND payload->>'accountId' = $1 AND (expires_at IS NULL OR expires_at > now())`,
      [userId],
    );
    return rows.map((r) => ({ id: sessionViewId(r.id), signed_in_at: iso(r.payload.loginTs ?? r.payload.iat)!, expires_at: iso(r.payload.exp) }));
  }

  /** Sign out everywhere: every provider session of the user ends, and every account-pages cookie (apps keep their grants). */
  async endSessions(user: Pick<UserRow, 'id' | 'tenant_id'>): Promise<number> {
    return this.db.transaction((m) => endSignIns(m, user.tenant_id, user.id));
  }
}
