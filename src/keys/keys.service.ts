/**
 * Owns API keys: bootstrap of the root tenant's first key, creation, listing, update and
 * revocation, expiry, and the resolution of `svc_k1_` bearer tokens into Principals (cached, with
 * invalidation across instances), noting when each key was last used. Plaintext keys exist only
 * in the creation response. Every
 * creation, change and revocation leaves an audit row (`key.created`, `key.updated`,
 * `key.revoked`) in its own transaction, naming who did it and never the key or its hash.
 */
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In } from 'typeorm';
import { actorOf, AuditActor, AuditService, BOOTSTRAP_ACTOR, changedFields } from '../audit/audit.service';
import { ApiError } from '../common/api-error';
import { laterInstantIssue, msAheadOfDatabase, msUntilSql } from '../common/db-clock';
import { isId, newId } from '../common/ids';
import { Bounded, byteBoundedPage, decodeCursor, pageOf } from '../common/pagination';
import { isUniqueViolation } from '../common/unavailable';
import { validationError } from '../common/validation';
import type { Principal, Resolution } from '../auth/principal';
import { insertTenant } from '../tenants/tenant.entity';
import { ApiKeyEntity, Role } from './api-key.entity';
import { KeyCache } from './key-cache';
import { ApiKeyResponse, CreateKeyDto, KeyStatus, ListKeysQuery, MAX_KEY_LIFETIME_DAYS, UpdateKeyDto } from './keys.dto';
import { API_KEY_PREFIX, digestsEqual, generateApiKey, hashSecret, keyHint } from './key-secrets';

const BOOTSTRAP_LOCK = 727_001; // pg_advisory_xact_lock id serialising bootstrap attempts

export const bootstrapClosed = () => ApiError.unauthorized('Bootstrap is closed: this server already has keys; use an admin key');

/** The fields of a key an update may change, by their names in the API (`key.updated`'s `details.changed`). */
const UPDATABLE: ReadonlyArray<[keyof ApiKeyEntity, string]> = [
  ['label', 'label'],
  ['role', 'role'],
  ['defaultTier', 'default_tier'],
  ['typePermissions', 'type_permissions'],
  ['extensionPermissions', 'extension_permissions'],
  ['edgePermissions', 'edge_permissions'],
  ['expiresAt', 'expires_at'],
];

/**
 * How stale a key's `last_used_at` may get: it is written at most once per this long per key, so
 * that a busy key costs one write a minute rather than one per request.
 */
export const LAST_USED_GRANULARITY_MS = 60_000;
/** How many keys' last writes of `last_used_at` an instance remembers (`noteUse`). */
const LAST_USED_REMEMBERED = 10_000;

/**
 * What is wrong with `at` as a key's expiry, or undefined: it must be in the future and at most
 * MAX_KEY_LIFETIME_DAYS ahead, by the database's clock read in `m`, the clock authentication
 * refuses an expired key by (`EXPIRES_IN_MS`), so that no instance whose own clock is off takes an
 * expiry every instance then treats as passed. The rule of `expires_at` wherever a key gets one
 * (`expiryOf`; the account page's form too, which says it there: KeysService `expiryIssue`).
 */
async function expiryIssueIn(m: Pick<EntityManager, 'query'>, at: Date): Promise<string | undefined> {
  return laterInstantIssue(await msAheadOfDatabase(m, at), MAX_KEY_LIFETIME_DAYS);
}

/**
 * The expiry a request asks for: undefined when it sends none, null to have none, else a time
 * `expiryIssueIn` takes (400 validation_error naming `expires_at`).
 */
async function expiryOf(m: Pick<EntityManager, 'query'>, value: string | null | undefined): Promise<Date | null | undefined> {
  if (value === undefined || value === null) return value;
  const at = new Date(value);
  const issue = await expiryIssueIn(m, at);
  if (issue) throw validationError([{ field: 'expires_at', message: issue }]);
  return at;
}

