/**
 * OAuth clients as admins manage them (/auth/clients): registration, listing, reading, updating,
 * deletion and secret rotation. A client belongs to the tenant an admin registered it for, and that
 * tenant's admins manage it. An openly registered client (RFC 7591) has no tenant; the root
 * tenant's admins manage those, as the operators of the server whose open registration made
 * them (else nobody could remove an abusive one, or one whose secret leaked). Anyone else gets
 * 404 `not_found`. A secret is shown once: at registration, or by the rotation that made it.
 *
 * Deleting a client ends everything it holds, in one transaction: its grants (each audited as
 * `auth.grant.revoked` by `client_deleted`, in the tenant of the user who gave it) with every
 * token and code they issued, its client-credentials tokens, pending device codes, registration
 * access token, sign-ins in progress and its place in browser sessions. Its tokens are 401 from
 * the next request on every instance: the OAuth token cache's generation is bumped.
 *
 * Rotation writes the new secret through the provider's adapter, which seals it as it sealed the
 * first; the provider reads a client from storage on every use, so the old secret fails at once.
 * The client's client-credentials tokens end with it (the old secret alone was enough to get
 * them, so a leaked secret may have), also one a request in flight saves after the rotation
 * (client-secret-claim.ts); the grants users gave stay. With `expire_previous_in`, the old secret
 * is kept (sealed too) as the previous one and keeps authenticating beside the new one until
 * then (previous-client-secret.ts), its tokens and what they started with it; at that moment they
 * end as they would have at the rotation. The rules are the webhooks' own (webhooks.service.ts):
 * one previous secret at a time, so a rotation during an overlap ends the older secret at once.
 *
 * An update changes where the client lives and what it may ask for (name, redirect URIs, scope,
 * descriptive URIs), checked as a registration is, and keeps its grants. The provider re-reads a
 * client from storage on every use (its in-process cache is keyed by the stored metadata's hash),
 * so every instance sees the change from the next request. A user's grant never gives more than
 * the client may now ask for: scopes taken away leave every grant of the client (not refused, so
 * a scope given back is asked for again), which the tokens they issued follow at once (their
 * cached resolutions are dropped); codes and sign-ins in progress for a redirect URI or a scope
 * taken away end. Grants are narrowed, not revoked, so no grant action is recorded. Moving a
 * `private_key_jwt` client's `jwks_uri` is that client's rotation: its client-credentials tokens
 * end as a rotated secret's do.
 *
 * Each registration, update, deletion and rotation is audited (`auth.client.created`, `.updated`
 * with the fields whose value changed, `.deleted`, `.secret_rotated`) in the transaction that
 * makes it, in the log of the admin's tenant (the root tenant's, for an openly registered client),
 * naming the admin's credential and never a secret.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { randomBytes } from 'node:crypto';
import type { Client, Provider } from 'oidc-provider';
import { DataSource, EntityManager } from 'typeorm';
import { actorOf, AuditService, changedFields } from '../audit/audit.service';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { isId } from '../common/ids';
import { decodeSecondsCursor, pageOf } from '../common/pagination';
import { validationError } from '../common/validation';
import { AppConfig } from '../config/app-config';
import {
  ClientRegistration,
  isClientId,
  SECRETLESS_AUTH_METHODS,
  OAuthClient,
  OAuthClientList,
  RegisteredClient,
  RegisterClientDto,
  RotateClientSecretDto,
  RotatedClient,
  UpdateClientDto,
} from './clients.dto';
import { grantResponseMismatch, repeatedLists, SET_LISTS, URI_LISTS, uselessClientProblem } from './client-registration';
import { clientCredentialId, newClientSecret, proofOf, SECRET_CLAIM, secretClaim } from './client-secret-claim';
import { OAuthTokenCache } from './oauth-token-cache';
import { inTransaction, PREVIOUS_SECRET, PREVIOUS_SECRET_ENDS, underConnectionLock } from './oidc-adapter';
import { OidcProvider } from './oidc-provider';
import { registeredScopes, scopeWords } from './scopes';

/** The provider's storage of clients (oidc-adapter.ts): `find` opens the sealed secret, `upsert` seals it. */
interface ClientStore {
  find(id: string): Promise<Record<string, unknown> | undefined>;
  upsert(id: string, payload: object, expiresIn: number): Promise<void>;
}

