/**
 * The item filter shared by `GET /items`, `GET /search` and bulk actions: one parser for the
 * query parameters and one SQL builder, so the three surfaces select exactly alike.
 *
 * Edge clauses (repeatable, AND):
 *   edge=<edge type>:<item id>     items with an outgoing edge of that type to the item
 *   backref=<edge type>:<item id>  items the given item points to with that type
 * `*` as the edge type matches any type.
 */
import { validationError } from '../common/validation';
import { isId } from '../common/ids';
import { isDottedName, isPattern } from '../common/type-pattern';
import type { Tier } from '../keys/api-key.entity';
import { ItemState, STATES } from './lifecycle';

export interface EdgeClause {
  edgeType: string; // name or '*'
  itemId: string;
  /** For `*`: the edge types the caller may read, when that is not all of them. */
  readableEdgeTypes?: string[];
}

export interface ItemFilter {
  /** The types a `type` pattern covers, subtypes included (resolved against the catalog). */
  types?: string[];
  state?: ItemState | 'all';
  tier?: Tier | 'all';
  tags?: string[];
  source?: string;
  since?: string;
  until?: string;
  edges?: EdgeClause[];
  backrefs?: EdgeClause[];
  /** Set by the service from the caller's permissions; undefined = no narrowing. */
  permittedTypes?: string[];
  /**
   * The types of the items at the other end of an edge clause that the caller may read;
   * undefined = all. An edge to an item the caller cannot see is not there for it: a clause
   * naming one would otherwise tell that the item exists, and what links to it.
   */
  readableTypes?: string[];
}

/**
 * Each clause is an EXISTS subquery: a few hundred of them keep PostgreSQL planning for minutes,
 * so a filter takes at most this many of each kind.
 */
export const MAX_EDGE_CLAUSES = 10;

export function parseEdgeClauses(field: string, raw: string | string[] | undefined): EdgeClause[] {
  if (raw === undefined) return [];
  const values = Array.isArray(raw) ? raw : [raw];
  if (values.length > MAX_EDGE_CLAUSES) throw validationError([{ field, message: `takes at most ${MAX_EDGE_CLAUSES} clauses` }]);
  return values.map((v) => {
    const i = v.lastIndexOf(':');
    const edgeType = v.slice(0, i);
    const itemId = v.slice(i + 1);
    if (i < 1 || !(edgeType === '*' || isDottedName(edgeType)) || !isId(itemId)) {
      throw validationError([{ field, message: 'must look like <edge type>:<item id>' }]);
    }
    return { edgeType, itemId: itemId.toLowerCase() };
  });
}

export function parseTags(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const tags = raw.split(',').map((t) => t.trim()).filter(Boolean);
  return tags.length ? tags : undefined;
}

/** Validates a type pattern given as a filter. */
export function assertTypePattern(pattern: string | undefined): void {
  if (pattern !== undefined && !isPattern(pattern)) {
    throw validationError([{ field: 'type', message: 'must be a type name or a pattern such as core.* or *' }]);
  }
}

/**
 * Appends the WHERE conditions for `f` (alias `i` for items) to `params`. The tenant is always
 * the first condition.
 */
export function itemWhere(tenantId: string, f: ItemFilter, params: unknown[], alias = 'i'): string {
  const p = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const where = [`${alias}.tenant_id = ${p(tenantId)}`];
  if (f.permittedTypes !== undefined) where.push(`${alias}.type = ANY(${p(f.permittedTypes)}::text[])`);
  if (f.types !== undefined) where.push(`${alias}.type = ANY(${p(f.types)}::text[])`);
  const state = f.state ?? 'active';
  if (state !== 'all') {
    if (!STATES.includes(state)) throw validationError([{ field: 'state', message: 'unknown state' }]);
    where.push(`${alias}.state = ${p(state)}`);
  }
  if (f.tier && f.tier !== 'all') where.push(`${alias}.tier = ${p(f.tier)}`);
  if (f.tags?.length) where.push(`${alias}.tags @> ${p(f.tags)}::text[]`);
  if (f.source !== undefined) where.push(`${alias}.source = ${p(f.source)}`);
  // Already cut to the millisecond, as timestamps are stored (common/validation.ts IsRfc3339).
  if (f.since !== undefined) where.push(`${alias}."timestamp" >= ${p(f.since)}`);
  if (f.until !== undefined) where.push(`${alias}."timestamp" < ${p(f.until)}`);
  const readable = f.readableTypes === undefined ? undefined : p(f.readableTypes);
  const clause = (c: EdgeClause, near: 'source_id' | 'target_id', far: 'source_id' | 'target_id') => {
    const typeCond =
      c.edgeType !== '*' ? ` AND e.edge_type = ${p(c.edgeType)}` : c.readableEdgeTypes ? ` AND e.edge_type = ANY(${p(c.readableEdgeTypes)}::text[])` : '';
    const farItem = readable ? ` AND EXISTS (SELECT 1 FROM items o WHERE o.tenant_id = e.tenant_id AND o.id = e.${far} AND o.type = ANY(${readable}::text[]))` : '';
    return `EXISTS (SELECT 1 FROM edges e WHERE e.tenant_id = ${alias}.tenant_id AND e.${near} = ${alias}.id AND e.${far} = ${p(c.itemId)}${typeCond}${farItem})`;
  };
  for (const e of f.edges ?? []) where.push(clause(e, 'source_id', 'target_id'));
  for (const b of f.backrefs ?? []) where.push(clause(b, 'target_id', 'source_id'));
  return where.join(' AND ');
}
