/**
 * A user's OAuth grants (SPEC 5.8) and provider sessions: what the account pages list, a page at
 * a time, newest first, and revoke; and a client's grants from one tenant's users, for its admins. Revoking a grant deletes it with every token and code it
 * issued (at once: each API request reads its token's row; a used refresh token stays a
 * tombstone, so presenting it is still `token_reuse_detected`) and leaves an
 * `auth.grant.revoked` audit row.
 *
 * Signing out everywhere ends the provider's sessions and increments the user's `session_epoch`,
 * which voids every account-pages cookie set until then (account-session.ts).
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Grant } from 'oidc-provider';
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

/** A grant as its client's admins see it (`/auth/clients/{client_id}/grants`): with the user who gave it. */
export interface ClientGrantView extends GrantView {
  user_id: string;
}

export interface SessionView {
  /** A digest of the session's id (SESSION_VIEW_ID). */
  id: string;
  signed_in_at: string;
  expires_at: string | null;
}

/**
 * When a grant was issued, in whole seconds; lists are newest first. Migration 6400's index
 * (oidc_models_account_grants) and 7100's (oidc_models_client_grants) are on this very
 * expression, which must stay equal to it.
 */
const GRANT_IAT = `COALESCE((payload->>'iat')::bigint, 0)`;

/**
 * The grant's user as a uuid, to look up by the users' id index (a text comparison would read
 * every user of the tenant for each grant); null, matching no user, for an account id that is no
 * user id, which a cast would make a 500. Lower case only, as `users.id::text` prints.
 */
const GRANT_USER_ID = `(CASE WHEN oidc_models.payload->>'accountId' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN oidc_models.payload->>'accountId' END)::uuid`;

/** When a session signed in (a new sign-in in it moves it), in whole seconds; as GRANT_IAT, migration 6400 indexes this very expression. */
const SESSION_SIGNED_IN = `COALESCE((payload->>'loginTs')::bigint, (payload->>'iat')::bigint, 0)`;

/**
 * The id a session is shown by, and paged by: a digest of its id, base64url, since the id itself
 * is the browser's `_session` cookie, which would sign in as the user. Computed in SQL, where the
 * list is ordered and a cursor's position compared; compared as bytes ("C"), as a cursor is.
 */