const storeOf = (provider: Provider) => (provider.Client as unknown as { adapter: ClientStore }).adapter;


/** The metadata an answer shows; an allow-list, so that no secret, nor anything the provider adds, is. */
const SHOWN = [
  'client_id',
  'client_id_issued_at',
  'redirect_uris',
  'grant_types',
  'response_types',
  'token_endpoint_auth_method',
  'client_name',
  'scope',
  'post_logout_redirect_uris',
  'application_type',
  'contacts',
  'client_uri',
  'logo_uri',
  'policy_uri',
  'tos_uri',
  'jwks_uri',
] as const;

function toClient(payload: Record<string, unknown>): OAuthClient {
  const shown = Object.fromEntries(SHOWN.filter((k) => payload[k] !== undefined).map((k) => [k, payload[k]]));
  // Read from the row as stored too (lists), where an overlap that ended is still written down.
  const ends = payload[PREVIOUS_SECRET_ENDS];
  const previous_secret_expires_at = typeof ends === 'number' && ends > Date.now() ? new Date(ends).toISOString() : null;
  return { ...shown, tenant_id: payload.tenant_id ?? null, extension_permissions: payload.extension_permissions ?? {}, previous_secret_expires_at } as OAuthClient;
}

/**
 * The clients `p` manages (see the header), as a condition on oidc_models' payload with its one
 * parameter at `$at`; `registration` keeps the openly registered ones or the admin-registered.
 * Which halves apply is written into the statement, so that each reads the clients index.
 */
function managedBy(p: Principal, at: number, registration?: ClientRegistration): [string, unknown[]] {
  const tenant = `$${at}::text`;
  const halves = [registration !== 'open' && `payload->>'tenant_id' = ${tenant}`, p.isRootTenant && registration !== 'admin' && `payload->>'tenant_id' IS NULL`];
  // The parameter is named even where no half uses it: PostgreSQL must be able to type each one.
  return [`(${halves.filter(Boolean).join(' OR ') || 'false'}) AND ${tenant} IS NOT NULL`, [p.tenantId]];
}

const notFound = () => ApiError.notFound('not_found', 'No such client');

/** When a client was registered; lists are newest first. */
const ISSUED_AT = `COALESCE((payload->>'client_id_issued_at')::bigint, 0)`;


/**
 * Rows that belong to a client without belonging to one of its grants (those go with the grant):
 * client-credentials tokens, device codes not yet approved, the registration access token of an
 * openly registered client. Written into the statement, so that it reads the index of rows by
 * client (migration 5300), which a parameter's list could not be proven to fall in.
 */
const GRANTLESS_MODELS = `'ClientCredentials', 'DeviceCode', 'RegistrationAccessToken'`;

/**
 * Everything deleted clients hold, their rows already gone: grants with every token they issued
 * (used refresh tokens too: with the client gone, presenting one is invalid_client before any
 * reuse), grantless rows, sign-ins in progress, their place in browser sessions and the tenants'
 * blocks of them (an id is never given again: a block would be listed for nothing); the grants.
 */
