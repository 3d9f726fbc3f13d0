/**
 * The item filter shared by `GET /items`, `GET /search` and bulk actions: one parser for the
 * query parameters and one SQL builder, so the three surfaces select exactly alike.
 *
 * Edge clauses (repeatable, AND):
 *   edge=<edge type>:<item id>     items with an outgoing edge of that type to the item
 *   backref=<edge type>:<item id>  items the given item points to with that type
 * `*` as the edge type matches any type.
 *
 * Property clauses (repeatable, AND): property-filter.ts.
 *
 * Windows: `since`/`until` on "timestamp", `updated_since`/`updated_until` on updated_at (from
 * inclusive, until exclusive). A listing's statements take the page's order from listing-order.ts.
 */
import { splitCommaList, validationError } from '../common/validation';
import { isId } from '../common/ids';
import { isDottedName, isPattern } from '../common/type-pattern';
import type { Tier } from '../keys/api-key.entity';
import { ItemState, STATES } from './lifecycle';
import { ListingOrder, orderBy, orderValue } from './listing-order';
import { PropertyClause, propertyConditionSql } from './property-filter';

export interface EdgeClause {
  edgeType: string; // name or '*'
  itemId: string;
  /** For `*`: the edge types the caller may read, when that is not all of them. */
  readableEdgeTypes?: string[];
  /** Set by the service when at most FEW_EDGE_MATCHES edges match the clause (`edgeMatchesSql`). */
  few?: boolean;
}

