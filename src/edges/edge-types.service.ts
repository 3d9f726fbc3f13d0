/**
 * Owns edge types: what may link to what (source and target type patterns), cardinality and
 * acyclicity. Admins define and drop them; every caller sees the ones its edge permissions
 * let it read. An edge type with edges cannot be dropped (409 `conflict`).
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { canEdgeType, isAdmin } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { decodeCursor, PageQuery, pageOf } from '../common/pagination';
import { isDottedName } from '../common/type-pattern';
import { EDGE_TYPE_COLUMNS, EdgeTypeRow, edgeErrors, toEdgeTypeResponse } from './edge-rules';
import { CreateEdgeTypeDto, EdgeTypeList, EdgeTypeResponse } from './edges.dto';

const FOREIGN_KEY_VIOLATION = '23503';

@Injectable()
export class EdgeTypesService {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  async create(p: Principal, dto: CreateEdgeTypeDto): Promise<EdgeTypeResponse> {
    // In a transaction, which marks an Idempotency-Key applied as it commits (claim-applied.ts).
    const rows: EdgeTypeRow[] = await this.db.transaction((m) => m.query(
      `INSERT INTO edge_types (tenant_id, name, source_types, target_types, cardinality, acyclic, description, created_at)
       VALUES ($1, $2, $3::text[], $4::text[], $5, $6, $7, $8)
       ON CONFLICT (tenant_id, name) DO NOTHING
       RETURNING ${EDGE_TYPE_COLUMNS}`,
      [
        p.tenantId,
        dto.name,
        [...new Set(dto.source_types)],
        [...new Set(dto.target_types)],
        dto.cardinality ?? 'many',
        dto.acyclic ?? false,
        dto.description ?? null,
        new Date(),
      ],
    ));
    if (!rows[0]) throw ApiError.conflict('conflict', `An edge type named "${dto.name}" already exists`, { name: dto.name });
    return toEdgeTypeResponse(rows[0]);
  }

  /**
   * GET /edge-types: a page of the edge types the caller may read, by name, narrowed in SQL so
   * that every page but the last is full. The cursor has every list's form with the name as its
   * id; the name alone places it (its date goes unused).
   */
  async list(p: Principal, q: PageQuery): Promise<EdgeTypeList> {
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'edge_types', isDottedName);
    const readable = await this.readableNames(p);
    const rows: Array<EdgeTypeRow & { id: string }> = await this.db.query(
      `SELECT ${EDGE_TYPE_COLUMNS}, name AS id FROM edge_types
        WHERE tenant_id = $1 AND ($2::text[] IS NULL OR name = ANY($2)) AND ($3::text IS NULL OR name > $3)
        ORDER BY name LIMIT $4`,
      [p.tenantId, readable ?? null, after?.id ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'edge_types');
    return { edge_types: page.map(toEdgeTypeResponse), next_cursor };
  }

  /** 404 `edge_type_not_found` when missing or not readable by the caller. */
  async get(p: Principal, name: string): Promise<EdgeTypeResponse> {
    const row = canEdgeType(p, name, 'read') ? await this.find(this.db.manager, p.tenantId, name) : undefined;
    if (!row) throw edgeErrors.typeNotFound(name);
    return toEdgeTypeResponse(row);
  }

  /**
   * Drops an edge type that has no edges. The row lock makes a concurrent edge insert (whose
   * foreign-key check takes a key-share lock on the row) wait, then fail as edge_type_not_found.
   */
  async remove(p: Principal, name: string): Promise<EdgeTypeResponse> {
    return this.db.transaction(async (m) => {
      const row = await this.find(m, p.tenantId, name, 'FOR UPDATE');
      if (!row) throw edgeErrors.typeNotFound(name);
      const [{ in_use }] = await m.query(`SELECT EXISTS (SELECT 1 FROM edges WHERE tenant_id = $1 AND edge_type = $2) AS in_use`, [
        p.tenantId,
        name,
      ]);
      if (in_use) throw this.inUse(name);
      try {
        await m.query(`DELETE FROM edge_types WHERE tenant_id = $1 AND name = $2`, [p.tenantId, name]);
      } catch (err) {
        if ((err as { code?: string }).code === FOREIGN_KEY_VIOLATION) throw this.inUse(name);
        throw err;
      }
      return toEdgeTypeResponse(row);
    });
  }

  /** Edge types by name for a write inside `m` (no permission filtering: the caller checks). */
  async forWrite(m: EntityManager, tenantId: string, names: string[]): Promise<Map<string, EdgeTypeRow>> {
    if (!names.length) return new Map();
    const rows: EdgeTypeRow[] = await m.query(`SELECT ${EDGE_TYPE_COLUMNS} FROM edge_types WHERE tenant_id = $1 AND name = ANY($2::text[])`, [
      tenantId,
      names,
    ]);
    return new Map(rows.map((r) => [r.name, r]));
  }

  /** Names of the tenant's edge types the caller may read; undefined means all (admins). */
  async readableNames(p: Principal): Promise<string[] | undefined> {
    if (isAdmin(p)) return undefined;
    const rows: Array<{ name: string }> = await this.db.query(`SELECT name FROM edge_types WHERE tenant_id = $1`, [p.tenantId]);
    return rows.map((r) => r.name).filter((name) => canEdgeType(p, name, 'read'));
  }

  private async find(m: EntityManager, tenantId: string, name: string, lock = ''): Promise<EdgeTypeRow | undefined> {
    if (!isDottedName(name)) return undefined;
    const rows: EdgeTypeRow[] = await m.query(`SELECT ${EDGE_TYPE_COLUMNS} FROM edge_types WHERE tenant_id = $1 AND name = $2 ${lock}`, [tenantId, name]);
    return rows[0];
  }

  private inUse(name: string): ApiError {
    return ApiError.conflict('conflict', `Edge type "${name}" still has edges; delete them first`, { name });
  }
}
