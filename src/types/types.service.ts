/**
 * Owns item types: the seeded core types (immutable) and each tenant's own, with schema
 * inheritance, merge policies and the validators items are checked against.
 */
import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { isDeepStrictEqual } from 'node:util';
import { DataSource, EntityManager } from 'typeorm';
import { canType, isAdmin } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { validationError } from '../common/validation';
import { Bounded, byteBoundedPage, decodeCursor, pageOf } from '../common/pagination';
import { isDottedName, matchesPattern, TypeRef } from '../common/type-pattern';
import { orTimeout } from '../common/timeout';
import { RedisPubSub, REDIS_WAIT_MS } from '../redis/redis.module';
import { CreateTypeDto, ListTypesQuery, TypeList, TypeResponse, UpdateTypeDto } from './types.dto';
import {
  assertUsableSchema, assertValidSchema, forgetValidators, JsonSchema, MergePolicy, PropertiesValidator, resolveMergePolicy, resolveSubtypeSchema, SCHEMA_LIMITS,
  validatorFor,
} from './type-schema';

export const CORE_TENANT = '00000000-0000-0000-0000-000000000000';
/** Names under it are core types' (reserved to them). */
const CORE_PREFIX = 'core.';
/**
 * The advisory lock of a tenant's type catalogue, until the transaction ends: exclusive to
 * change it, shared to write items (forWrite).
 */
function lockCatalogue(m: EntityManager, tenantId: string, mode: 'exclusive' | 'shared'): Promise<unknown> {
  const fn = mode === 'shared' ? 'pg_advisory_xact_lock_shared' : 'pg_advisory_xact_lock';
  return m.query(`SELECT ${fn}(hashtext($1))`, [`types:${tenantId}`]);
}

interface TypeRow {
  tenant_id: string;
  name: string;
  parent: string | null;
  schema: JsonSchema;
  resolved_schema: JsonSchema;
  merge_policy: Record<string, MergePolicy>;
  core: boolean;
  version: number;
  created_at: Date;
  updated_at: Date;
}

/** What the items module needs to know about a type to write an item of it. */
export interface ResolvedType {
  name: string;
  version: number;
  schema: JsonSchema;
  mergePolicy: Record<string, MergePolicy>;
  validate: PropertiesValidator;
}

/**
 * The tenant's types (core ones included) with their parent chains, so that patterns and
 * permissions can see subtypes. Lookups are synchronous once the catalog is loaded.
 */
export class TypeCatalog {
  private readonly refs = new Map<string, TypeRef>();

  constructor(rows: Array<{ name: string; parent: string | null }>) {
    const parents = new Map(rows.map((r) => [r.name, r.parent]));
    for (const { name } of rows) {
      const ancestors: string[] = [];
      for (let up = parents.get(name); up && !ancestors.includes(up); up = parents.get(up)) ancestors.push(up);
      this.refs.set(name, { name, ancestors });
    }
  }

  /** The type as patterns see it; an unknown name has no ancestors. */
  ref(name: string): TypeRef {
    return this.refs.get(name) ?? { name, ancestors: [] };
  }

  names(): string[] {
    return [...this.refs.keys()];
  }

  has(name: string): boolean {
    return this.refs.has(name);
  }

  /** Names of the types a pattern covers, subtypes included. */
  matching(pattern: string): string[] {
    return [...this.refs.values()].filter((r) => matchesPattern(pattern, r)).map((r) => r.name);
  }
}

const CATALOG_CHANNEL = 'types:changed';
const CATALOG_TTL_MS = 60_000;
/** Tenants whose catalogue one instance keeps at once, as the credential cache bounds its keys. */
const MAX_CATALOGS = 10_000;

const parentNotFound = (name: string) => ApiError.notFound('type_not_found', `Parent type "${name}" does not exist`);

const COLUMNS = 'tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at';

