/**
 * Owns item types: the seeded core types (immutable) and each tenant's own, with schema
 * inheritance, merge policies, the validators items are checked against, and which schema
 * changes a type that has items or subtypes may take.
 */
import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
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
import { assertValidSchema, JsonSchema } from './type-schema';
import { SCHEMA_LIMITS } from './schema-limits';
import { resolveSubtypeSchema } from './subtype-schema';
import { assertUsableSchema, forgetValidators } from './compiled-validators';
import { PropertiesValidator, validatorFor } from './property-validation';
import { propertyIssues } from './property-issues';
import { MergePolicy, resolveMergePolicy } from './merge-policy';
import { addedProperties, isWidening } from './schema-widening';
import { sameSearchView } from './search-view';

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

/**
 * The most items a PATCH of a type in use reads to check a schema change that isWidening cannot
 * prove safe (the type's and its subtypes' together): the tenant's writes of tenant-type items
 * wait while it runs (update). Above it, such a change is refused unread.
 */
export const SCHEMA_CHECK_MAX_ITEMS = 10_000;
/** Items read at a time during that check. */
const SCHEMA_CHECK_PAGE = 500;
/** Items a refusal names at most; the check stops once it has found them. */
const SCHEMA_CHECK_MAX_REPORTED = 10;
/** Problems named per item. */
const SCHEMA_CHECK_FIELDS_REPORTED = 5;

/**
 * Whether the next UPDATE of a resolved schema in this transaction reindexes the type's items for
 * search (migration 1732300005800): not when what search reads of the schema stays (search-view.ts),
 * which spares a rewrite of every item row of a type in use for, say, a new property.
 */
function searchReindex(m: EntityManager, unchanged: boolean): Promise<unknown> {
  return m.query(`SELECT set_config('svc.search_reindex', $1, true)`, [unchanged ? 'off' : 'on']);
}

interface InvalidItem {
  id: string;
  type: string;
  fields: Array<{ field: string; message: string }>;
}

/** Why `properties` do not fit: fields named as an item write names them (`properties.<field>`); [] when they fit. */
async function itemIssues(validate: PropertiesValidator, properties: Record<string, unknown>): Promise<Array<{ field: string; message: string }>> {
  let errors;
  try {
    errors = await validate(properties);
  } catch (err) {
    // The schema cannot check them (a time limit): not shown to fit, so counted against the change.
    if (err instanceof ApiError) return [{ field: 'properties', message: err.message }];
    throw err;
  }
  if (!errors.length) return [];
  const { missing, invalid } = propertyIssues(errors);
  const at = (field: string) => (field === '' ? 'properties' : `properties.${field}`);
  return [...missing.map((field) => ({ field: at(field), message: 'is required' })), ...invalid.map((i) => ({ field: at(i.field), message: i.message }))];
}

const parentNotFound = (name: string) => ApiError.notFound('type_not_found', `Parent type "${name}" does not exist`);

const COLUMNS = 'tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at';

