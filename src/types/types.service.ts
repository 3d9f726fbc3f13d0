/**
 * Owns item types: the seeded core types (immutable) and each tenant's own, with schema
 * inheritance, merge policies, the validators items are checked against, and which schema
 * changes a type that has items or subtypes may take (whether its items still fit:
 * schema-change-check.ts). Which types exist, as permissions see them: type-catalog.ts.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { isDeepStrictEqual } from 'node:util';
import { DataSource, EntityManager } from 'typeorm';
import { canType } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { validationError } from '../common/validation';
import { Bounded, byteBoundedPage, decodeCursor, pageOf } from '../common/pagination';
import { isDottedName } from '../common/type-pattern';
import { CreateTypeDto, ListTypesQuery, TypeList, TypeResponse, UpdateTypeDto } from './types.dto';
import { assertValidSchema, JsonSchema } from './type-schema';
import { SCHEMA_LIMITS } from './schema-limits';
import { resolveSubtypeSchema } from './subtype-schema';
import { assertUsableSchema, forgetValidators, validatorPrefix } from './compiled-validators';
import { PropertiesValidator, validatorFor } from './property-validation';
import { MergePolicy, resolveMergePolicy } from './merge-policy';
import { sameSearchView } from './search-view';
import { CORE_PREFIX, CORE_TENANT } from './core-types';
import { lineageIn, lockCatalogue, TypeCatalog, TypeCatalogService } from './type-catalog';
import { assertItemsStayValid } from './schema-change-check';

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
 * Whether the next UPDATE of a resolved schema in this transaction reindexes the type's items for
 * search (migration 1732300005800): not when what search reads of the schema stays (search-view.ts),
 * which spares a rewrite of every item row of a type in use for, say, a new property.
 */
function searchReindex(m: EntityManager, unchanged: boolean): Promise<unknown> {
  return m.query(`SELECT set_config('svc.search_reindex', $1, true)`, [unchanged ? 'off' : 'on']);
}

const parentNotFound = (name: string) => ApiError.notFound('type_not_found', `Parent type "${name}" does not exist`);

const COLUMNS = 'tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at';

/**
 * What a type's validators are cached under (compiled-validators.ts): a key that changes with the
 * schema, beginning with the type's `tenant:name:` (validatorPrefix).
 */
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
export class TypesService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly typeCatalog: TypeCatalogService,
  ) {}

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
    const readable = await this.typeCatalog.permittedTypeNames(p, 'read');
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
    if (!r || !(await this.typeCatalog.can(p, name, 'read'))) throw ApiError.notFound('type_not_found', `No type named "${name}"`);
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
      const lineage = await lineageIn(m, p.tenantId);
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
    await this.typeCatalog.changed(p.tenantId);
    return created;
  }

  /**
   * PATCH /types/{name}. A type without items or subtypes takes any valid schema, as always. One
   * in use takes a new schema only when every item it and its subtypes hold stays valid: proven
   * from the schemas alone (isWidening: the old resolved schema against the new, for the type
   * and for each subtype, whose resolved schema is computed again on the new parent), or else
   * found by reading the items (assertItemsStayValid in schema-change-check.ts, at most SCHEMA_CHECK_MAX_ITEMS of them); otherwise
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
        const permitted = await this.typeCatalog.permittedTypeNames(p, 'read');
        const readable = (type: string) => permitted === undefined || permitted.includes(type);
        const affected = isDeepStrictEqual(resolved, current.resolved_schema) ? [] : await this.resolvedAnew(p.tenantId, current, resolved, readable, m);
        changed.push(name, ...affected.map((a) => a.row.name));
        await assertItemsStayValid(p.tenantId, [{ row: current, resolved }, ...affected], readable, m);
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
    await this.typeCatalog.changed(p.tenantId);
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

  /** The tenant type `name` for a change: 404 when the caller cannot read it, 403 for a core type. */
  private async changeable(p: Principal, name: string, m: EntityManager): Promise<TypeRow> {
    const current = await this.row(p.tenantId, name, m);
    if (!current || !(await this.typeCatalog.can(p, name, 'read'))) throw ApiError.notFound('type_not_found', `No type named "${name}"`);
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
    const lineage = await lineageIn(m, tenantId);
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
    const chain = (await lineageIn(m, tenantId)).ref(parentName).ancestors.length + 2;
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
}