const SESSION_VIEW_ID = `translate(rtrim(encode(sha256(convert_to('session-view:' || id, 'UTF8')), 'base64'), '='), '+/', '-_') COLLATE "C"`;
const isSessionViewId = (id: string) => /^[\w-]{43}$/.test(id);

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

  /** A page of the user's grants (one per app), newest first: the account pages' list, and their admins' (`/users/{id}/grants`). */
  async page(userId: string, limit = 50, cursor?: string): Promise<{ grants: GrantView[]; next_cursor: string | null }> {
    const position = decodeSecondsCursor(cursor, 'grants', isClientId);
    const rows: Array<{ id: string; iat: string }> = await this.db.query(
      `SELECT id, ${GRANT_IAT} AS iat FROM oidc_models
        WHERE model = 'Grant' AND payload->>'accountId' = $1 AND (expires_at IS NULL OR expires_at > now())
          AND ($2::bigint IS NULL OR (${GRANT_IAT}, id) < ($2, $3::text))
        ORDER BY ${GRANT_IAT} DESC, id DESC LIMIT $4`,
      [userId, position?.seconds ?? null, position?.id ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => new Date(Number(r.iat) * 1000), 'grants');
    // A grant revoked since the page was read is left out (its page is one shorter).
    const views = await Promise.all(page.map((r) => this.get(userId, r.id)));
    return { grants: views.filter((v): v is GrantView => v !== undefined), next_cursor };
  }

  /**
   * A page of one client's grants given by users of `tenantId`, newest first: which of the
   * tenant's users connected the app (`/auth/clients/{client_id}/grants`; the caller may read
   * the client). An openly registered client serves every tenant's users; the others' grants are
   * their tenants' to see, so each listing keeps to its own tenant's, whichever client.
   */
  async clientPage(tenantId: string, clientId: string, limit = 50, cursor?: string): Promise<{ grants: ClientGrantView[]; next_cursor: string | null }> {
    const position = decodeSecondsCursor(cursor, 'client_grants', isClientId);
    // The user's tenant is tested grant by grant, as a boolean subquery: PostgreSQL can know
    // neither how many grants a client holds (its indexes are partial, their statistics unused)
    // nor how many are the tenant's, and planned as a join (or `= $2`) it guessed so few that it
    // read and sorted every grant of the client for a page; a subquery it takes to keep half, so
    // a page walks migration 7100's index in its order and stops at the page's end.
    const rows: Array<{ id: string; user_id: string; iat: string }> = await this.db.query(
      `SELECT id, payload->>'accountId' AS user_id, ${GRANT_IAT} AS iat FROM oidc_models
        WHERE model = 'Grant' AND payload->>'clientId' = $1 AND (expires_at IS NULL OR expires_at > now())
          AND ($3::bigint IS NULL OR (${GRANT_IAT}, id) < ($3, $4::text))
          AND (SELECT tenant_id = $2 FROM users WHERE id = ${GRANT_USER_ID})
        ORDER BY ${GRANT_IAT} DESC, id DESC LIMIT $5`,
      [clientId, tenantId, position?.seconds ?? null, position?.id ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => new Date(Number(r.iat) * 1000), 'client_grants');
    const provider = await this.oidc.get();
    const client = await provider.Client.find(clientId);
    // As page(): a grant revoked since the page was read is left out.
    const views = await Promise.all(
      page.map(async (r): Promise<ClientGrantView | undefined> => {
        const grant = await provider.Grant.find(r.id);
        if (!grant || grant.clientId !== clientId || grant.accountId !== r.user_id) return undefined;
        const { id, client_id, client_name, scope, created_at, expires_at } = this.view(r.id, grant, client?.clientName);
        return { id, client_id, client_name, user_id: r.user_id, scope, created_at, expires_at };
      }),
    );
    return { grants: views.filter((v): v is ClientGrantView => v !== undefined), next_cursor };
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
    return this.view(id, grant, client?.clientName);
  }

  private view(id: string, grant: Grant, clientName: string | undefined): GrantView {
    const scope = [grant.getOIDCScope(), grant.getResourceScope(this.config.baseUrl)].filter(Boolean).join(' ');
    return {
      id,
      client_id: grant.clientId!,
      client_name: clientName ?? grant.clientId!,
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

  /**
   * A page of the provider's sessions of the user, the sign-ins apps use, newest sign-in first;
   * the account pages' own cookie is stored nowhere to list. The seconds bound the index's range
   * alone (`<=`); the view id, computed, only orders the sessions of one second.
   */
  async sessions(userId: string, limit = 50, cursor?: string): Promise<{ sessions: SessionView[]; next_cursor: string | null }> {
    const position = decodeSecondsCursor(cursor, 'sessions', isSessionViewId);
    const rows: Array<{ id: string; signed_in: string; exp: number | null }> = await this.db.query(
      `SELECT id, signed_in, exp FROM (
          SELECT ${SESSION_VIEW_ID} AS id, ${SESSION_SIGNED_IN} AS signed_in, (payload->>'exp')::bigint::float8 AS exp FROM oidc_models
           WHERE model = 'Session' AND payload->>'accountId' = $1 AND (expires_at IS NULL OR expires_at > now())
             AND ($2::bigint IS NULL OR ${SESSION_SIGNED_IN} <= $2)
        ) s
        WHERE $2::bigint IS NULL OR signed_in < $2 OR id < $3::text
        ORDER BY signed_in DESC, id DESC LIMIT $4`,
      [userId, position?.seconds ?? null, position?.id ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => new Date(Number(r.signed_in) * 1000), 'sessions');
    return { sessions: page.map((r) => ({ id: r.id, signed_in_at: iso(Number(r.signed_in))!, expires_at: iso(r.exp) })), next_cursor };
  }

  /** Sign out everywhere: every provider session of the user ends, and every account-pages cookie (apps keep their grants). */
  async endSessions(user: Pick<UserRow, 'id' | 'tenant_id'>): Promise<number> {
    return this.db.transaction((m) => endSignIns(m, user.tenant_id, user.id));
  }
}