async function endClients(m: EntityManager, clientIds: string[]): Promise<Array<{ id: string; user_id: string | null }>> {
  const [grants]: [Array<{ id: string; user_id: string | null }>, number] = await m.query(
    `DELETE FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = ANY($1::text[]) RETURNING id, payload->>'accountId' AS user_id`,
    [clientIds],
  );
  await m.query(`DELETE FROM oidc_models WHERE grant_id = ANY($1::text[])`, [grants.map((g) => g.id)]);
  await m.query(`DELETE FROM oidc_models WHERE model IN (${GRANTLESS_MODELS}) AND payload->>'clientId' = ANY($1::text[])`, [clientIds]);
  await m.query(`DELETE FROM oidc_models WHERE model = 'Interaction' AND payload->'params'->>'client_id' = ANY($1::text[])`, [clientIds]);
  // Every tenant's: blocks of an openly registered client are the tenants', the client is the service's.
  await m.query(`DELETE FROM blocked_clients WHERE client_id = ANY($1::text[])`, [clientIds]);
  await m.query(
    `UPDATE oidc_models SET payload = jsonb_set(payload, '{authorizations}', (payload->'authorizations') - $1::text[])
      WHERE model = 'Session' AND payload->'authorizations' ?| $1::text[]`,
    [clientIds],
  );
  return grants;
}