export function toKeyResponse(k: ApiKeyEntity, plaintext?: string): ApiKeyResponse {
  return {
    id: k.id,
    tenant_id: k.tenantId,
    ...(plaintext ? { key: plaintext } : {}),
    key_hint: k.keyHint,
    label: k.label,
    role: k.role,
    source: k.source,
    default_tier: k.defaultTier,
    type_permissions: k.typePermissions,
    extension_permissions: k.extensionPermissions,
    edge_permissions: k.edgePermissions,
    created_at: k.createdAt.toISOString(),
    updated_at: k.updatedAt.toISOString(),
    revoked_at: k.revokedAt ? k.revokedAt.toISOString() : null,
    created_by_user_id: k.createdByUserId ?? null,
    expires_at: k.expiresAt ? k.expiresAt.toISOString() : null,
    last_used_at: k.lastUsedAt ? k.lastUsedAt.toISOString() : null,
  };
}

/**
 * `expires_in_ms` of the key `k`: how long until its expiry (null: it has none), on the database's
 * clock as of the statement that reads it, the one clock every instance shares. Authentication and
 * every change of a key judge expiry by this and `unexpired` alone, so that no key refused as
 * expired is still changed (or the other way round), whatever an instance's own clock says.
 */
const EXPIRES_IN_MS_EXPR = msUntilSql('k.expires_at');
const EXPIRES_IN_MS = `${EXPIRES_IN_MS_EXPR} AS expires_in_ms`;
const unexpired = (row: { expires_in_ms: number | null }) => row.expires_in_ms === null || row.expires_in_ms > 0;

const PRINCIPAL_SELECT = `
  SELECT k.tenant_id, k.id, k.role, k.source, k.default_tier, k.type_permissions, k.extension_permissions,
         k.edge_permissions, k.key_hash, k.revoked_at, t.is_root, t.deleted_at, ${EXPIRES_IN_MS}
    FROM api_keys k JOIN tenants t ON t.id = k.tenant_id`;

/** `GET /keys?status=`: expiry by the database's clock, as authentication judges it (`unexpired`). */
const STATUS_CONDITION: Record<KeyStatus, string> = {
  active: `revoked_at IS NULL AND (expires_at IS NULL OR ${msUntilSql('expires_at')} > 0)`,
  revoked: `revoked_at IS NOT NULL`,
  expired: `revoked_at IS NULL AND ${msUntilSql('expires_at')} <= 0`,
};

/** A key stops working when revoked, from its expiry on, and with its tenant's deletion (its rows purged later). */
const isLive = (row: Record<string, any>) => !row.revoked_at && !row.deleted_at && unexpired(row as { expires_in_ms: number | null });

/**
 * What a key's row resolves to, and for how long that answer may be cached: a live key no longer
 * than until its expiry, so that no instance serves it from its cache afterwards.
 */
const resolved = (row: Record<string, any>): { principal: Principal | null; maxAgeMs?: number } =>
  isLive(row) ? { principal: toPrincipal(row), maxAgeMs: row.expires_in_ms ?? undefined } : { principal: null };

function toPrincipal(row: Record<string, any>): Principal {
  return {
    tenantId: row.tenant_id,
    credentialId: row.id,
    kind: 'api_key',
    role: row.role,
    isRootTenant: row.is_root,
    source: row.source,
    defaultTier: row.default_tier,
    typePerms: row.type_permissions,
    extensionPerms: row.extension_permissions,
    edgePerms: row.edge_permissions,
  };
}

