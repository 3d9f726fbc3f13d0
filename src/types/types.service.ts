/**
 * Owns item types: the seeded core types (immutable) and each tenant's own, with schema
 * inheritance, merge policies and the validators items are checked against.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { ValidateFunction } from 'ajv';
import { DataSource, EntityManager } from 'typeorm';
import { canType } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { CreateTypeDto, TypeResponse, UpdateTypeDto } from './types.dto';
import { assertValidSchema, JsonSchema, MergePolicy, resolveMergePolicy, resolveSubtypeSchema, validatorFor } from './type-schema';

export const CORE_TENANT = '00000000-0000-0000-0000-000000000000';

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
  validate: ValidateFunction;
}

const COLUMNS = 'tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at';

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
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  private async rows(tenantId: string, m: EntityManager = this.db.manager): Promise<TypeRow[]> {
    return m.query(`SELECT ${COLUMNS} FROM item_types WHERE tenant_id IN ($1, $2) ORDER BY core DESC, name`, [tenantId, CORE_TENANT]);
  }

  private async row(tenantId: string, name: string, m: EntityManager = this.db.manager): Promise<TypeRow | undefined> {
    const rows: TypeRow[] = await m.query(`SELECT ${COLUMNS} FROM item_types WHERE tenant_id IN ($1, $2) AND name = $3`, [
      tenantId,
      CORE_TENANT,
      name,
    ]);
    return rows[0];
  }

  async list(p: Principal, kind: 'all' | 'core' | 'tenant' = 'all'): Promise<TypeResponse[]> {
    return (await this.rows(p.tenantId))
      .filter((r) => canType(p, r.name, 'read') && (kind === 'all' || (kind === 'core') === r.core))
      .map(toResponse);
  }

  async get(p: Principal, name: string): Promise<TypeResponse> {
    const r = await this.row(p.tenantId, name);
    if (!r || !canType(p, name, 'read')) throw ApiError.notFound('type_not_found', `No type named "${name}"`);
    return toResponse(r);
  }

  async create(p: Principal, dto: CreateTypeDto): Promise<TypeResponse> {
    if (dto.name === 'core' || dto.name.startsWith('core.')) {
      throw new ApiError(403, 'core_type_immutable', 'The core namespace is reserved for built-in types');
    }
    assertValidSchema(dto.schema);
    return this.db.transaction(async (m) => {
      // Serialise type changes per tenant so parent checks and in-use checks cannot race.
      await m.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`types:${p.tenantId}`]);
      if (await this.row(p.tenantId, dto.name, m)) {
        throw ApiError.conflict('type_already_exists', `A type named "${dto.name}" already exists`, { name: dto.name });
      }
      const { resolved, mergePolicy } = await this.resolve(p.tenantId, dto.parent ?? null, dto.schema, dto.merge_policy ?? {}, m);
      const now = new Date();
      const [row]: TypeRow[] = await m.query(
        `INSERT INTO item_types (tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, false, 1, $7, $7) RETURNING ${COLUMNS}`,
        [p.tenantId, dto.name, dto.parent ?? null, dto.schema, resolved, mergePolicy, now],
      );
      return toResponse(row);
    });
  }

  async update(p: Principal, name: string, dto: UpdateTypeDto): Promise<TypeResponse> {
    return this.db.transaction(async (m) => {
      await m.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`types:${p.tenantId}`]);
      const current = await this.mutable(p, name, m);
      const schema = dto.schema ?? current.schema;
      assertValidSchema(schema);
      const { resolved, mergePolicy } = await this.resolve(p.tenantId, current.parent, schema, dto.merge_policy ?? current.merge_policy, m);
      // TypeORM answers UPDATE ... RETURNING with [rows, affected].
      const [[row]]: [TypeRow[], number] = await m.query(
        `UPDATE item_types SET schema = $3, resolved_schema = $4, merge_policy = $5, version = version + 1, updated_at = now()
          WHERE tenant_id = $1 AND name = $2 RETURNING ${COLUMNS}`,
        [p.tenantId, name, schema, resolved, mergePolicy],
      );
      return toResponse(row);
    });
  }

  async remove(p: Principal, name: string): Promise<TypeResponse> {
    return this.db.transaction(async (m) => {
      await m.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`types:${p.tenantId}`]);
      const current = await this.mutable(p, name, m);
      await m.query('DELETE FROM item_types WHERE tenant_id = $1 AND name = $2', [p.tenantId, name]);
      return toResponse(current);
    });
  }

  /** The type for an item write, or undefined when the tenant has no such type. */
  async forWrite(tenantId: string, name: string, m: EntityManager = this.db.manager): Promise<ResolvedType | undefined> {
    const r = await this.row(tenantId, name, m);
    if (!r) return undefined;
    return {
      name: r.name,
      version: r.version,
      schema: r.resolved_schema,
      mergePolicy: resolveMergePolicy(r.resolved_schema, r.merge_policy),
      validate: validatorFor(`${r.tenant_id}:${r.name}:${r.version}:${r.updated_at.getTime()}`, r.resolved_schema),
    };
  }

  /**
   * Names of the tenant's types the caller may access, for narrowing item queries in SQL;
   * undefined means all (admins). Resolved against the real type list so that the
   * most-specific-pattern rule applies exactly as in canType.
   */
  async permittedTypeNames(p: Principal, access: 'read' | 'write'): Promise<string[] | undefined> {
    if (p.role === 'admin') return undefined;
    return (await this.rows(p.tenantId)).map((r) => r.name).filter((name) => canType(p, name, access));
  }

  private async mutable(p: Principal, name: string, m: EntityManager): Promise<TypeRow> {
    const current = await this.row(p.tenantId, name, m);
    if (!current || !canType(p, name, 'read')) throw ApiError.notFound('type_not_found', `No type named "${name}"`);
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

  private async resolve(
    tenantId: string,
    parentName: string | null,
    schema: JsonSchema,
    policy: Record<string, MergePolicy>,
    m: EntityManager,
  ): Promise<{ resolved: JsonSchema; mergePolicy: Record<string, MergePolicy> }> {
    if (!parentName) return { resolved: { ...schema, type: 'object' }, mergePolicy: policy };
    const parent = await this.row(tenantId, parentName, m);
    if (!parent) throw ApiError.notFound('type_not_found', `Parent type "${parentName}" does not exist`);
    return {
      resolved: resolveSubtypeSchema(parent.resolved_schema, schema),
      mergePolicy: { ...parent.merge_policy, ...policy },
    };
  }
}