@Injectable()
export class ClientsService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly oidc: OidcProvider,
    private readonly audit: AuditService,
    private readonly tokenCache: OAuthTokenCache,
    private readonly config: AppConfig,
  ) {}

  async register(p: Principal, dto: RegisterClientDto): Promise<RegisteredClient> {
    const method = dto.token_endpoint_auth_method ?? 'client_secret_basic';
    const grants = dto.grant_types ?? ['authorization_code', 'refresh_token'];
    const given = Object.fromEntries(Object.entries(dto).filter(([, v]) => v !== undefined));
    const metadata = {
      response_types: grants.includes('authorization_code') ? ['code'] : [],
      ...given,
      grant_types: grants,
      token_endpoint_auth_method: method,
      client_id: randomBytes(24).toString('base64url'),
      ...(SECRETLESS_AUTH_METHODS.has(method) ? {} : { client_secret: newClientSecret() }),
      client_id_issued_at: Math.floor(Date.now() / 1000),
      tenant_id: p.tenantId,
      extension_permissions: dto.extension_permissions ?? {},
    };
    const problem = uselessClientProblem(metadata) ?? grantResponseMismatch(metadata.grant_types, metadata.response_types);
    if (problem) throw validationError([problem]);
    const provider = await this.oidc.get();
    await validateClient(provider, metadata);
    // In a transaction of its own, so that an Idempotency-Key's claim commits with the client.
    await inTransaction(this.db, async (m) => {
      await storeOf(provider).upsert(metadata.client_id, metadata, 0);
      await this.audit.record(
        {
          tenantId: p.tenantId,
          action: 'auth.client.created',
          clientId: metadata.client_id,
          details: {
            actor: actorOf(p),
            client_name: dto.client_name ?? null,
            grant_types: metadata.grant_types,
            token_endpoint_auth_method: metadata.token_endpoint_auth_method,
            scope: dto.scope ?? null,
          },
        },
        m,
      );
    });
    return metadata as RegisteredClient;
  }

  async list(p: Principal, limit = 50, cursor?: string, registration?: ClientRegistration): Promise<OAuthClientList> {
    const position = decodeSecondsCursor(cursor, 'clients', isClientId);
    const [managed, params] = managedBy(p, 1, registration);
    const rows: Array<{ id: string; payload: Record<string, unknown>; issued_at: string }> = await this.db.query(
      `SELECT id, payload, ${ISSUED_AT} AS issued_at FROM oidc_models
        WHERE model = 'Client' AND ${managed} AND ($2::bigint IS NULL OR (${ISSUED_AT}, id) < ($2, $3::text))
        ORDER BY ${ISSUED_AT} DESC, id DESC LIMIT $4`,
      [...params, position?.seconds ?? null, position?.id ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => new Date(Number(r.issued_at) * 1000), 'clients');
    return { clients: page.map((r) => toClient(r.payload)), next_cursor };
  }

  async get(p: Principal, clientId: string): Promise<OAuthClient> {
    const [managed, params] = managedBy(p, 2);
    const [row]: Array<{ payload: Record<string, unknown> }> = await this.db.query(
      `SELECT payload FROM oidc_models WHERE model = 'Client' AND id = $1 AND ${managed}`,
      [clientId, ...params],
    );
    if (!row) throw notFound();
    return toClient(row.payload);
  }

  /** Deletes the client and everything it holds (see the header). */
  async remove(p: Principal, clientId: string): Promise<OAuthClient> {
    const client = await this.db.transaction(async (m) => {
      const [managed, params] = managedBy(p, 2);
      const [deleted]: [Array<{ payload: Record<string, unknown> }>, number] = await m.query(
        `DELETE FROM oidc_models WHERE model = 'Client' AND id = $1 AND ${managed} RETURNING payload`,
        [clientId, ...params],
      );
      if (!deleted[0]) return undefined;
      const grants = await endClients(m, [clientId]);
      const userIds = grants.map((g) => g.user_id).filter((id): id is string => !!id && isId(id));
      const users: Array<{ id: string; tenant_id: string }> = await m.query(`SELECT id::text, tenant_id FROM users WHERE id = ANY($1::uuid[])`, [userIds]);
      const tenantOf = new Map(users.map((u) => [u.id, u.tenant_id]));
      for (const grant of grants) {
        // A grant's tenant is its user's (an open client serves every tenant's users).
        const tenantId = (grant.user_id && tenantOf.get(grant.user_id)) ?? (deleted[0].payload.tenant_id as string | undefined);
        if (!tenantId) continue;
        await this.audit.record(
          { tenantId, action: 'auth.grant.revoked', clientId, userId: grant.user_id ?? undefined, grantId: grant.id, details: { by: 'client_deleted' } },
          m,
        );
      }
      await this.audit.record(
        {
          tenantId: p.tenantId,
          action: 'auth.client.deleted',
          clientId,
          details: { actor: actorOf(p), client_name: deleted[0].payload.client_name ?? null, grants_revoked: grants.length },
        },
        m,
      );
      return toClient(deleted[0].payload);
    });
    if (!client) throw notFound();
    await this.tokenCache.invalidate();
    return client;
  }

  /**
   * Deletes every client of a tenant being deleted and all they hold (see the header), inside the
   * caller's transaction, unaudited (the tenant's log goes with it): how many. Call
   * `tokensChanged` once committed.
   */
  async removeAll(m: EntityManager, tenantId: string): Promise<number> {
    const deleted: Array<{ id: string }> = (await m.query(`DELETE FROM oidc_models WHERE model = 'Client' AND payload->>'tenant_id' = $1 RETURNING id`, [tenantId]))[0];
    await endClients(m, deleted.map((c) => c.id));
    return deleted.length;
  }

  /**
   * After clients, grants or accounts ended outside this service's methods: their tokens are
   * refused from the next request on every instance (one generation covers every OAuth token).
   */
  tokensChanged(): Promise<void> {
    return this.tokenCache.invalidate();
  }

  /**
   * Changes `dto`'s fields of the client (absent: kept; null: removed) and checks the result as
   * registration checks a client. What the client no longer has its users' grants lose too (see
   * the header).
   */
  async update(p: Principal, clientId: string, dto: UpdateClientDto): Promise<OAuthClient> {
    const provider = await this.oidc.get();
    const store = storeOf(provider);
    // Under the row lock, as a rotation is: two updates of different fields both hold, and a
    // deletion either went first (404) or waits and never sees the client written back.
    const updated = await underConnectionLock(this.db, 'client-admin', clientId, async (m) => {
      const [managed, params] = managedBy(p, 2);
      const [row] = await m.query(`SELECT 1 FROM oidc_models WHERE model = 'Client' AND id = $1 AND ${managed} FOR UPDATE`, [clientId, ...params]);
      const before = row && (await store.find(clientId));
      if (!before) return undefined;
      const after: Record<string, unknown> = { ...before };
      for (const [key, value] of Object.entries(dto)) {
        if (value === null) delete after[key];
        else if (value !== undefined) after[key] = value;
      }
      await validateClient(provider, after, dto);
      await store.upsert(clientId, after, 0);
      // The provider's view of the client as now stored (read through this transaction), so that
      // its own matching (a loopback redirect on any port) decides what is still allowed.
      const client = await provider.Client.find(clientId);
      // The API as a resource server is SVC_BASE_URL (oidc-provider.factory.ts, resourceIndicators).
      await narrowGrants(m, clientId, registeredScopes(after), this.config.baseUrl);
      await endPendingWork(m, clientId, client!, removedScopes(before, after));
      const oldProof = proofOf(before.client_secret, before.jwks_uri);
      if (oldProof !== proofOf(after.client_secret, after.jwks_uri)) await endOldCredential(m, before, clientId, oldProof);
      const changed = changedFields(Object.fromEntries(Object.keys(dto).map((key) => [key, [asCompared(key, before[key]), asCompared(key, after[key])] as const])));
      if (changed.length) await this.audit.record({ tenantId: p.tenantId, action: 'auth.client.updated', clientId, details: { actor: actorOf(p), changed } }, m);
      return toClient(after);
    });
    if (!updated) throw notFound();
    // Cached token resolutions hold the scopes a grant had (oauth-token-cache.ts).
    await this.tokenCache.invalidate();
    return updated;
  }

  /**
   * A new secret for a confidential client (see the header); 409 `conflict` for a public one. The
   * one it replaces keeps authenticating beside it for `expire_previous_in` seconds (none unless
   * said); a rotation during that time ends the older one.
   */
  async rotateSecret(p: Principal, clientId: string, dto: RotateClientSecretDto = {}): Promise<RotatedClient> {
    const expireIn = dto.expire_previous_in ?? 0;
    const store = storeOf(await this.oidc.get());
    // The adapter's reads and writes join this transaction (that is what `underConnectionLock`
    // offers besides its lock, which no consent contends for under this account id), so the row
    // lock taken here holds until the new secret commits: a deletion either went first (404) or
    // waits, and never sees the client written back.
    const rotated = await underConnectionLock(this.db, 'client-admin', clientId, async (m) => {
      const [managed, params] = managedBy(p, 2);
      const [row] = await m.query(`SELECT 1 FROM oidc_models WHERE model = 'Client' AND id = $1 AND ${managed} FOR UPDATE`, [clientId, ...params]);
      const metadata = row && (await store.find(clientId));
      if (!metadata) return undefined;
      if (SECRETLESS_AUTH_METHODS.has(metadata.token_endpoint_auth_method as string)) {
        throw ApiError.conflict('conflict', `A client that authenticates with ${metadata.token_endpoint_auth_method} has no secret to rotate`);
      }
      const client_secret = newClientSecret();
      // The previous secret there was goes either way: one at a time.
      const { [PREVIOUS_SECRET]: _older, [PREVIOUS_SECRET_ENDS]: _olderEnds, ...current } = metadata;
      const keepsOld = expireIn > 0 && typeof metadata.client_secret === 'string';
      const overlap = keepsOld ? { [PREVIOUS_SECRET]: metadata.client_secret, [PREVIOUS_SECRET_ENDS]: Date.now() + expireIn * 1000 } : {};
      const rotated = { ...current, client_secret, ...overlap };
      await store.upsert(clientId, rotated, 0);
      // The registration access token issued beside the old secret (open registration) would
      // otherwise read the new one out (RFC 7592 2.1), overlap or not.
      await m.query(`DELETE FROM oidc_models WHERE model = 'RegistrationAccessToken' AND payload->>'clientId' = $1`, [clientId]);
      await endOldCredential(m, metadata, clientId, proofOf(metadata.client_secret, metadata.jwks_uri), keepsOld);
      await this.audit.record(
        { tenantId: p.tenantId, action: 'auth.client.secret_rotated', clientId, details: { actor: actorOf(p), expire_previous_in: expireIn } },
        m,
      );
      return { ...toClient(rotated), client_secret };
    });
    if (!rotated) throw notFound();
    await this.tokenCache.invalidate();
    return rotated;
  }
}