@Injectable()
export class KeysService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly cache: KeyCache,
    private readonly audit: AuditService,
  ) {}

  private readonly logger = new Logger('Keys');

  /** Once a key exists bootstrap never opens again, so a closed answer is kept for good. */
  private closed = false;

  /**
   * When this instance last wrote each key's `last_used_at` (monotonic milliseconds), oldest
   * first: a key is written again only LAST_USED_GRANULARITY_MS later (`noteUse`).
   */
  private readonly lastUseNoted = new Map<string, number>();

  /** Whether an anonymous POST /keys may still bootstrap the server (SPEC 4.5). */
  async bootstrapOpen(): Promise<boolean> {
    if (this.closed) return false;
    const [{ exists }] = await this.db.query('SELECT EXISTS (SELECT 1 FROM api_keys) AS exists');
    this.closed = exists;
    return !exists;
  }

  /** Resolves a bearer token of the API-key kind. */
  async resolve(token: string): Promise<Resolution> {
    if (!token.startsWith(API_KEY_PREFIX)) return { error: 'unauthorized' };
    const hash = hashSecret(token);
    const principal = await this.cached(hash, async () => {
      const [row] = await this.db.query(`${PRINCIPAL_SELECT} WHERE k.key_hash = $1`, [hash]);
      if (!row) return undefined;
      return digestsEqual(row.key_hash, hash) ? resolved(row) : { principal: null };
    });
    if (!principal) return { error: 'unauthorized' };
    this.noteUse(principal);
    return { principal };
  }

  /**
   * Sets the key's `last_used_at` once its stored value is LAST_USED_GRANULARITY_MS old, after
   * the request was let in and without holding it up: a failed write is logged and tried again
   * on the key's next use, never refused. Each instance writes a key at most once per that
   * interval, and the statement's own condition keeps instances from rewriting it within it.
   */
  private noteUse(p: Principal): void {
    const key = `${p.tenantId}:${p.credentialId}`;
    const now = performance.now();
    const noted = this.lastUseNoted.get(key);
    if (noted !== undefined && now - noted < LAST_USED_GRANULARITY_MS) return;
    this.lastUseNoted.delete(key);
    for (const [oldest, at] of this.lastUseNoted) {
      if (now - at < LAST_USED_GRANULARITY_MS && this.lastUseNoted.size < LAST_USED_REMEMBERED) break;
      this.lastUseNoted.delete(oldest);
    }
    this.lastUseNoted.set(key, now);
    this.db
      .query(
        `UPDATE api_keys SET last_used_at = now()
          WHERE tenant_id = $1 AND id = $2 AND (last_used_at IS NULL OR last_used_at <= now() - make_interval(secs => $3))`,
        [p.tenantId, p.credentialId, LAST_USED_GRANULARITY_MS / 1000],
      )
      .catch((err: unknown) => {
        if (this.lastUseNoted.get(key) === now) this.lastUseNoted.delete(key);
        this.logger.warn({ err, key_id: p.credentialId }, 'last_used_at not written');
      });
  }

  /**
   * The principal of a key by its id as it is now, or null once it is revoked, expired or gone:
   * for work done later on a credential's behalf (webhook fan-out, bulk jobs), so a key revoked,
   * expired or narrowed since stops receiving. Cached like `resolve`, never past the key's expiry.
   */
  async principalById(tenantId: string, id: string): Promise<Principal | null> {
    if (!isId(id)) return null;
    const principal = await this.cached(`id:${tenantId}:${id}`, async () => {
      const [row] = await this.db.query(`${PRINCIPAL_SELECT} WHERE k.tenant_id = $1 AND k.id = $2`, [tenantId, id]);
      return row ? resolved(row) : undefined;
    });
    return principal ?? null;
  }

  /**
   * A cached lookup under the current key generation, kept at most `maxAgeMs` (a key's expiry).
   * `load` answers undefined for a row that does not exist: unknown hashes are not cached, so a
   * flood of random tokens cannot evict real keys.
   */
  private async cached(
    cacheKey: string,
    load: () => Promise<{ principal: Principal | null; maxAgeMs?: number } | undefined>,
  ): Promise<Principal | null | undefined> {
    const generation = await this.cache.generation();
    const hit = this.cache.get(cacheKey, generation);
    if (hit !== undefined) return hit;
    const sent = this.cache.now();
    const loaded = await load();
    // The expiry was measured when the query ran, which was after `sent`: the entry is gone by then.
    if (loaded !== undefined) this.cache.set(cacheKey, loaded.principal, generation, (loaded.maxAgeMs ?? Infinity) - (this.cache.now() - sent));
    return loaded?.principal;
  }

  /**
   * The first key of an empty server: creates the root tenant and an admin key. Serialised by
   * an advisory lock, so of two concurrent attempts exactly one succeeds; closed forever once
   * any key row exists (revoked rows included).
   */
  async bootstrap(dto: CreateKeyDto): Promise<ApiKeyResponse> {
    // It is the root tenant's only admin key, and bootstrap never opens again.
    if (dto.expires_at) throw validationError([{ field: 'expires_at', message: 'must be absent for the first key of a server, which cannot expire' }]);
    const created = await this.db.transaction(async (m) => {
      await m.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK]);
      const [{ exists }] = await m.query('SELECT EXISTS (SELECT 1 FROM api_keys) AS exists');
      if (exists) return undefined;
      const tenant = await insertTenant(m, 'root', true);
      const key = await this.insert(m, tenant.id, { ...dto, role: 'admin' }, undefined, BOOTSTRAP_ACTOR);
      await this.audit.record(
        { tenantId: tenant.id, action: 'tenant.created', details: { actor: BOOTSTRAP_ACTOR, tenant_id: tenant.id, name: tenant.name, admin_key_id: key.id } },
        m,
      );
      return key;
    });
    this.closed = true;
    if (!created) throw bootstrapClosed();
    return created;
  }

  async create(p: Principal, dto: CreateKeyDto): Promise<ApiKeyResponse> {
    return this.db.transaction(async (m) => {
      await this.lockTenantKeys(m, p.tenantId);
      await this.assertCallerStillAdmin(m, p);
      return this.insert(m, p.tenantId, dto, undefined, actorOf(p));
    });
  }

  /**
   * Revokes, in the caller's transaction, the active keys `userId` made on the account pages:
   * they were that user's admin rights, which end with the user's deletion or demotion. Refused
   * (409) when that would leave the tenant without an active admin key. Call `keysChanged` once
   * the transaction commits (when this answered more than 0). Each is audited `key.revoked` by
   * `creator_removed`, with `actor` the one who deleted or demoted the user when given.
   */
  async revokeCreatedBy(m: EntityManager, tenantId: string, userId: string, actor?: AuditActor): Promise<number> {
    await this.lockTenantKeys(m, tenantId);
    const [revoked]: [Array<{ id: string; role: Role }>, number] = await m.query(
      `UPDATE api_keys SET revoked_at = now(), updated_at = now() WHERE tenant_id = $1 AND created_by_user_id = $2 AND revoked_at IS NULL RETURNING id, role`,
      [tenantId, userId],
    );
    if (revoked.some((k) => k.role === 'admin')) {
      await this.assertAnotherAdmin(m, tenantId, [], 'This would revoke the tenant\'s last active admin key that does not expire, which this user made');
    }
    for (const key of revoked) {
      await this.audit.record(
        { tenantId, action: 'key.revoked', details: { ...(actor && { actor }), key_id: key.id, by: 'creator_removed', created_by_user_id: userId } },
        m,
      );
    }
    return revoked.length;
  }

  /** What is wrong with `at` as a key's expiry, for a form that asks for one before making the key (`expiryIssueIn`). */
  expiryIssue(at: Date): Promise<string | undefined> {
    return expiryIssueIn(this.db.manager, at);
  }

  /** After keys changed outside this service's own methods: the next request with them, on any instance, sees the change. */
  async keysChanged(): Promise<void> {
    await this.cache.invalidate();
  }

  /**
   * Inserts a key inside the caller's transaction, audited there as `key.created` by `actor`;
   * used by tenant provisioning, and by UsersService.createKey for a key a user makes
   * (`createdByUserId`, see `revokeCreatedBy`; that user is then the actor unless one is given).
   */
  async insert(m: EntityManager, tenantId: string, dto: CreateKeyDto, createdByUserId?: string, actor?: AuditActor): Promise<ApiKeyResponse> {
    const plaintext = generateApiKey();
    const now = new Date();
    const key = m.create(ApiKeyEntity, {
      tenantId,
      id: newId(),
      label: dto.label ?? '',
      role: dto.role ?? 'member',
      source: dto.source ?? `key_${newId().replace(/-/g, '').slice(0, 16)}`,
      defaultTier: dto.default_tier ?? 'library',
      typePermissions: dto.type_permissions ?? {},
      extensionPermissions: dto.extension_permissions ?? {},
      edgePermissions: dto.edge_permissions ?? {},
      expiresAt: (await expiryOf(m, dto.expires_at)) ?? null,
      lastUsedAt: null,
      keyHash: hashSecret(plaintext),
      keyHint: keyHint(plaintext),
      createdAt: now,
      updatedAt: now,
      revokedAt: null,
      createdByUserId: createdByUserId ?? null,
    });
    try {
      // A savepoint keeps the caller's transaction usable when the insert is refused.
      await m.query('SAVEPOINT key_insert');
      await m.insert(ApiKeyEntity, key);
      await m.query('RELEASE SAVEPOINT key_insert');
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw ApiError.conflict('duplicate_source', `Another active key of this tenant already has source "${key.source}"`, {
          source: key.source,
        });
      }
      throw err;
    }
    const by: AuditActor | undefined = actor ?? (createdByUserId ? { kind: 'user', id: createdByUserId } : undefined);
    await this.audit.record(
      { tenantId, action: 'key.created', details: { ...(by && { actor: by }), key_id: key.id, label: key.label, role: key.role, source: key.source } },
      m,
    );
    return toKeyResponse(key, plaintext);
  }

  /**
   * A page of the tenant's keys, bounded in bytes as item pages are: a key's three permission
   * maps may hold 200 patterns of 200 characters each, and a page of 100 such keys was 12.6 MB.
   * The page is chosen by the keys' sizes first, then read whole.
   */
  async list(tenantId: string, q: ListKeysQuery = {}): Promise<{ keys: ApiKeyResponse[]; next_cursor: string | null }> {
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'keys');
    const params: unknown[] = [tenantId];
    let where = after ? `AND (created_at, id) < ($${params.push(after.createdAt)}::timestamptz, $${params.push(after.id)}::uuid)` : '';
    if (q.status) where += ` AND ${STATUS_CONDITION[q.status]}`;
    if (q.role) where += ` AND role = $${params.push(q.role)}`;
    if (q.last_used_before) where += ` AND (last_used_at IS NULL OR last_used_at < $${params.push(q.last_used_before)}::timestamptz)`;
    params.push(limit + 1);
    const rows: Array<Bounded<{ id: string; created_at: Date }>> = await this.db.query(
      byteBoundedPage(
        `SELECT id, created_at, octet_length(label) + octet_length(type_permissions::text) + octet_length(extension_permissions::text)
                + octet_length(edge_permissions::text) + 500 AS bytes
           FROM api_keys WHERE tenant_id = $1 ${where} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
        'created_at DESC, id DESC',
        'bytes',
      ),
      params,
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'keys');
    const keys = page.length === 0 ? [] : await this.db.getRepository(ApiKeyEntity).findBy({ tenantId, id: In(page.map((r) => r.id)) });
    const byId = new Map(keys.map((k) => [k.id, k]));
    return { keys: page.flatMap((r) => (byId.has(r.id) ? [toKeyResponse(byId.get(r.id)!)] : [])), next_cursor };
  }

  async current(p: Principal): Promise<ApiKeyResponse> {
    return this.get(p.tenantId, p.credentialId);
  }

  async get(tenantId: string, id: string): Promise<ApiKeyResponse> {
    return toKeyResponse((await this.find(this.db.manager, tenantId, id)).key);
  }

  async update(principal: Principal, id: string, dto: UpdateKeyDto): Promise<ApiKeyResponse> {
    const expiresAt = await expiryOf(this.db.manager, dto.expires_at);
    const { key, hash } = await this.db.transaction(async (m) => {
      await this.lockTenantKeys(m, principal.tenantId);
      await this.assertCallerStillAdmin(m, principal);
      const { key, unexpired } = await this.find(m, principal.tenantId, id);
      if (key.revokedAt) throw ApiError.conflict('conflict', 'A revoked key cannot be changed; create a new one');
      // Like a revoked one: an expired key is refused from its expiry on, and reviving it would hand back access its holder has lost.
      if (!unexpired) throw ApiError.conflict('conflict', 'An expired key cannot be changed; create a new one');
      if (dto.role === 'member' && key.role === 'admin') await this.assertAnotherAdmin(m, principal.tenantId, [id]);
      if (expiresAt && !key.expiresAt && key.role === 'admin' && dto.role !== 'member') {
        await this.assertAnotherAdmin(m, principal.tenantId, [id], 'An expiry would end the tenant\'s last admin key that does not expire');
      }
      const patch: Partial<ApiKeyEntity> = {
        ...(dto.label !== undefined && { label: dto.label }),
        ...(dto.role !== undefined && { role: dto.role }),
        ...(dto.default_tier !== undefined && { defaultTier: dto.default_tier }),
        ...(dto.type_permissions !== undefined && { typePermissions: dto.type_permissions }),
        ...(dto.extension_permissions !== undefined && { extensionPermissions: dto.extension_permissions }),
        ...(dto.edge_permissions !== undefined && { edgePermissions: dto.edge_permissions }),
        ...(expiresAt !== undefined && { expiresAt }),
      };
      const changed = changedFields(
        Object.fromEntries(UPDATABLE.filter(([field]) => field in patch).map(([field, name]) => [name, [key[field], patch[field]] as const])),
      );
      // Nothing to write, nor to drop from every instance's key cache (the generation is the deployment's).
      if (!changed.length) return { key, hash: undefined };
      patch.updatedAt = new Date();
      await m.update(ApiKeyEntity, { tenantId: principal.tenantId, id }, patch);
      await this.audit.record(
        {
          tenantId: principal.tenantId,
          action: 'key.updated',
          details: { actor: actorOf(principal), key_id: id, changed, ...(changed.includes('role') && { role: { from: key.role, to: patch.role } }) },
        },
        m,
      );
      return { key: Object.assign(key, patch), hash: key.keyHash };
    });
    if (hash) await this.cache.invalidate(hash);
    return toKeyResponse(key);
  }

  /** Revokes a key; the next request with it, on any instance, gets 401. Idempotent. */
  async revoke(p: Principal, id: string): Promise<ApiKeyResponse> {
    const tenantId = p.tenantId;
    const key = await this.db.transaction(async (m) => {
      await this.lockTenantKeys(m, tenantId);
      await this.assertCallerStillAdmin(m, p);
      const { key } = await this.find(m, tenantId, id);
      if (key.revokedAt) return key;
      if (key.role === 'admin') await this.assertAnotherAdmin(m, tenantId, [id]);
      key.revokedAt = new Date();
      key.updatedAt = key.revokedAt;
      await m.update(ApiKeyEntity, { tenantId, id }, { revokedAt: key.revokedAt, updatedAt: key.updatedAt });
      await this.audit.record({ tenantId, action: 'key.revoked', details: { actor: actorOf(p), key_id: id, by: 'caller' } }, m);
      return key;
    });
    await this.cache.invalidate(key.keyHash);
    return toKeyResponse(key);
  }

  /** Serialises key changes within a tenant, so the last-admin rule holds under concurrency. */
  private async lockTenantKeys(m: EntityManager, tenantId: string): Promise<void> {
    await m.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`keys:${tenantId}`]);
  }

  /**
   * Under lockTenantKeys: the calling key is still an active admin. A request that passed the
   * guard just before its key was revoked (or demoted) would otherwise commit a key after the
   * revocation was acknowledged, beyond an admin's revoke-then-review of the key list.
   */
  private async assertCallerStillAdmin(m: EntityManager, p: Principal): Promise<void> {
    if (p.kind !== 'api_key') return;
    const [caller]: Array<{ role: Role; revoked: boolean; expires_in_ms: number | null }> = await m.query(
      `SELECT k.role, k.revoked_at IS NOT NULL AS revoked, ${EXPIRES_IN_MS} FROM api_keys k WHERE k.tenant_id = $1 AND k.id = $2`,
      [p.tenantId, p.credentialId],
    );
    if (!caller || caller.revoked || !unexpired(caller)) throw ApiError.unauthorized('This API key was revoked');
    if (caller.role !== 'admin') throw ApiError.forbidden('This API key is no longer an admin key');
  }

  /**
   * The key (404 when the tenant has none by this id), with whether it has not expired, judged in
   * the same statement as authentication judges it (`EXPIRES_IN_MS`, `unexpired`).
   */
  private async find(m: EntityManager, tenantId: string, id: string): Promise<{ key: ApiKeyEntity; unexpired: boolean }> {
    const {
      entities: [key],
      raw: [row],
    } = await m
      .getRepository(ApiKeyEntity)
      .createQueryBuilder('k')
      .addSelect('k.keyHash')
      .addSelect(EXPIRES_IN_MS_EXPR, 'expires_in_ms')
      .where('k.tenant_id = :tenantId AND k.id = :id', { tenantId, id })
      .getRawAndEntities<{ expires_in_ms: number | null }>();
    if (!key) throw ApiError.notFound('not_found', 'No such key');
    return { key, unexpired: unexpired(row) };
  }

  /**
   * A tenant must keep one active admin key that does not expire, or nobody could ever manage it
   * again (once its last admin keys had expired, none would be left to make another).
   */
  private async assertAnotherAdmin(
    m: EntityManager,
    tenantId: string,
    exceptIds: string[],
    why = 'This is the tenant\'s last active admin key that does not expire',
  ): Promise<void> {
    const rows = await m.query(
      `SELECT id FROM api_keys WHERE tenant_id = $1 AND role = 'admin' AND revoked_at IS NULL AND expires_at IS NULL AND id <> ALL($2::uuid[]) LIMIT 1`,
      [tenantId, exceptIds],
    );
    if (rows.length === 0) {
      throw ApiError.conflict('conflict', `${why}; create another admin key first`);
    }
  }
}
