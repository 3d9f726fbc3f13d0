/**
 * Owns edges: typed, directed links between two items of one tenant. Creating one runs, in
 * order: the edge-type write gate (403), the edge type's existence (404), both items'
 * existence and visibility (404 `item_not_found`), the source item-type write gate (403), the
 * edge type's source/target patterns (400 `type`), then, under an advisory lock where the
 * check needs one, duplicate (400 `duplicate`), cardinality (400 `cardinality`) and cycle
 * (400 `edge_cycle`). The items module uses `outgoingFor` to fill `Item.edges` and
 * `createMany` to create an item's edges in the item's own transaction.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { canEdgeType, canType, isAdmin } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { WRITE_INSTANT } from '../common/db-clock';
import { invalidId, isId, newId } from '../common/ids';
import { Bounded, byteBoundedPage, decodeCursor, encodeCursor, pageOf, ScannedRow, scanEndOf } from '../common/pagination';
import { isDottedName, patternToSql } from '../common/type-pattern';
import { validationError } from '../common/validation';
import { EVENTS_PER_STATEMENT, Outbox, RecordedEvent } from '../events/outbox';
import { TypeCatalog, TypeCatalogService } from '../types/type-catalog';
import {
  assertEdgeWrite,
  assertSourceWrite,
  canSeeEdge,
  EDGE_COLUMNS,
  edgeErrors,
  EdgeRow,
  EdgeTypeRow,
  EdgeWithEnds,
  endAllowed,
  FetchedOutgoingEdge,
  ItemRef,
  lockKey,
  MAX_EDGES_PER_ITEM_WRITE,
  toEdgeResponse,
} from './edge-rules';
import { EdgeTypesService } from './edge-types.service';
import { CreateEdgeDto, EdgeList, EdgeResponse, EdgesQuery, ItemEdgesQuery } from './edges.dto';

const FOREIGN_KEY_VIOLATION = '23503';
/**
 * Most outgoing edges one item may have, all types together. Every read of the item carries
 * them (its `edges`), and so does every event about it: without a bound, one writer could make
 * each read of a page of items load millions of rows. A relation with more members is kept
 * the other way round (each member's edge to the whole, read back with `backref`).
 */
export const MAX_OUTGOING_EDGES = 1000;

/**
 * Most edges a page of `GET /edges` tests for a caller short of admin (EdgesService.list): no
 * index orders the edges a member may see, so a page walks the tenant's and tests each.
 */
export const MEMBER_SCAN_EDGES = 10_000;

/** An edge joined with the types of its two items (alias e for edges). */
const EDGE_WITH_ENDS = `
  SELECT e.id, e.edge_type, e.source_id, e.target_id, e.properties, e.created_at, s.type AS source_type, t.type AS target_type
    FROM edges e
    JOIN items s ON s.tenant_id = e.tenant_id AND s.id = e.source_id
    JOIN items t ON t.tenant_id = e.tenant_id AND t.id = e.target_id`;

function bodyId(field: string, value: string): string {
  if (!isId(value)) throw invalidId(field, value);
  return value.toLowerCase();
}

/** The condition of a listing's `type` (an edge type name or pattern) on edges `e`; none for `*` or none given. */
function edgeTypeFilter(type: string | undefined, param: (v: unknown) => string): string[] {
  if (type === undefined) return [];
  const t = patternToSql(type);
  if (t.all) return [];
  return [t.prefix ? `(e.edge_type = ${param(t.exact)} OR starts_with(e.edge_type, ${param(t.prefix)}))` : `e.edge_type = ${param(t.exact)}`];
}

interface OutgoingEdgeRow {
  source_id: string;
  edge_type: string;
  target_id: string;
  target_type: string;
}