/**
 * A client's metadata as a whole, for a registration and an update alike. The lists `given`
 * name each value once (repeatedLists; an update checks only those it sets, so a client stored
 * with a repeat before the rule can still be changed otherwise), refused naming the list as the
 * DTO's checks do. Then the provider's rules (client-metadata.ts adds the service's: http
 * redirects only to loopback, client_credentials only for a confidential client, …), whose
 * refusal is 400 `validation_error` naming the field it is about (`refusedField`).
 */
async function validateClient(provider: Provider, metadata: Record<string, unknown>, given: object = metadata): Promise<void> {
  const repeats = repeatedLists(metadata).filter(({ field }) => Reflect.get(given, field) !== undefined);
  if (repeats.length) throw validationError(repeats);
  try {
    await provider.Client.validate(metadata as never);
  } catch (err) {
    const e = err as { error?: string; error_description?: string };
    if (!e.error) throw err;
    const message = e.error_description ?? e.error;
    throw validationError([{ field: refusedField(message, metadata), message }], 'The client metadata is not valid');
  }
}

/** The fields a caller of /auth/clients sends. */
const CLIENT_FIELDS: ReadonlySet<string> = new Set([...SHOWN, 'extension_permissions']);

/**
 * The field a refusal of the provider's is about, read from its description: the URI list that
 * holds the URI it starts with (a redirect URI's refusal names the URI), else the first field
 * named in it (`jwks or jwks_uri is mandatory…`), else `(client)`, the metadata as a whole.
 */
