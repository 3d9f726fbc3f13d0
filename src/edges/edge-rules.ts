/**
 * The pure rules of edges: row shapes, the JSON they become, the type constraint of an edge
 * type, the advisory-lock key that serialises cardinality and cycle checks, and the errors
 * of SPEC part 7 (rules 2 and 3) with their `details`.
 */
import { canEdgeType, canType } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { matchesPattern, TypeRef } from '../common/type-pattern';
import type { TypeCatalog } from '../types/type-catalog';
import type { Cardinality, EdgeResponse, EdgeTypeResponse } from './edges.dto';

/** Most edges one item write may carry in its `edges` field, all types together. */
export const MAX_EDGES_PER_ITEM_WRITE = 1000;

export interface EdgeTypeRow {
  name: string;
  source_types: string[];
  target_types: string[];
  cardinality: Cardinality;
  acyclic: boolean;
  description: string | null;
  created_at: Date;
}

export interface EdgeRow {
  id: string;
  edge_type: string;
  source_id: string;
  target_id: string;
  properties: Record<string, unknown>;
  created_at: Date;
}

/** An edge with the types of its two items, which decide who may see and change it. */
export interface EdgeWithEnds extends EdgeRow {
  source_type: string;
  target_type: string;
}

/** An item as far as edges care: its id and its type. */
export interface ItemRef {
  id: string;
  type: string;
}

export const EDGE_TYPE_COLUMNS = 'name, source_types, target_types, cardinality, acyclic, description, created_at';
export const EDGE_COLUMNS = 'id, edge_type, source_id, target_id, properties, created_at';

export function toEdgeTypeResponse(r: EdgeTypeRow): EdgeTypeResponse {
  return {
    name: r.name,
    source_types: r.source_types,
    target_types: r.target_types,
    cardinality: r.cardinality,
    acyclic: r.acyclic,
    description: r.description,
    created_at: r.created_at.toISOString(),
  };
}

export function toEdgeResponse(r: EdgeRow): EdgeResponse {
  return {
    id: r.id,
    type: r.edge_type,
    source_id: r.source_id,
    target_id: r.target_id,
    properties: r.properties,
    created_at: r.created_at.toISOString(),
  };
}

/** Whether an item of `itemType` may sit at that end of an edge of type `et`. */
export function endAllowed(et: Pick<EdgeTypeRow, 'source_types' | 'target_types'>, end: 'source' | 'target', itemType: string | TypeRef): boolean {
  const patterns = end === 'source' ? et.source_types : et.target_types;
  return patterns.some((pattern) => matchesPattern(pattern, itemType));
}

/** Reading an edge needs read on its edge type and on the types of both of its items. */
export function canSeeEdge(p: Principal, e: Pick<EdgeWithEnds, 'edge_type' | 'source_type' | 'target_type'>, types: TypeCatalog): boolean {
  return canEdgeType(p, e.edge_type, 'read') && canType(p, types.ref(e.source_type), 'read') && canType(p, types.ref(e.target_type), 'read');
}

/**
 * The dual gate of SPEC 2.7 / part 7 rule 3, first half: creating or deleting an edge needs
 * write on the edge type. Checked on the name alone, before any lookup, so a caller without
 * it learns nothing about which edge types exist.
 */
export function assertEdgeWrite(p: Principal, edgeType: string): void {
  if (!canEdgeType(p, edgeType, 'write')) {
    throw new ApiError(403, 'edge_permission_denied', `This credential lacks write permission on edge type ${edgeType}`, {
      missing: 'edge_type_write',
      edge_type: edgeType,
    });
  }
}

/** Second half of the dual gate: write on the type of the edge's source item. */
export function assertSourceWrite(p: Principal, sourceType: TypeRef): void {
  if (!canType(p, sourceType, 'write')) {
    throw new ApiError(403, 'edge_permission_denied', `This credential lacks write permission on item type ${sourceType.name}`, {
      missing: 'item_type_write',
      item_type: sourceType.name,
    });
  }
}