@Injectable()
export class EdgesService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly edgeTypes: EdgeTypesService,
    private readonly typeCatalog: TypeCatalogService,
    private readonly outbox: Outbox,
  ) {}

  /** POST /edges. */
  async create(p: Principal, dto: CreateEdgeDto): Promise<EdgeResponse> {
    const sourceId = bodyId('source_id', dto.source_id);
    const targetId = bodyId('target_id', dto.target_id);
    assertEdgeWrite(p, dto.type);
    const types = await this.typeCatalog.catalog(p.tenantId);
    return this.db.transaction(async (m) => {
      const et = (await this.edgeTypes.forWrite(m, p.tenantId, [dto.type])).get(dto.type);
      if (!et) throw edgeErrors.typeNotFound(dto.type);
      const items = await this.itemRefs(m, p, [sourceId, targetId], types);
      const source = this.visible(items, sourceId, 'source_id');
      const target = this.visible(items, targetId, 'target_id');
      assertSourceWrite(p, types.ref(source.type));
      const [created] = await this.link(m, p, et, source, [target], dto.properties ?? {}, 'reject', types);
      return created;
    });
  }

  /** GET /edges/{id}: 404 `edge_not_found` unless the caller may see the edge type and both items. */
  async get(p: Principal, id: string): Promise<EdgeResponse> {
    const rows: EdgeWithEnds[] = await this.db.query(`${EDGE_WITH_ENDS} WHERE e.tenant_id = $1 AND e.id = $2`, [p.tenantId, id]);
    const edge = rows[0];
    if (!edge || !canSeeEdge(p, edge, await this.typeCatalog.catalog(p.tenantId))) throw edgeErrors.edgeNotFound(id);
    return toEdgeResponse(edge);
  }

  /** DELETE /edges/{id}: the same dual gate as creation; returns the deleted edge. */
  async remove(p: Principal, id: string): Promise<EdgeResponse> {
    const types = await this.typeCatalog.catalog(p.tenantId);
    return this.db.transaction(async (m) => {
      const rows: EdgeWithEnds[] = await m.query(`${EDGE_WITH_ENDS} WHERE e.tenant_id = $1 AND e.id = $2 FOR UPDATE OF e`, [p.tenantId, id]);
      const edge = rows[0];
      if (!edge || !canSeeEdge(p, edge, types)) throw edgeErrors.edgeNotFound(id);
      assertEdgeWrite(p, edge.edge_type);
      assertSourceWrite(p, types.ref(edge.source_type));
      await m.query(`DELETE FROM edges WHERE tenant_id = $1 AND id = $2`, [p.tenantId, id]);
      const deleted = toEdgeResponse(edge);
      await this.outbox.record(m, p, 'edge.deleted', { edge_type: edge.edge_type, source_type: edge.source_type, target_type: edge.target_type }, { edge: deleted });
      return deleted;
    });
  }

  /**
   * Deletes every edge from or to the given items (a purge, which has already checked its
   * rights over them) inside the caller's transaction, with an `edge.deleted` event each
   * when `emit` is set, oldest edge first.
   *
   * An item may have hundreds of thousands of incoming edges: a cursor hands them over
   * EVENTS_PER_STATEMENT at a time, so neither a statement nor the events held grow with them.
   */
  async removeTouching(m: EntityManager, p: Principal, itemIds: string[], emit: boolean): Promise<void> {
    await m.query(
      `DECLARE purge_edges NO SCROLL CURSOR FOR
         SELECT id FROM edges WHERE tenant_id = $1 AND (source_id = ANY($2::uuid[]) OR target_id = ANY($2::uuid[])) ORDER BY created_at, id`,
      [p.tenantId, itemIds],
    );
    for (;;) {
      const ids = ((await m.query(`FETCH ${EVENTS_PER_STATEMENT} FROM purge_edges`)) as Array<{ id: string }>).map((r) => r.id);
      if (!ids.length) break;
      const removed: EdgeWithEnds[] = await m.query(
        `WITH gone AS (
           DELETE FROM edges WHERE tenant_id = $1 AND id = ANY($2::uuid[])
           RETURNING id, edge_type, source_id, target_id, properties, created_at, tenant_id)
         SELECT g.id, g.edge_type, g.source_id, g.target_id, g.properties, g.created_at, s.type AS source_type, t.type AS target_type
           FROM gone g
           JOIN items s ON s.tenant_id = g.tenant_id AND s.id = g.source_id
           JOIN items t ON t.tenant_id = g.tenant_id AND t.id = g.target_id
          ORDER BY g.created_at, g.id`,
        [p.tenantId, ids],
      );
      if (!emit) continue;
      await this.outbox.recordMany(
        m,
        p,
        removed.map((edge): RecordedEvent => ({
          name: 'edge.deleted',
          audience: { edge_type: edge.edge_type, source_type: edge.source_type, target_type: edge.target_type },
          payload: { edge: toEdgeResponse(edge) },
        })),
      );
    }
    await m.query(`CLOSE purge_edges`);
  }

  /**
   * GET /edges: the tenant's edges, newest first, in page order from edges_by_created or, for one
   * edge type, edges_by_type_created (migration 7000). A caller short of admin sees the edges of
   * edge types it may read between items it can see, tested on the edges in page order, at most
   * MEMBER_SCAN_EDGES of them a page: one who may see few of the tenant's edges gets short (even
   * empty) pages with a cursor to go on, rather than pages that each read the tenant's edges.
   */
  async list(p: Principal, q: EdgesQuery): Promise<EdgeList> {
    const after = decodeCursor(q.cursor, 'tenant_edges');
    const limit = q.limit ?? 50;
    const params: unknown[] = [p.tenantId];
    const param = (v: unknown) => `$${params.push(v)}`;
    const where = ['e.tenant_id = $1', ...edgeTypeFilter(q.type, param)];
    if (q.since !== undefined) where.push(`e.created_at >= ${param(q.since)}::timestamptz`);
    if (q.until !== undefined) where.push(`e.created_at < ${param(q.until)}::timestamptz`);
    if (after) where.push(`(e.created_at, e.id) < (${param(after.createdAt)}::timestamptz, ${param(after.id)}::uuid)`);
    const columns = EDGE_COLUMNS.split(', ').map((c) => `e.${c}`).join(', ');
    const inOrder = 'ORDER BY e.created_at DESC, e.id DESC';
    let page: string;
    if (isAdmin(p)) {
      page = `SELECT ${columns} FROM edges e WHERE ${where.join(' AND ')} ${inOrder} LIMIT ${param(limit + 1)}`;
    } else {
      const [edgeTypes, itemTypes] = await Promise.all([this.edgeTypes.readableNames(p), this.typeCatalog.permittedTypeNames(p, 'read')]);
      const readable = param(itemTypes ?? []);
      const visible = (end: 'source_id' | 'target_id') =>
        `EXISTS (SELECT 1 FROM items i WHERE i.tenant_id = e.tenant_id AND i.id = e.${end} AND i.type = ANY(${readable}::text[]))`;
      const seen = `e.edge_type = ANY(${param(edgeTypes ?? [])}::text[]) AND ${visible('source_id')} AND ${visible('target_id')}`;
      const budget = `${param(MEMBER_SCAN_EDGES)}::bigint`;
      // As items' propertyScanSql: row numbers stream with the walk, and the outer LIMIT stops it
      // at a page of edges seen; only a page that finds too few reads the whole budget. Each end
      // is one lookup by key per edge tested: as joins, the planner took the ends' cross product.
      page = `SELECT x.*, x.scanned = ${budget} AS at_budget FROM (
                SELECT ${columns}, (${seen}) AS hit, row_number() OVER (${inOrder}) AS scanned
                  FROM edges e
                 WHERE ${where.join(' AND ')} ${inOrder} LIMIT ${budget}) x
               WHERE x.hit OR x.scanned = ${budget}
               ORDER BY x.created_at DESC, x.id DESC LIMIT ${param(limit + 1)}`;
    }
    const rows: Array<Bounded<EdgeRow> & ScannedRow> = await this.db.query(
      byteBoundedPage(page, 'created_at DESC, id DESC', 'octet_length(properties::text)'),
      params,
    );
    const scanEnd = scanEndOf(rows, limit);
    const { page: edges, next_cursor } = scanEnd
      ? { page: scanEnd.page, next_cursor: encodeCursor({ createdAt: scanEnd.last.created_at.toISOString(), id: scanEnd.last.id }, 'tenant_edges') }
      : pageOf(rows, limit, (r) => r.created_at, 'tenant_edges');
    return { edges: edges.map(toEdgeResponse), next_cursor };
  }

  /**
   * GET /items/{id}/edges: the item's edges in one direction or both, newest first, narrowed
   * in SQL to edge types the caller may read and to edges whose other item it can see.
   */
  async listForItem(p: Principal, itemId: string, q: ItemEdgesQuery): Promise<EdgeList> {
    const [item]: ItemRef[] = await this.db.query(`SELECT id, type FROM items WHERE tenant_id = $1 AND id = $2`, [p.tenantId, itemId]);
    if (!item || !(await this.typeCatalog.can(p, item.type, 'read'))) throw edgeErrors.itemNotFound(itemId, 'id');
    const after = decodeCursor(q.cursor, 'edges');
    const limit = q.limit ?? 50;
    const direction = q.direction ?? 'both';

    const params: unknown[] = [p.tenantId, itemId];
    const param = (v: unknown) => `$${params.push(v)}`;
    const where = ['e.tenant_id = $1', ...edgeTypeFilter(q.type, param)];
    if (!isAdmin(p)) {
      const [edgeTypes, itemTypes] = await Promise.all([this.edgeTypes.readableNames(p), this.typeCatalog.permittedTypeNames(p, 'read')]);
      where.push(`e.edge_type = ANY(${param(edgeTypes ?? [])}::text[])`, `o.type = ANY(${param(itemTypes ?? [])}::text[])`);
    }
    if (after) where.push(`(e.created_at, e.id) < (${param(after.createdAt)}::timestamptz, ${param(after.id)}::uuid)`);
    const take = param(limit + 1);
    // One branch per direction, each read in page order from its own index (edges_by_*_created):
    // `source_id = $2 OR target_id = $2` had a hub's every page read and sort all its edges.
    // A self-edge is outgoing; listed both ways, it comes once.
    const branch = (near: 'source_id' | 'target_id', far: 'source_id' | 'target_id', extra = '') =>
      `(SELECT ${EDGE_COLUMNS.split(', ').map((c) => `e.${c}`).join(', ')}
          FROM edges e
          JOIN items o ON o.tenant_id = e.tenant_id AND o.id = e.${far}
         WHERE e.${near} = $2${extra} AND ${where.join(' AND ')}
         ORDER BY e.created_at DESC, e.id DESC
         LIMIT ${take})`;
    const branches =
      direction === 'outgoing'
        ? [branch('source_id', 'target_id')]
        : direction === 'incoming'
          ? [branch('target_id', 'source_id')]
          : [branch('source_id', 'target_id'), branch('target_id', 'source_id', ' AND e.source_id <> $2')];
    // Edges carry properties of up to a request body each: a hub's page is cut by bytes as items' are.
    const rows: Array<Bounded<EdgeRow>> = await this.db.query(
      byteBoundedPage(
        `SELECT * FROM (${branches.join(' UNION ALL ')}) e ORDER BY e.created_at DESC, e.id DESC LIMIT ${take}`,
        'created_at DESC, id DESC',
        'octet_length(properties::text)',
      ),
      params,
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'edges');
    return { edges: page.map(toEdgeResponse), next_cursor };
  }

  /**
   * `Item.edges` for a batch of items the caller can see, in one query: outgoing edges grouped
   * by edge type, target ids in creation order, keeping only edge types the caller may read
   * and targets it can see. Every requested id is in the map (with `{}` when it has none).
   */
  async outgoingFor(p: Principal, itemIds: string[], m: EntityManager = this.db.manager): Promise<Map<string, Record<string, string[]>>> {
    if (!itemIds.length) return new Map();
    const rows: OutgoingEdgeRow[] = await m.query(
      `SELECT e.source_id, e.edge_type, e.target_id, t.type AS target_type
         FROM edges e
         JOIN items t ON t.tenant_id = e.tenant_id AND t.id = e.target_id
        WHERE e.tenant_id = $1 AND e.source_id = ANY($2::uuid[])
        ORDER BY e.created_at, e.id`,
      [p.tenantId, itemIds],
    );
    return this.outgoingFromRows(p, itemIds, rows);
  }

  /**
   * `outgoingFor` for a page whose statement already fetched each item's outgoing edges
   * (outgoingEdgesSql, one `[edge_type, target_id, target_type]` triple per edge in creation
   * order), which saves the lookup's round trip; the same permission filter and grouping.
   */
  async outgoingFromFetched(
    p: Principal,
    items: Array<{ id: string; outgoing: FetchedOutgoingEdge[] | null }>,
  ): Promise<Map<string, Record<string, string[]>>> {
    return this.outgoingFromRows(
      p,
      items.map((i) => i.id),
      items.flatMap((i) => (i.outgoing ?? []).map(([edge_type, target_id, target_type]) => ({ source_id: i.id, edge_type, target_id, target_type }))),
    );
  }

  /** Groups edge rows (in creation order) by source and edge type, keeping only what `p` may read. */
  private async outgoingFromRows(p: Principal, itemIds: string[], rows: OutgoingEdgeRow[]): Promise<Map<string, Record<string, string[]>>> {
    const out = new Map<string, Record<string, string[]>>(itemIds.map((id) => [id, {}]));
    if (!rows.length) return out;
    const types = await this.typeCatalog.catalog(p.tenantId);
    // Decided once per (edge type, target type): a page of 100 items of 1,000 edges each, read
    // with a 200-pattern permission map, matched every pattern against every edge (0.8 s).
    const readable = new Map<string, boolean>();
    const mayRead = (r: OutgoingEdgeRow) => {
      const pair = `${r.edge_type} ${r.target_type}`;
      let yes = readable.get(pair);
      if (yes === undefined) readable.set(pair, (yes = canEdgeType(p, r.edge_type, 'read') && canType(p, types.ref(r.target_type), 'read')));
      return yes;
    };
    for (const r of rows) {
      if (!mayRead(r)) continue;
      const grouped = out.get(r.source_id) ?? {};
      (grouped[r.edge_type] ??= []).push(r.target_id);
      out.set(r.source_id, grouped);
    }
    return out;
  }

  /**
   * Creates outgoing edges of a just-written item inside the caller's transaction `m`, with
   * every check POST /edges makes. `edges` is the `edges` field of an item write:
   * `{"<edge type>": ["<target id>", ...]}`. Additive and idempotent, so that re-sending an
   * upsert works: edges that already exist are kept and skipped, nothing is removed. A target
   * listed twice under one type is one edge. Returns the edges it created.
   */
  async createMany(m: EntityManager, p: Principal, source: ItemRef, edges: Record<string, string[]>): Promise<EdgeResponse[]> {
    const wanted = this.parseEdgesField(edges);
    if (!wanted.size) return [];
    const names = [...wanted.keys()].sort(); // one lock order for every writer
    for (const name of names) assertEdgeWrite(p, name);
    const types = await this.edgeTypes.forWrite(m, p.tenantId, names);
    for (const name of names) if (!types.has(name)) throw edgeErrors.typeNotFound(name);
    const catalog = await this.typeCatalog.catalog(p.tenantId);
    assertSourceWrite(p, catalog.ref(source.type));
    const targetIds = [...new Set([...wanted.values()].flatMap((w) => w.map((x) => x.id)))];
    const items = await this.itemRefs(m, p, targetIds.filter((id) => id !== source.id), catalog);
    items.set(source.id, source);
    const created: EdgeResponse[] = [];
    for (const name of names) {
      const targets = wanted.get(name)!.map((x) => this.visible(items, x.id, x.field));
      created.push(...(await this.link(m, p, types.get(name)!, source, targets, {}, 'skip', catalog)));
    }
    return created;
  }

  /**
   * Links `source` to each of `targets` with edges of type `et`, after the type constraint,
   * duplicate, cardinality and cycle checks. `reject`: an existing edge is 400 `duplicate`
   * (POST /edges); `skip`: it is left alone (item writes).
   */
  private async link(
    m: EntityManager,
    p: Principal,
    et: EdgeTypeRow,
    source: ItemRef,
    targets: ItemRef[],
    properties: Record<string, unknown>,
    onExisting: 'reject' | 'skip',
    types: TypeCatalog,
  ): Promise<EdgeResponse[]> {
    if (!endAllowed(et, 'source', types.ref(source.type))) throw edgeErrors.typeViolation(et, 'source', source);
    for (const t of targets) if (!endAllowed(et, 'target', types.ref(t.type))) throw edgeErrors.typeViolation(et, 'target', t);
    // A target named twice is one edge, as a tag sent twice is one tag: an item write says which
    // edges should exist, and re-sending one is safe.
    targets = [...new Map(targets.map((t) => [t.id, t])).values()];

    // Serialise the checks below against concurrent writers of the same type (or source).
    const key = lockKey(p.tenantId, et, source.id);
    if (key) await m.query('SELECT pg_advisory_xact_lock(hashtext($1))', [key]);

    const targetIds = targets.map((t) => t.id);
    const existing: Array<{ id: string; target_id: string }> = await m.query(
      `SELECT id, target_id FROM edges
        WHERE tenant_id = $1 AND edge_type = $2 AND source_id = $3 AND ($4::boolean OR target_id = ANY($5::uuid[]))`,
      [p.tenantId, et.name, source.id, et.cardinality === 'one', targetIds],
    );
    const existingTargets = new Map(existing.map((e) => [e.target_id, e.id]));
    const duplicate = targetIds.find((id) => existingTargets.has(id));
    if (duplicate && onExisting === 'reject') throw edgeErrors.duplicate(et.name, source.id, duplicate, existingTargets.get(duplicate));
    if (et.cardinality === 'one' && new Set([...existingTargets.keys(), ...targetIds]).size > 1) throw edgeErrors.cardinality(et, source.id);
    const fresh = targetIds.filter((id) => !existingTargets.has(id));
    if (!fresh.length) return [];
    // Not locked: writers racing on one item can pass it together by one write's worth at most each.
    const [{ n }]: Array<{ n: number }> = await m.query(`SELECT count(*)::int AS n FROM edges WHERE tenant_id = $1 AND source_id = $2`, [p.tenantId, source.id]);
    if (n + fresh.length > MAX_OUTGOING_EDGES) throw edgeErrors.tooMany(source.id, n, fresh.length, MAX_OUTGOING_EDGES);
    if (et.acyclic) await this.assertNoCycle(m, p.tenantId, et.name, source.id, fresh);

    // Creation times a millisecond apart keep a batch in request order wherever edges are
    // ordered by (created_at, id), and stay exact in millisecond-precision cursors. They are the
    // database's clock, which every instance shares, as items' updated_at is (WRITE_INSTANT):
    // `GET /edges?since=` selects by them.
    let rows: EdgeRow[];
    try {
      rows = await m.query(
        `INSERT INTO edges (tenant_id, id, edge_type, source_id, target_id, properties, created_by, created_at)
         SELECT $1, u.id, $2, $3, u.target_id, $4, $5, ${WRITE_INSTANT} + (u.n - 1) * interval '1 millisecond'
           FROM unnest($6::uuid[], $7::uuid[]) WITH ORDINALITY AS u(id, target_id, n)
         ON CONFLICT (tenant_id, edge_type, source_id, target_id) DO NOTHING
         RETURNING ${EDGE_COLUMNS}`,
        [p.tenantId, et.name, source.id, properties, p.credentialId, fresh.map(() => newId()), fresh],
      );
    } catch (err) {
      throw this.foreignKeyError(err, et.name, source.id) ?? err;
    }
    if (rows.length < fresh.length && onExisting === 'reject') {
      // Lost a race with an identical insert (types without a lock rely on the constraint).
      const missing = fresh.find((id) => !rows.some((r) => r.target_id === id))!;
      const [winner] = await m.query(`SELECT id FROM edges WHERE tenant_id = $1 AND edge_type = $2 AND source_id = $3 AND target_id = $4`, [
        p.tenantId,
        et.name,
        source.id,
        missing,
      ]);
      throw edgeErrors.duplicate(et.name, source.id, missing, winner?.id);
    }
    const order = new Map(fresh.map((id, i) => [id, i]));
    const created = rows.sort((a, b) => order.get(a.target_id)! - order.get(b.target_id)!).map(toEdgeResponse);
    const targetType = new Map(targets.map((t) => [t.id, t.type]));
    for (const edge of created) {
      await this.outbox.record(m, p, 'edge.created', { edge_type: et.name, source_type: source.type, target_type: targetType.get(edge.target_id)! }, { edge });
    }
    return created;
  }

  /**
   * 400 `edge_cycle` when any of `targets` already reaches `sourceId` through edges of the
   * same type (a self-loop is the zero-length case). The walk covers every edge of the type
   * in the tenant, whatever the caller may see: acyclicity is a property of the whole graph.
   * The new edges all leave `sourceId`, so they can only close a cycle through it and the
   * existing edges suffice. One walk from all targets together (`reach`, deduplicated by
   * node) costs the reachable set once, where a walk per target cost it once per target; it
   * stops at `sourceId`. Only then does a walk back from `sourceId` (`back`, also stopping at
   * the first target met, the nearest) name the edge that closes the cycle.
   */
  private async assertNoCycle(m: EntityManager, tenantId: string, edgeType: string, sourceId: string, targets: string[]): Promise<void> {
    const selfLoop = targets.find((t) => t === sourceId);
    if (selfLoop) throw edgeErrors.cycle(edgeType, sourceId, selfLoop);
    const rows: Array<{ target: string }> = await m.query(
      `WITH RECURSIVE
         reach(id) AS (
           SELECT t FROM unnest($4::uuid[]) AS t
           UNION
           SELECT e.target_id
             FROM reach r
             JOIN edges e ON e.tenant_id = $1 AND e.edge_type = $2 AND e.source_id = r.id
         ),
         back(id) AS (
           SELECT $3::uuid
           UNION
           SELECT e.source_id
             FROM back b
             JOIN edges e ON e.tenant_id = $1 AND e.edge_type = $2 AND e.target_id = b.id
         )
       SELECT (SELECT id FROM back WHERE id = ANY($4::uuid[]) LIMIT 1) AS target
        WHERE EXISTS (SELECT 1 FROM reach WHERE id = $3)`,
      [tenantId, edgeType, sourceId, targets],
    );
    if (rows[0]) throw edgeErrors.cycle(edgeType, sourceId, rows[0].target);
  }

  /**
   * Items by id, tenant-scoped; the caller decides what "missing" means. Key-share locked, as the
   * edges' foreign keys will lock them, but all at once in id order, the order a purge locks
   * them in (bulk-runner.ts): locked one end after the other by the inserts' checks, a purge of
   * both ends deadlocked with POST /edges. An update of an existing item with `edges` holds the
   * item before its targets, and can still meet a purge of both that way (409 `conflict`).
   */
  private async itemRefs(m: EntityManager, p: Principal, ids: string[], types: TypeCatalog): Promise<Map<string, ItemRef>> {
    if (!ids.length) return new Map();
    const rows: ItemRef[] = await m.query(`SELECT id, type FROM items WHERE tenant_id = $1 AND id = ANY($2::uuid[]) ORDER BY id FOR KEY SHARE`, [
      p.tenantId,
      [...new Set(ids)],
    ]);
    return new Map(rows.filter((r) => canType(p, types.ref(r.type), 'read')).map((r) => [r.id, r]));
  }

  /** The item, or 404 `item_not_found` when it is missing or invisible to the caller. */
  private visible(items: Map<string, ItemRef>, id: string, field: string): ItemRef {
    const item = items.get(id);
    if (!item) throw edgeErrors.itemNotFound(id, field);
    return item;
  }

  /** Checks the shape of an item write's `edges` field and normalises its ids. */
  private parseEdgesField(edges: unknown): Map<string, Array<{ id: string; field: string }>> {
    const out = new Map<string, Array<{ id: string; field: string }>>();
    if (edges === undefined || edges === null) return out;
    const shapeError = (field: string, message: string) => validationError([{ field, message }]);
    if (typeof edges !== 'object' || Array.isArray(edges)) throw shapeError('edges', 'must map edge type names to arrays of item ids');
    let total = 0;
    for (const [name, targets] of Object.entries(edges as Record<string, unknown>)) {
      if (!isDottedName(name)) throw shapeError(`edges.${name}`, 'is not an edge type name');
      if (!Array.isArray(targets)) throw shapeError(`edges.${name}`, 'must be an array of item ids');
      total += targets.length;
      if (total > MAX_EDGES_PER_ITEM_WRITE) throw shapeError('edges', `may hold at most ${MAX_EDGES_PER_ITEM_WRITE} edges`);
      if (!targets.length) continue;
      out.set(
        name,
        targets.map((id, i) => {
          const field = `edges.${name}[${i}]`;
          if (typeof id !== 'string') throw ApiError.badRequest('invalid_id', `${field} is not a valid id`, { field });
          return { id: bodyId(field, id), field };
        }),
      );
    }
    return out;
  }

  /** An insert refused by a foreign key: the edge type or an item vanished meanwhile. */
  private foreignKeyError(err: unknown, edgeType: string, sourceId: string): ApiError | undefined {
    const e = err as { code?: string; constraint?: string; detail?: string };
    if (e.code !== FOREIGN_KEY_VIOLATION) return undefined;
    if (e.constraint === 'edges_type_fk') return edgeErrors.typeNotFound(edgeType);
    if (e.constraint === 'edges_source_fk') return edgeErrors.itemNotFound(sourceId, 'source_id');
    const id = /\(tenant_id, target_id\)=\([^,]+, ([0-9a-f-]+)\)/.exec(e.detail ?? '')?.[1] ?? 'unknown';
    return edgeErrors.itemNotFound(id, 'target_id');
  }
}