function refusedField(description: string, metadata: Record<string, unknown>): string {
  const list = URI_LISTS.find((field) => {
    const uris = metadata[field];
    return Array.isArray(uris) && uris.some((uri) => typeof uri === 'string' && description.startsWith(`${uri}:`));
  });
  return list ?? description.match(/[a-z_]+/g)?.find((word) => CLIENT_FIELDS.has(word)) ?? '(client)';
}

/**
 * A client field's value as an update compares it for `details.changed`: the scope, the contacts
 * and the lists of SET_LISTS are sets, so one that only reorders them changes nothing (nor records a row).
 */
function asCompared(field: string, value: unknown): unknown {
  if (field === 'scope' && typeof value === 'string') return [...new Set(scopeWords(value))].sort();
  if ((field === 'contacts' || field in SET_LISTS) && Array.isArray(value)) return [...value].sort();
  return value;
}

/** What an update took away of the scopes the client could ask for (everything outside the new set when it had none). */
function removedScopes(before: Record<string, unknown>, after: Record<string, unknown>): (scope: string) => boolean {
  const old = registeredScopes(before);
  const now = registeredScopes(after);
  return (scope) => !!now && !now.has(scope) && (!old || old.has(scope));
}

/**
 * Users' grants of the client keep only the scopes it may still ask for. Not a refusal (which
 * the consent page would remember): were the scope given back to the client, the user would be
 * asked again. The tokens a grant issued are good for the scopes it still holds (scopesStillHeld,
 * scopes.ts), and a refresh is kept to them by the provider, so a grant is all there is to narrow.
 */
async function narrowGrants(m: EntityManager, clientId: string, allowed: Set<string> | undefined, resource: string): Promise<void> {
  if (!allowed) return;
  const keep = (scope: unknown) => (typeof scope === 'string' ? scopeWords(scope).filter((s) => allowed.has(s)).join(' ') : scope);
  const grants: Array<{ id: string; payload: GrantPayload }> = await m.query(
    `SELECT id, payload FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1 FOR UPDATE`,
    [clientId],
  );
  for (const { id, payload } of grants) {
    const openid = payload.openid && { ...payload.openid, scope: keep(payload.openid.scope) };
    const resources = payload.resources && Object.fromEntries(Object.entries(payload.resources).map(([r, scope]) => [r, r === resource ? keep(scope) : scope]));
    const narrowed = { ...payload, ...(openid ? { openid } : {}), ...(resources ? { resources } : {}) };
    if (JSON.stringify(narrowed) !== JSON.stringify(payload)) await m.query(`UPDATE oidc_models SET payload = $2 WHERE model = 'Grant' AND id = $1`, [id, narrowed]);
  }
}