/**
 * The advisory-lock key that serialises the checks of one edge type: type-wide for acyclic
 * types (a cycle can run through any edge of the type), per source item for `one` types, none
 * otherwise (the unique constraint settles duplicates by itself).
 */
export function lockKey(tenantId: string, et: Pick<EdgeTypeRow, 'name' | 'cardinality' | 'acyclic'>, sourceId: string): string | undefined {
  if (et.acyclic) return `edges:${tenantId}:${et.name}`;
  if (et.cardinality === 'one') return `edges:${tenantId}:${et.name}:${sourceId}`;
  return undefined;
}

export const edgeErrors = {
  typeNotFound: (name: string) =>
    new ApiError(404, 'edge_type_not_found', `No edge type named "${name}"`, { edge_type: name }),
  edgeNotFound: (id: string) => ApiError.notFound('edge_not_found', `No edge with id ${id}`),
  itemNotFound: (id: string, field: string) => new ApiError(404, 'item_not_found', `No item with id ${id}`, { id, field }),
  typeViolation: (et: EdgeTypeRow, end: 'source' | 'target', item: ItemRef) =>
    ApiError.badRequest(
      'edge_constraint_violation',
      `Edge type ${et.name} does not allow an item of type ${item.type} as its ${end}`,
      { reason: 'type', edge_type: et.name, end, item_id: item.id, item_type: item.type, allowed: end === 'source' ? et.source_types : et.target_types },
    ),
  cardinality: (et: EdgeTypeRow, sourceId: string) =>
    ApiError.badRequest('edge_constraint_violation', `Edge type ${et.name} allows one outgoing edge per item, and ${sourceId} would have more`, {
      reason: 'cardinality',
      edge_type: et.name,
      cardinality: et.cardinality,
      source_id: sourceId,
    }),
  tooMany: (sourceId: string, has: number, adding: number, limit: number) =>
    ApiError.badRequest('edge_constraint_violation', `Item ${sourceId} may have at most ${limit} outgoing edges; it has ${has}, and this adds ${adding}`, {
      reason: 'limit',
      source_id: sourceId,
      limit,
      existing: has,
    }),
  duplicate: (edgeType: string, sourceId: string, targetId: string, existingId?: string) =>
    ApiError.badRequest('edge_constraint_violation', `An edge ${edgeType} from ${sourceId} to ${targetId} already exists`, {
      reason: 'duplicate',
      edge_type: edgeType,
      source_id: sourceId,
      target_id: targetId,
      ...(existingId ? { existing_edge_id: existingId } : {}),
    }),
  cycle: (edgeType: string, sourceId: string, targetId: string) =>
    ApiError.badRequest('edge_cycle', `Edge type ${edgeType} is acyclic, and an edge from ${sourceId} to ${targetId} would close a cycle`, {
      edge_type: edgeType,
      source_id: sourceId,
      target_id: targetId,
    }),
};

/** One outgoing edge as outgoingEdgesSql returns it: `[edge_type, target_id, target_type]`. */
export type FetchedOutgoingEdge = [string, string, string];

/**
 * A correlated subquery over the item alias `i` and the tenant parameter `tenant`: the item's
 * outgoing edges as a JSON array of `[edge_type, target_id, target_type]` in creation order (the
 * order `outgoingFor` reads them in), for `outgoingFromFetched`. Lets a page's own statement
 * bring its items' edges instead of a second round trip.
 */
export function outgoingEdgesSql(tenant: string): string {
  return `(SELECT json_agg(json_build_array(e.edge_type, e.target_id, t.type) ORDER BY e.created_at, e.id)
             FROM edges e
             JOIN items t ON t.tenant_id = e.tenant_id AND t.id = e.target_id
            WHERE e.tenant_id = ${tenant} AND e.source_id = i.id)`;
}