/**
 * What a type's validators are cached under (compiled-validators.ts): a key that changes with the
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

  /**
   * PATCH /types/{name}. A type without items or subtypes takes any valid schema, as always. One
   * in use takes a new schema only when every item it and its subtypes hold stays valid: proven
   * from the schemas alone (isWidening: the old resolved schema against the new, for the type
   * and for each subtype, whose resolved schema is computed again on the new parent), or else
   * found by reading the items (checkItems, at most SCHEMA_CHECK_MAX_ITEMS of them); otherwise
   * 409 `type_in_use`. The merge policy alone changes freely: it is read only when an item is
   * next written, and no stored item depends on it (a subtype keeps the copy it took when it
   * was created). Changed types (subtypes included) each get a new version; items keep the
   * `schema_version` they were written under, which stays a version they fit (README "Types").
   *
   * No item can slip in under the old schema between the check and the switch: the exclusive
   * catalogue lock is held from the first statement to the commit, and every write of an item
   * of a tenant type reads its type through forWrite, which takes the shared form of that lock
   * in the write's transaction and keeps it to the commit. So a write that read the old schema
   * has committed before this transaction gets the lock (and READ COMMITTED gives each
   * statement here a snapshot taken after it, so the check reads that item), and a write that
   * comes later waits for the commit and reads the new schema. That lock already existed for
   * the `type_in_use` check; locking item rows instead would cost a row lock per item for the
   * same outcome. The price: the tenant's writes of tenant-type items wait while the check runs
   * (bounded by SCHEMA_CHECK_MAX_ITEMS), as they wait for the search reindex that a change of
   * what search reads of the schema triggers (migrations 1732300000500, 1732300005800: a change
   * search does not see skips it). That reindex updates the item rows, so
   * an item PATCH that locked its row before asking for the catalogue lock can deadlock with it:
   * PostgreSQL then aborts one of the two and it is answered 409 `conflict` (safe to retry).
   */
  async update(p: Principal, name: string, dto: UpdateTypeDto): Promise<TypeResponse> {
    const changed: string[] = [];
    try {
      return await this.db.transaction(async (m) => {
        await lockCatalogue(m, p.tenantId, 'exclusive');
        const current = await this.changeable(p, name, m);
        const schema = dto.schema ?? current.schema;
        assertValidSchema(schema, dto.schema !== undefined);
        const { resolved, mergePolicy } = await this.resolve(p.tenantId, current.parent, schema, dto.merge_policy ?? current.merge_policy, m);
        // A PATCH that changes nothing makes no version, as an item's does: items carry the version they were checked against.
        if (isDeepStrictEqual(schema, current.schema) && isDeepStrictEqual(mergePolicy, current.merge_policy)) return toResponse(current);
        // A refusal names only the subtypes and items the caller may read (a type's writer need not read its subtypes).
        const permitted = await this.permittedTypeNames(p, 'read');
        const readable = (type: string) => permitted === undefined || permitted.includes(type);
        const affected = isDeepStrictEqual(resolved, current.resolved_schema) ? [] : await this.resolvedAnew(p.tenantId, current, resolved, readable, m);
        changed.push(name, ...affected.map((a) => a.row.name));
        await this.assertItemsStayValid(p.tenantId, [{ row: current, resolved }, ...affected], readable, m);
        await searchReindex(m, sameSearchView(current.resolved_schema, resolved));
        // TypeORM answers UPDATE ... RETURNING with [rows, affected].
        const [[row]]: [TypeRow[], number] = await m.query(
          `UPDATE item_types SET schema = $3, resolved_schema = $4, merge_policy = $5, version = version + 1, updated_at = now()
            WHERE tenant_id = $1 AND name = $2 RETURNING ${COLUMNS}`,
          [p.tenantId, name, schema, resolved, mergePolicy],
        );
        for (const sub of affected) {
          await searchReindex(m, sameSearchView(sub.row.resolved_schema, sub.resolved));
          await m.query(`UPDATE item_types SET resolved_schema = $3, version = version + 1, updated_at = now() WHERE tenant_id = $1 AND name = $2`, [
            p.tenantId,
            sub.row.name,
            sub.resolved,
          ]);
        }
        return toResponse(row);
      });
    } finally {
      // The old versions' keys never come back (nor the one a refused change was checked under);
      // other instances push theirs out in time.
      for (const type of changed) forgetValidators(validatorPrefix(p.tenantId, type));
    }
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

  /** The tenant type `name` for a change: 404 when the caller cannot read it, 403 for a core type. */
  private async changeable(p: Principal, name: string, m: EntityManager): Promise<TypeRow> {
    const current = await this.row(p.tenantId, name, m);
    if (!current || !(await this.can(p, name, 'read'))) throw ApiError.notFound('type_not_found', `No type named "${name}"`);
    if (current.core) throw new ApiError(403, 'core_type_immutable', 'Core types cannot be changed or deleted');
    return current;
  }

  /** changeable(), and refused with 409 `type_in_use` while the type has items or subtypes (DELETE). */
  private async mutable(p: Principal, name: string, m: EntityManager): Promise<TypeRow> {
    const current = await this.changeable(p, name, m);
    const [{ items, subtypes }] = await m.query(
      `SELECT EXISTS (SELECT 1 FROM items WHERE tenant_id = $1 AND type = $2) AS items,
              EXISTS (SELECT 1 FROM item_types WHERE tenant_id = $1 AND parent = $2) AS subtypes`,
      [p.tenantId, name],
    );
    if (items || subtypes) {
      throw ApiError.conflict('type_in_use', `Type "${name}" has ${items ? 'items' : 'subtypes'}; it can no longer be deleted`, {
        has_items: items,
        has_subtypes: subtypes,
      });
    }
    return current;
  }

  /**
   * Every subtype of `type` (at any depth) with the resolved schema it gets when `type`'s becomes
   * `resolved`, parents before their children; those whose resolved schema stays are left out.
   * A subtype that would contradict the new parent, or outgrow the schema limits, refuses the
   * change: 409 `type_in_use` naming it, with the error its own PATCH would get.
   */
  private async resolvedAnew(
    tenantId: string,
    type: TypeRow,
    resolved: JsonSchema,
    readable: (type: string) => boolean,
    m: EntityManager,
  ): Promise<Array<{ row: TypeRow; resolved: JsonSchema }>> {
    const lineage = await this.lineage(tenantId, m);
    const names = lineage.names().filter((n) => lineage.ref(n).ancestors.includes(type.name));
    if (!names.length) return [];
    const rows: TypeRow[] = await m.query(`SELECT ${COLUMNS} FROM item_types WHERE tenant_id = $1 AND name = ANY($2::text[])`, [tenantId, names]);
    rows.sort((a, b) => lineage.ref(a.name).ancestors.length - lineage.ref(b.name).ancestors.length);
    const resolvedOf = new Map<string, JsonSchema>([[type.name, resolved]]);
    const out: Array<{ row: TypeRow; resolved: JsonSchema }> = [];
    for (const row of rows) {
      let next: JsonSchema;
      try {
        next = resolveSubtypeSchema(resolvedOf.get(row.parent!)!, row.schema);
        assertUsableSchema(next);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        if (!readable(row.name)) throw ApiError.conflict('type_in_use', 'A subtype this credential may not read could not take the change', { reason: 'subtype_conflict' });
        throw ApiError.conflict('type_in_use', `Subtype "${row.name}" could not take the change: ${err.message}`, {
          reason: 'subtype_conflict',
          subtype: row.name,
          error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) },
        });
      }
      resolvedOf.set(row.name, next);
      if (!isDeepStrictEqual(next, row.resolved_schema)) out.push({ row, resolved: next });
    }
    return out;
  }

  /**
   * Refuses (409 `type_in_use`) a change of resolved schemas that could leave an item invalid.
   * Where isWidening proves the new schema accepts all the old one did (provenWidening), no item is validated; the
   * items of the other types are counted (at most SCHEMA_CHECK_MAX_ITEMS, or refused unread)
   * and checked against their type's new schema, in pages by id. Every state counts: an item
   * in the trash can be restored as it is.
   */
  private async assertItemsStayValid(
    tenantId: string,
    changes: Array<{ row: TypeRow; resolved: JsonSchema }>,
    readable: (type: string) => boolean,
    m: EntityManager,
  ): Promise<void> {
    const unproven: Array<{ row: TypeRow; resolved: JsonSchema }> = [];
    for (const c of changes) if (!(await this.provenWidening(tenantId, c.row, c.resolved, m))) unproven.push(c);
    if (!unproven.length) return;
    const names = unproven.map((c) => c.row.name);
    const [{ n }]: Array<{ n: number }> = await m.query(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM items WHERE tenant_id = $1 AND type = ANY($2::text[]) LIMIT $3) held`,
      [tenantId, names, SCHEMA_CHECK_MAX_ITEMS + 1],
    );
    if (n > SCHEMA_CHECK_MAX_ITEMS) {
      throw ApiError.conflict(
        'type_in_use',
        `The change may not fit every existing item, and the type${names.length > 1 ? ' and its subtypes hold' : ' holds'} more than ${SCHEMA_CHECK_MAX_ITEMS} items, more than are checked`,
        { reason: 'too_many_items', types: names.filter(readable), max_checked_items: SCHEMA_CHECK_MAX_ITEMS },
      );
    }
    const invalid: InvalidItem[] = [];
    for (const { row, resolved } of unproven) {
      if (invalid.length >= SCHEMA_CHECK_MAX_REPORTED) break;
      await this.checkItems(tenantId, row.name, validatorFor(`${validatorPrefix(tenantId, row.name)}check:${randomUUID()}`, resolved, tenantId), invalid, m);
    }
    if (invalid.length) {
      const shown = invalid.filter((i) => readable(i.type));
      const [first] = shown;
      const message = first
        ? `Item ${first.id} of type "${first.type}" would not fit the new schema (${first.fields[0]?.field} ${first.fields[0]?.message})`
        : 'Items of a subtype this credential may not read would not fit the new schema';
      throw ApiError.conflict('type_in_use', message, {
        reason: 'items_invalid',
        invalid_items: shown,
        ...(shown.length < invalid.length ? { unreadable_items: invalid.length - shown.length } : {}),
      });
    }
  }

  /**
   * Whether `type`'s items all fit `resolved` by isWidening alone, given which of the top-level
   * properties it adds no item of the type holds. A property added to an open schema (no
   * `additionalProperties: false`) constrains a key items could already hold, with any value;
   * when none holds it, the change is proven all the same. Finding that out reads the key sets
   * of all the type's items in SQL (no validation, no bound: it costs less than the search
   * reindex the change may bring), which is what lets a type of any size gain a property.
   */
  private async provenWidening(tenantId: string, type: TypeRow, resolved: JsonSchema, m: EntityManager): Promise<boolean> {
    if (isWidening(type.resolved_schema, resolved)) return true;
    const added = addedProperties(type.resolved_schema, resolved);
    if (!added.length || !isWidening(type.resolved_schema, resolved, new Set(added))) return false;
    const held: Array<{ key: string }> = await m.query(
      `SELECT k AS key FROM unnest($3::text[]) k WHERE EXISTS (SELECT 1 FROM items WHERE tenant_id = $1 AND type = $2 AND properties ? k)`,
      [tenantId, type.name, added],
    );
    if (!held.length) return true;
    const heldKeys = new Set(held.map((h) => h.key));
    return isWidening(type.resolved_schema, resolved, new Set(added.filter((k) => !heldKeys.has(k))));
  }

  /** Adds to `invalid` the items of `type` that `validate` refuses, reading them in pages by id, until it holds SCHEMA_CHECK_MAX_REPORTED. */
  private async checkItems(tenantId: string, type: string, validate: PropertiesValidator, invalid: InvalidItem[], m: EntityManager): Promise<void> {
    for (let after: string | null = null; ; ) {
      const page: Array<{ id: string; properties: Record<string, unknown> }> = await m.query(
        `SELECT id, properties FROM items WHERE tenant_id = $1 AND type = $2 AND ($3::uuid IS NULL OR id > $3::uuid) ORDER BY id LIMIT $4`,
        [tenantId, type, after, SCHEMA_CHECK_PAGE],
      );
      for (const item of page) {
        const fields = await itemIssues(validate, item.properties);
        if (!fields.length) continue;
        invalid.push({ id: item.id, type, fields: fields.slice(0, SCHEMA_CHECK_FIELDS_REPORTED) });
        if (invalid.length >= SCHEMA_CHECK_MAX_REPORTED) return;
      }
      if (page.length < SCHEMA_CHECK_PAGE) return;
      after = page[page.length - 1].id;
    }
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