export interface ItemFilter {
  /** The types a `type` pattern covers, subtypes included (resolved against the catalog). */
  types?: string[];
  state?: ItemState | 'all';
  tier?: Tier | 'all';
  tags?: string[];
  source?: string;
  /** With `source`, the natural key (`GET /items?source_id=` gives the caller's source when no other is named). */
  sourceId?: string;
  since?: string;
  until?: string;
  updatedSince?: string;
  updatedUntil?: string;
  edges?: EdgeClause[];
  backrefs?: EdgeClause[];
  properties?: PropertyClause[];
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
 * Each clause is a subquery: a few hundred of them keep PostgreSQL planning for minutes,
 * so a filter takes at most this many of each kind.
 */
export const MAX_EDGE_CLAUSES = 10;

/** How a malformed `edge` or `backref` clause is refused, by the query's validation (IsEdgeClauses) or here. */
export const EDGE_CLAUSE_RULE = 'must look like <edge type>:<item id>';

/** An edge clause's parts, or undefined when `v` is not `<edge type or *>:<item id>`. */
function edgeClauseOf(v: unknown): EdgeClause | undefined {
  if (typeof v !== 'string') return undefined;
  const i = v.lastIndexOf(':');
  const edgeType = v.slice(0, i);
  const itemId = v.slice(i + 1);
  if (i < 1 || !(edgeType === '*' || isDottedName(edgeType)) || !isId(itemId)) return undefined;
  return { edgeType, itemId: itemId.toLowerCase() };
}

export const isEdgeClause = (v: unknown): boolean => edgeClauseOf(v) !== undefined;

export function parseEdgeClauses(field: string, raw: string | string[] | undefined): EdgeClause[] {
  if (raw === undefined) return [];
  const values = Array.isArray(raw) ? raw : [raw];
  if (values.length > MAX_EDGE_CLAUSES) throw validationError([{ field, message: `takes at most ${MAX_EDGE_CLAUSES} clauses` }]);
  return values.map((v) => {
    const clause = edgeClauseOf(v);
    if (!clause) throw validationError([{ field, message: EDGE_CLAUSE_RULE }]);
    return clause;
  });
}

/** The `tags` parameter's tags: the query's validation (IsCommaList) has refused an empty one. */
export function parseTags(raw: string | undefined): string[] | undefined {
  return raw === undefined ? undefined : splitCommaList(raw);
}

/** Validates a type pattern given as a filter. */
export function assertTypePattern(pattern: string | undefined): void {
  if (pattern !== undefined && !isPattern(pattern)) {
    throw validationError([{ field: 'type', message: 'must be a type name or a pattern such as core.* or *' }]);
  }
}

/**
 * Up to this many matching edges, a clause is read from the edges (their index by item, then
 * the items by key) rather than tested on each item of the listing: PostgreSQL misjudges how
 * many items an edge clause keeps (the edges of one item are not spread like the tenant's), and
 * for a clause that keeps few or none it walks every item of the tenant looking for a page.
 * Past this, testing items in listing order finds a page sooner than collecting the matches.
 */
export const FEW_EDGE_MATCHES = 5000;

type EdgeEnd = 'source_id' | 'target_id';

/** Which end of an edge is the filtered item (`near`) and which is the clause's item (`far`). */
function ends(kind: 'edge' | 'backref'): { near: EdgeEnd; far: EdgeEnd } {
  return kind === 'edge' ? { near: 'source_id', far: 'target_id' } : { near: 'target_id', far: 'source_id' };
}

/** The conditions on `edges e` of a clause, but for the filtered item's end. */
function edgeConditions(c: EdgeClause, far: EdgeEnd, p: (v: unknown) => string): string {
  const typeCond = c.edgeType !== '*' ? ` AND e.edge_type = ${p(c.edgeType)}` : c.readableEdgeTypes ? ` AND e.edge_type = ANY(${p(c.readableEdgeTypes)}::text[])` : '';
  return `e.${far} = ${p(c.itemId)}${typeCond}`;
}

/**
 * Counts the edges matching a clause, up to FEW_EDGE_MATCHES + 1 (through the edges' index by
 * the clause's item): whether the clause is `few`.
 */
export function edgeMatchesSql(tenantId: string, c: EdgeClause, kind: 'edge' | 'backref'): { sql: string; params: unknown[] } {
  const params: unknown[] = [tenantId];
  const p = (v: unknown) => `$${params.push(v)}`;
  const sql = `SELECT count(*)::int AS n FROM (SELECT 1 FROM edges e WHERE e.tenant_id = $1 AND ${edgeConditions(c, ends(kind).far, p)} LIMIT ${p(FEW_EDGE_MATCHES + 1)}) m`;
  return { sql, params };
}

/** A window of a filter: an instant column, from `since` (inclusive) until `until` (exclusive). */
export interface Window {
  key: 'timestamp' | 'updated_at';
  since?: string;
  until?: string;
}

/** The fields of ItemFilter that hold each window's ends. */
const WINDOW_FIELDS = {
  timestamp: ['since', 'until'],
  updated_at: ['updatedSince', 'updatedUntil'],
} as const satisfies Record<Window['key'], readonly [keyof ItemFilter, keyof ItemFilter]>;

/** The windows `f` has (a window: at least one end given). */
export function windowsOf(f: ItemFilter): Window[] {
  return Object.entries(WINDOW_FIELDS)
    .map(([key, [since, until]]) => ({ key: key as Window['key'], since: f[since], until: f[until] }))
    .filter((w) => w.since !== undefined || w.until !== undefined);
}

const withoutWindow = (f: ItemFilter, w: Window): ItemFilter => {
  const [since, until] = WINDOW_FIELDS[w.key];
  return { ...f, [since]: undefined, [until]: undefined };
};

/** The conditions of a window on `alias`. */
function windowConditions(w: Window, alias: string, p: (v: unknown) => string): string[] {
  // Already cut to the millisecond, as written instants are (common/validation.ts IsRfc3339).
  const column = `${alias}."${w.key}"`;
  return [...(w.since !== undefined ? [`${column} >= ${p(w.since)}`] : []), ...(w.until !== undefined ? [`${column} < ${p(w.until)}`] : [])];
}

/**
 * Up to this many items of the tenant in a window on another column than the page's order, a
 * listing reads the window (from that column's index, `items_by_timestamp` or
 * `items_by_updated`, sorted in page order) and fetches the page's rows by key, rather than
 * walking the items in page order testing each for the window: PostgreSQL, taking the two
 * columns as unrelated, walks the whole tenant for a window of few items or one far from where
 * the order starts. Past this, the walk finds a page within about tenant size / this many items
 * when the window's items are spread through the tenant; a larger window bunched far from the
 * start is still walked. A window on the order's own column is a range of the index the walk
 * reads: it needs none of this.
 */
export const FEW_WINDOW_ITEMS = 5000;

/** Counts the tenant's items in window `w`, up to FEW_WINDOW_ITEMS + 1 (from the column's index): whether `windowedItemsSql` should read the page. */
export function windowItemsSql(tenantId: string, w: Window): { sql: string; params: unknown[] } {
  const params: unknown[] = [tenantId];
  const p = (v: unknown) => `$${params.push(v)}`;
  const sql = `SELECT count(*)::int AS n FROM (SELECT 1 FROM items w WHERE w.tenant_id = $1 AND ${windowConditions(w, 'w', p).join(' AND ')} LIMIT ${p(FEW_WINDOW_ITEMS + 1)}) m`;
  return { sql, params };
}

/**
 * The items matching `f` (alias `i`) from its window `w` of few items: the window's keys, with
 * the order's value, read from the window column's index and sorted in page order, then each
 * item fetched by key and tested, until the LIMIT the caller appends ends the join: about a page
 * of rows read (and, for an order on a column the index lacks or on a property, the window's rows). `after` gives
 * the page's cursor condition on an alias (here the window's `w`). Ordered as the listing.
 */
export function windowedItemsSql(
  tenantId: string, f: ItemFilter, w: Window, order: ListingOrder, params: unknown[], columns: string, after?: (alias: string) => string,
): string {
  const where = itemWhere(tenantId, withoutWindow(f, w), params);
  const p = (v: unknown) => `$${params.push(v)}`;
  const window = [`w.tenant_id = ${p(tenantId)}`, ...windowConditions(w, 'w', p), ...(after ? [after('w')] : [])].join(' AND ');
  // OFFSET 0 keeps the window a scan of its own: merged into the outer query, PostgreSQL may go
  // back to walking the order's index. The join is on the window's order (w's columns).
  return (
    `SELECT ${columns} FROM (SELECT w.tenant_id, w.id, ${orderValue(order, 'w')} AS order_value FROM items w WHERE ${window} ORDER BY ${orderBy(order, 'w')} OFFSET 0) w ` +
    `JOIN items i ON i.tenant_id = w.tenant_id AND i.id = w.id WHERE ${where} ORDER BY ${orderBy(order, 'w', 'w.order_value')}`
  );
}

/** Whether no item can match `f`: no type is both asked for and permitted. */
export function selectsNothing(f: ItemFilter): boolean {
  if (f.types === undefined || f.permittedTypes === undefined) return f.types?.length === 0 || f.permittedTypes?.length === 0;
  const permitted = new Set(f.permittedTypes);
  return !f.types.some((t) => permitted.has(t));
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
  const tenant = p(tenantId);
  const where = [`${alias}.tenant_id = ${tenant}`];
  // Said outright, PostgreSQL plans no scan at all (search and bulk actions share this).
  if (selectsNothing(f)) return `${where[0]} AND FALSE`;
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
  if (f.sourceId !== undefined) where.push(`${alias}.source_id = ${p(f.sourceId)}`);
  for (const w of windowsOf(f)) where.push(...windowConditions(w, alias, p));
  for (const c of f.properties ?? []) where.push(propertyConditionSql(c, alias, p));
  const readable = f.readableTypes === undefined ? undefined : p(f.readableTypes);
  const clause = (c: EdgeClause, kind: 'edge' | 'backref') => {
    const { near, far } = ends(kind);
    const conds = edgeConditions(c, far, p);
    const farItem = readable ? ` AND EXISTS (SELECT 1 FROM items o WHERE o.tenant_id = e.tenant_id AND o.id = e.${far} AND o.type = ANY(${readable}::text[]))` : '';
    // An array, collected once: the items are then fetched by key. As a join (IN), the edges
    // are misjudged alike and PostgreSQL may still read every item of the tenant.
    if (c.few) return `${alias}.id = ANY(ARRAY(SELECT e.${near} FROM edges e WHERE e.tenant_id = ${tenant} AND ${conds}${farItem}))`;
    return `EXISTS (SELECT 1 FROM edges e WHERE e.tenant_id = ${alias}.tenant_id AND e.${near} = ${alias}.id AND ${conds}${farItem})`;
  };
  for (const e of f.edges ?? []) where.push(clause(e, 'edge'));
  for (const b of f.backrefs ?? []) where.push(clause(b, 'backref'));
  return where.join(' AND ');
}

/**
 * Most items a listing page with property clauses tests. No index serves arbitrary paths in
 * `properties`, so each clause is tested on the items in listing order; a clause that keeps few
 * would otherwise walk a whole tenant for one page. Past this many, the page ends where the
 * walk stopped, with fewer items than `limit` (none, even) and a cursor to go on from there.
 * Under a property order there is no walk to cut short: a page reads and sorts every item the
 * other filters select whatever it finds, so the clauses are tested in that read, with no bound
 * of their own, and pages are full.
 */
export const PROPERTY_SCAN_ITEMS = 10_000;

/**
 * The items matching `f` (alias `i`), with property clauses, in the page's order, of at most
 * PROPERTY_SCAN_ITEMS items read: each matching row with `hit` true, and the PROPERTY_SCAN_ITEMS-th
 * item read, match or not, with `at_budget` true: where the next page starts (ScannedRow, common/pagination.ts).
 * `after` gives the page's cursor condition on an alias.
 */
export function propertyScanSql(
  tenantId: string, f: ItemFilter, order: ListingOrder, params: unknown[], columns: string, after?: (alias: string) => string,
): string {
  const where = itemWhere(tenantId, { ...f, properties: undefined }, params);
  const p = (v: unknown) => `$${params.push(v)}`;
  const hit = (f.properties ?? []).map((c) => propertyConditionSql(c, 'i', p)).join(' AND ') || 'TRUE';
  const budget = `${p(PROPERTY_SCAN_ITEMS)}::bigint`;
  // Row numbers stream with the walk, and the outer LIMIT the caller appends stops it at a page
  // of matches: only a page that finds too few reads all PROPERTY_SCAN_ITEMS.
  return (
    `SELECT s.*, s.scanned = ${budget} AS at_budget FROM (SELECT ${columns}, (${hit}) AS hit, row_number() OVER (ORDER BY ${orderBy(order, 'i')}) AS scanned ` +
    `FROM items i WHERE ${where}${after ? ` AND ${after('i')}` : ''} ORDER BY ${orderBy(order, 'i')} LIMIT ${budget}) s ` +
    `WHERE s.hit OR s.scanned = ${budget} ORDER BY ${orderBy(order, 's')}`
  );
}