interface GrantPayload {
  openid?: { scope?: string };
  resources?: Record<string, string>;
}

/**
 * Codes not yet exchanged for a redirect URI the client no longer has (the provider compares a
 * code's URI with the exchange's only, not with the client's), and sign-ins and consents in
 * progress that would end at such a URI or could give a scope the client lost: they end, and the
 * user starts again.
 */
async function endPendingWork(m: EntityManager, clientId: string, client: Client, removed: (scope: string) => boolean): Promise<void> {
  const codes: Array<{ id: string; uri: string | null }> = await m.query(
    `SELECT id, payload->>'redirectUri' AS uri FROM oidc_models WHERE model = 'AuthorizationCode' AND payload->>'clientId' = $1 AND consumed_at IS NULL`,
    [clientId],
  );
  const goneCodes = codes.filter((c) => !c.uri || !client.redirectUriAllowed(c.uri)).map((c) => c.id);
  await m.query(`DELETE FROM oidc_models WHERE model = 'AuthorizationCode' AND id = ANY($1::text[])`, [goneCodes]);
  const interactions: Array<{ id: string; uri: unknown; scope: unknown }> = await m.query(
    `SELECT id, payload->'params'->'redirect_uri' AS uri, payload->'params'->'scope' AS scope FROM oidc_models WHERE model = 'Interaction' AND payload->'params'->>'client_id' = $1`,
    [clientId],
  );
  const goneInteractions = interactions
    .filter(({ uri, scope }) => (typeof uri === 'string' && !client.redirectUriAllowed(uri)) || (typeof scope === 'string' && scopeWords(scope).some(removed)))
    .map((i) => i.id);
  await m.query(`DELETE FROM oidc_models WHERE model = 'Interaction' AND id = ANY($1::text[])`, [goneInteractions]);
}

/**
 * A client's secret was rotated, or its jwks_uri moved (client-secret-claim.ts): the tokens it
 * got with the old one end. Webhooks and bulk jobs its tokens started name the old credential and
 * end with it; those started before a credential named it (`client:<id>`) are put under the old
 * one, so that they end too.
 *
 * `keepsOld`: the old secret is now the previous one, for an overlap (see the header). Its
 * tokens stay, to end when the overlap does (their claim names it; those from before the claim
 * are given it, as the credential of what they started is), and every other token of the client,
 * the older previous secret's, ends now.
 */
async function endOldCredential(m: EntityManager, metadata: Record<string, unknown>, clientId: string, oldProof: string | undefined, keepsOld = false): Promise<void> {
  const oldClaim = secretClaim(oldProof)?.[SECRET_CLAIM];
  if (keepsOld && oldClaim) {
    await m.query(
      `UPDATE oidc_models SET payload = jsonb_set(payload, '{extra}', COALESCE(payload->'extra', '{}'::jsonb) || jsonb_build_object($2::text, $3::text))
        WHERE model = 'ClientCredentials' AND payload->>'clientId' = $1 AND payload->'extra'->>$2 IS NULL`,
      [clientId, SECRET_CLAIM, oldClaim],
    );
    await m.query(`DELETE FROM oidc_models WHERE model = 'ClientCredentials' AND payload->>'clientId' = $1 AND payload->'extra'->>$2 IS DISTINCT FROM $3`, [
      clientId,
      SECRET_CLAIM,
      oldClaim,
    ]);
  } else {
    await m.query(`DELETE FROM oidc_models WHERE model = 'ClientCredentials' AND payload->>'clientId' = $1`, [clientId]);
  }
  const tenantId = metadata.tenant_id;
  const old = clientCredentialId(clientId, oldClaim);
  const bare = `client:${clientId}`;
  if (typeof tenantId !== 'string' || old === bare) return;
  for (const table of ['webhooks', 'bulk_jobs']) {
    await m.query(`UPDATE ${table} SET credential_id = $3 WHERE tenant_id = $1 AND credential_id = $2`, [tenantId, bare, old]);
  }
}