/**
 * What a type's validators are cached under (type-schema.ts): a key that changes with the
 * schema, beginning with the type's `tenant:name:` (validatorPrefix).
 */
const validatorPrefix = (tenantId: string, name: string) => `${tenantId}:${name}:`;
const validatorKey = (r: TypeRow) => `${validatorPrefix(r.tenant_id, r.name)}${r.version}:${r.updated_at.getTime()}`;

function toResponse(r: TypeRow): TypeResponse {
  return {
    name: r.name,
    parent: r.parent,
    schema: r.schema,
    resolved_schema: r.resolved_schema,
    merge_policy: resolveMergePolicy(r.resolved_schema, r.merge_policy),
    core: r.core,
    version: r.version,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

@Injectable()
export class TypesService implements OnModuleInit {
  private readonly logger = new Logger('Types');
  private readonly catalogs = new Map<string, { catalog: Promise<TypeCatalog>; expires: number }>();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly pubsub: RedisPubSub,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.pubsub.subscribe(CATALOG_CHANNEL, (tenantId) => this.catalogs.delete(tenantId));
    // Notices sent while the subscription was away are lost: whatever is cached may be stale.
    this.pubsub.onResubscribed(() => this.catalogs.clear());
  }

  /**
   * The tenant's type catalog, cached per instance. A type's parent never changes, so the
   * cache only goes stale when types are added or removed; those changes invalidate it on
   * every instance through Redis, and the TTL bounds a lost message.
   */
  catalog(tenantId: string): Promise<TypeCatalog> {
    const now = Date.now();
    const hit = this.catalogs.get(tenantId);
    if (hit && hit.expires > now) return hit.catalog;
    // Each catalogue is set anew at the newest end, so the map is in the order its entries
    // expire: those past their TTL go from the front, and the cache holds only the tenants seen
    // within it (not every tenant seen since the process started), MAX_CATALOGS at most.
    for (const [id, entry] of this.catalogs) {
      if (entry.expires > now && this.catalogs.size < MAX_CATALOGS) break;
      this.catalogs.delete(id);
    }
    const catalog = this.rows(tenantId).then((rows) => new TypeCatalog(rows));
    catalog.catch(() => this.catalogs.delete(tenantId));
    this.catalogs.set(tenantId, { catalog, expires: now + CATALOG_TTL_MS });
    return catalog;
  }

  /** An item type as the permission check needs it. */
  async ref(tenantId: string, name: string): Promise<TypeRef> {
    return (await this.catalog(tenantId)).ref(name);
  }

  /** canType with the type's lineage: `parent.*` grants cover subtypes whatever their names. */
  async can(p: Principal, typeName: string, access: 'read' | 'write'): Promise<boolean> {
    return isAdmin(p) || canType(p, await this.ref(p.tenantId, typeName), access);
  }

  /**
   * After a change has committed: this instance's catalogue is dropped, and the others are told
   * through Redis. The change stands whatever Redis does, so the answer must not depend on it
   * (a 503 would say nothing was kept; a silent Redis held the answer until its connection
   * reset): the notice is waited for at most REDIS_WAIT_MS, and an instance that misses it
   * reads the change once its catalogue expires (CATALOG_TTL_MS).
   */
  private async changed(tenantId: string): Promise<void> {
    this.catalogs.delete(tenantId);
    await orTimeout(this.pubsub.publish(CATALOG_CHANNEL, tenantId), REDIS_WAIT_MS, 'type catalogue notice').catch((err: unknown) =>
      this.logger.warn({ err, tenantId }, 'other instances not told of a type change; their catalogues catch up when they expire'),
    );
  }

  /**
   * Every type of the tenant, core ones included, as the catalogue needs it: names and parents
   * only (150 types at the schema limits were 28 MB of JSON a read). GET /types reads a page of its own.
   */
  private async rows(tenantId: string, m: EntityManager = this.db.manager): Promise<Array<{ name: string; parent: string | null }>> {
    return m.query(`SELECT name, parent FROM item_types WHERE tenant_id IN ($1, $2) ORDER BY core DESC, name`, [tenantId, CORE_TENANT]);
  }

  private async row(tenantId: string, name: string, m: EntityManager = this.db.manager): Promise<TypeRow | undefined> {
    const rows: TypeRow[] = await m.query(`SELECT ${COLUMNS} FROM item_types WHERE tenant_id IN ($1, $2) AND name = $3`, [
      tenantId,
      CORE_TENANT,
      name,
    ]);
    return rows[0];
  }

  /**
   * GET /types: a page of the types the caller may read, core ones first, then by name, narrowed
   * in SQL so that every page but the last is full. The cursor has every list's form with the
   * name as its id; the name alone places it (its date goes unused), on the core side when a
   * core type has that name.
   */
  async list(p: Principal, q: ListTypesQuery): Promise<TypeList> {
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'types', isDottedName);
    const readable = await this.permittedTypeNames(p, 'read');
    const params: unknown[] = [p.tenantId, CORE_TENANT];
    const param = (v: unknown) => `$${params.push(v)}`;
    const where = ['tenant_id IN ($1, $2)'];
    if (q.kind === 'core' || q.kind === 'tenant') where.push(`core = ${param(q.kind === 'core')}`);
    if (readable) where.push(`name = ANY(${param(readable)}::text[])`);
    if (after) {
      const name = param(after.id);
      where.push(`(NOT core, name) > (NOT EXISTS (SELECT 1 FROM item_types WHERE tenant_id = $2 AND name = ${name}), ${name}::text)`);
    }
    const rows: Array<Bounded<TypeRow & { id: string }>> = await this.db.query(
      byteBoundedPage(
        `SELECT ${COLUMNS}, name AS id FROM item_types WHERE ${where.join(' AND ')} ORDER BY core DESC, name LIMIT ${param(limit + 1)}`,
        'core DESC, name',
        'octet_length(schema::text) + octet_length(resolved_schema::text)',
      ),
      params,
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'types');
    return { types: page.map(toResponse), next_cursor };
  }

  async get(p: Principal, name: string): Promise<TypeResponse> {
    const r = await this.row(p.tenantId, name);
    if (!r || !(await this.can(p, name, 'read'))) throw ApiError.notFound('type_not_found', `No type named "${name}"`);
    return toResponse(r);
  }

  async create(p: Principal, dto: CreateTypeDto): Promise<TypeResponse> {
    if (dto.name === 'core' || dto.name.startsWith(CORE_PREFIX)) {
      throw new ApiError(403, 'core_type_immutable', 'The core namespace is reserved for built-in types');
    }
    // OAuth scopes read these as tags (`metadata:read`), admin rights (`metadata.types:write`)
    // and edge types (`edge.<type>:read`): no scope could name an item type of theirs.
    if (dto.name === 'metadata' || dto.name.startsWith('metadata.') || dto.name.startsWith('edge.')) {
      throw validationError([{ field: 'name', message: 'metadata, metadata.* and edge.* are reserved: OAuth scopes give these names other meanings' }]);
    }
    assertValidSchema(dto.schema);
    const created = await this.db.transaction(async (m) => {
      // Serialise type changes per tenant so parent checks and in-use checks cannot race.
      await lockCatalogue(m, p.tenantId, 'exclusive');
      const lineage = await this.lineage(p.tenantId, m);
      // Before anything else is answered about that name: a 409 must tell nothing of a type it may not read.
      if (!this.mayCreate(p, dto.name, dto.parent ?? null, lineage)) {
        throw ApiError.forbidden(`This credential may not create a type named "${dto.name}": it could not read it`);
      }
      // A parent it may not read is one that does not exist: its schema would come back in resolved_schema.
      if (dto.parent && !canType(p, lineage.ref(dto.parent), 'read')) throw parentNotFound(dto.parent);
      if (await this.row(p.tenantId, dto.name, m)) {
        throw ApiError.conflict('type_already_exists', `A type named "${dto.name}" already exists`, { name: dto.name });
      }
      // Compiling (in resolve) comes after every cheaper refusal: it is what costs.
      const { resolved, mergePolicy } = await this.resolve(p.tenantId, dto.parent ?? null, dto.schema, dto.merge_policy ?? {}, m);
      const now = new Date();
      const [row]: TypeRow[] = await m.query(
        `INSERT INTO item_types (tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, false, 1, $7, $7) RETURNING ${COLUMNS}`,
        [p.tenantId, dto.name, dto.parent ?? null, dto.schema, resolved, mergePolicy, now],
      );
      return toResponse(row);
    });
    await this.changed(p.tenantId);
    return created;
  }

  async update(p: Principal, name: string, dto: UpdateTypeDto): Promise<TypeResponse> {
    const updated = await this.db.transaction(async (m) => {
      await lockCatalogue(m, p.tenantId, 'exclusive');
      const current = await this.mutable(p, name, m);
      const schema = dto.schema ?? current.schema;
      assertValidSchema(schema, dto.schema !== undefined);
      const { resolved, mergePolicy } = await this.resolve(p.tenantId, current.parent, schema, dto.merge_policy ?? current.merge_policy, m);
      // A PATCH that changes nothing makes no version, as an item's does: items carry the version they were checked against.
      if (isDeepStrictEqual(schema, current.schema) && isDeepStrictEqual(mergePolicy, current.merge_policy)) return toResponse(current);
      // TypeORM answers UPDATE ... RETURNING with [rows, affected].
      const [[row]]: [TypeRow[], number] = await m.query(
        `UPDATE item_types SET schema = $3, resolved_schema = $4, merge_policy = $5, version = version + 1, updated_at = now()
          WHERE tenant_id = $1 AND name = $2 RETURNING ${COLUMNS}`,
        [p.tenantId, name, schema, resolved, mergePolicy],
      );
      return toResponse(row);
    });
    // The old version's key never comes back; other instances push theirs out in time.
    forgetValidators(validatorPrefix(p.tenantId, name));
    return updated;
  }

  async remove(p: Principal, name: string): Promise<TypeResponse> {
    const removed = await this.db.transaction(async (m) => {
      await lockCatalogue(m, p.tenantId, 'exclusive');
      const current = await this.mutable(p, name, m);
      await m.query('DELETE FROM item_types WHERE tenant_id = $1 AND name = $2', [p.tenantId, name]);
      return toResponse(current);
    });
    forgetValidators(validatorPrefix(p.tenantId, name));
    await this.changed(p.tenantId);
    return removed;
  }

  /**
   * The type for an item write, or undefined when the tenant has no such type. Within the
   * write's transaction, a tenant type is read under the shared form of the lock that changing
   * or deleting a type takes: the change then waits for items being written to commit (and its
   * `type_in_use` check sees them), and a write that waited reads the changed type. Core types
   * never change, so their (hot) writes skip the lock.
   */
  async forWrite(tenantId: string, name: string, m: EntityManager = this.db.manager): Promise<ResolvedType | undefined> {
    if (!name.startsWith(CORE_PREFIX)) await lockCatalogue(m, tenantId, 'shared');
    const r = await this.row(tenantId, name, m);
    if (!r) return undefined;
    return {
      name: r.name,
      version: r.version,
      schema: r.resolved_schema,
      mergePolicy: resolveMergePolicy(r.resolved_schema, r.merge_policy),
      validate: validatorFor(validatorKey(r), r.resolved_schema, r.tenant_id),
    };
  }

  /**
   * Names of the tenant's types the caller may access, for narrowing item queries in SQL;
   * undefined means all (admins). Resolved against the real type list so that the
   * most-specific-pattern rule applies exactly as in canType.
   */
  async permittedTypeNames(p: Principal, access: 'read' | 'write'): Promise<string[] | undefined> {
    if (isAdmin(p)) return undefined;
    const catalog = await this.catalog(p.tenantId);
    return catalog.names().filter((name) => canType(p, catalog.ref(name), access));
  }

  private async mutable(p: Principal, name: string, m: EntityManager): Promise<TypeRow> {
    const current = await this.row(p.tenantId, name, m);
    if (!current || !(await this.can(p, name, 'read'))) throw ApiError.notFound('type_not_found', `No type named "${name}"`);
    if (current.core) throw new ApiError(403, 'core_type_immutable', 'Core types cannot be changed or deleted');
    const [{ items, subtypes }] = await m.query(
      `SELECT EXISTS (SELECT 1 FROM items WHERE tenant_id = $1 AND type = $2) AS items,
              EXISTS (SELECT 1 FROM item_types WHERE tenant_id = $1 AND parent = $2) AS subtypes`,
      [p.tenantId, name],
    );
    if (items || subtypes) {
      throw ApiError.conflict('type_in_use', `Type "${name}" has ${items ? 'items' : 'subtypes'}; it can no longer be changed or deleted`, {
        has_items: items,
        has_subtypes: subtypes,
      });
    }
    return current;
  }

  /**
   * The schema items of a type with this parent and schema are validated against, checked to be
   * usable (compiled: 400 invalid_schema), and its merge policy.
   */
  private async resolve(
    tenantId: string,
    parentName: string | null,
    schema: JsonSchema,
    policy: Record<string, MergePolicy>,
    m: EntityManager,
  ): Promise<{ resolved: JsonSchema; mergePolicy: Record<string, MergePolicy> }> {
    if (!parentName) {
      const resolved = { ...schema, type: 'object' };
      assertUsableSchema(resolved);
      return { resolved, mergePolicy: policy };
    }
    const parent = await this.row(tenantId, parentName, m);
    if (!parent) throw parentNotFound(parentName);
    // Each generation copies its parent's rules, so resolved schemas grow with the square of depth.
    const chain = (await this.lineage(tenantId, m)).ref(parentName).ancestors.length + 2;
    if (chain > SCHEMA_LIMITS.typeDepth) {
      throw ApiError.badRequest('inheritance_violation', `A chain of parent types holds at most ${SCHEMA_LIMITS.typeDepth} types`, {
        fields: [{ field: 'parent', message: `has ${chain - 2} ancestors, so its subtype would have ${chain - 1}; a type has at most ${SCHEMA_LIMITS.typeDepth - 1}` }],
      });
    }
    const resolved = resolveSubtypeSchema(parent.resolved_schema, schema);
    assertUsableSchema(resolved);
    return { resolved, mergePolicy: { ...parent.merge_policy, ...policy } };
  }

  /**
   * Whether `p` may create a type `name` under `parent`: only one it could read once created (its
   * lineage counts, as for every type), so that what it makes is never hidden from it. A type of
   * that name it may not read is refused alike, not 409: the answer then differs from a create's
   * only where no grant names the type itself (names are the tenant's, one type each).
   */
  private mayCreate(p: Principal, name: string, parent: string | null, lineage: TypeCatalog): boolean {
    const ancestors = parent === null ? [] : [parent, ...lineage.ref(parent).ancestors];
    return canType(p, { name, ancestors }, 'read') && (!lineage.has(name) || canType(p, lineage.ref(name), 'read'));
  }

  /** The tenant's type lineage as it stands inside the transaction `m`. */
  private async lineage(tenantId: string, m: EntityManager): Promise<TypeCatalog> {
    return new TypeCatalog(await m.query('SELECT name, parent FROM item_types WHERE tenant_id IN ($1, $2)', [tenantId, CORE_TENANT]));
  }
}
