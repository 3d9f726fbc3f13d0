/**
 * The one path by which an item row changes, for single writes and bulk actions alike: a new
 * item, a change (the version bumped, the revision kept in `item_versions`) and a purge each
 * leave their event in the outbox in the caller's transaction. Set-based, so a bulk chunk costs
 * a few statements however many items it holds. Callers have already applied the rules (who may
 * write, the lifecycle, the type's schema): this module only writes.
 */
import { Injectable } from '@nestjs/common';
import { isDeepStrictEqual } from 'node:util';
import type { EntityManager } from 'typeorm';
import { tenantWide } from '../auth/permissions';
import { WRITE_INSTANT } from '../common/db-clock';
import type { Principal } from '../auth/principal';
import { EdgesService } from '../edges/edges.service';
import type { EventSubject } from '../events/event-catalogue';
import { Outbox, RecordedEvent } from '../events/outbox';
import { ITEM_COLUMNS_I, ItemEdges, ItemRow, toItem } from './item.model';

/** The columns a change may set, with their SQL types. */
const CHANGEABLE: Record<string, string> = {
  properties: 'jsonb',
  tags: 'text[]',
  tier: 'text',
  state: 'text',
  timestamp: 'timestamptz',
  device: 'text',
  capture_latitude: 'float8',
  capture_longitude: 'float8',
  extensions: 'jsonb',
  schema_version: 'int',
};

export type ItemChanges = Partial<Pick<ItemRow, keyof typeof CHANGEABLE & keyof ItemRow>>;


/**
 * Most characters of items' JSON one statement carries in its parameter. PostgreSQL refuses a
 * jsonb array past 256 MB ("total size of jsonb array elements exceeds the maximum"): a bulk
 * chunk of 500 items of nearly 1 MB each failed every time, and its job with it. A character is
 * at most 3 bytes of UTF-8, so a part stays under 96 MB.
 */
export const STATEMENT_JSON_CHARS = 32 * 1024 * 1024;

/** Characters of JSON in an item's (or a change's) properties and extensions. */
const jsonChars = (x: { properties?: unknown; extensions?: unknown }): number =>
  (x.properties ? JSON.stringify(x.properties).length : 0) + (x.extensions ? JSON.stringify(x.extensions).length : 0);

/** `batch` in consecutive parts weighing at most `max` each; an element heavier alone is a part of its own. */
export function inParts<T>(batch: T[], weight: (element: T) => number, max: number): T[][] {
  const parts: T[][] = [];
  let part: T[] = [];
  let sum = 0;
  for (const element of batch) {
    const w = weight(element);
    if (part.length && sum + w > max) {
      parts.push(part);
      part = [];
      sum = 0;
    }
    part.push(element);
    sum += w;
  }
  if (part.length) parts.push(part);
  return parts;
}

export interface Change {
  current: ItemRow;
  changes: ItemChanges;
}

@Injectable()
export class ItemWriter {
  constructor(
    private readonly edges: EdgesService,
    private readonly outbox: Outbox,
  ) {}

  /**
   * A just-inserted item: its first revision and `item.created`. When its write created edges
   * (`withEdges`, called after them), the event shows them as GET /items/{id} does; otherwise a
   * new item has none, and none are looked up.
   */
  async created(m: EntityManager, p: Principal, row: ItemRow, withEdges: boolean): Promise<void> {
    await this.recordRevisions(m, p, [row]);
    const everything = tenantWide(p);
    const edges = withEdges ? await this.edges.outgoingFor(everything, [row.id], m) : undefined;
    const targets = edges && (await this.targetTypes(m, p, edges));
    await this.outbox.record(m, p, 'item.created', { item_type: row.type }, itemSubject(everything, row, edges?.get(row.id), targets));
  }

  /**
   * One item's change. One that leaves every value as it is writes nothing (no version, revision
   * or event) and answers the item as it is: `version` counts changes, and a client sending what
   * is already there changes nothing anyone could see.
   */
  async update(m: EntityManager, p: Principal, current: ItemRow, changes: ItemChanges): Promise<ItemRow> {
    if (changesNothing(current, changes)) return current;
    return (await this.updateMany(m, p, [{ current, changes }]))[0];
  }

  /**
   * Writes each item's changes (every change in the batch sets the same columns), bumps its
   * version, keeps the revision and, when `emit` is set, records `item.state_changed` (the
   * state moved) or `item.updated`. Returns the new rows in the order of `batch`.
   */
  async updateMany(m: EntityManager, p: Principal, batch: Change[], emit = true): Promise<ItemRow[]> {
    if (!batch.length) return [];
    if (batch.length > 1) {
      const parts = inParts(batch, (b) => jsonChars(b.current) + jsonChars(b.changes), STATEMENT_JSON_CHARS);
      if (parts.length > 1) {
        const updated: ItemRow[] = [];
        for (const part of parts) updated.push(...(await this.updateMany(m, p, part, emit)));
        return updated;
      }
    }
    const columns = Object.keys(batch[0].changes);
    for (const c of columns) if (!(c in CHANGEABLE)) throw new Error(`not a changeable item column: ${c}`);
    if (batch.some((b) => Object.keys(b.changes).length !== columns.length || columns.some((c) => !(c in b.changes)))) {
      throw new Error('every change of a batch must set the same columns');
    }
    const q = (c: string) => `"${c}"`;
    const sets = columns.map((c) => `${q(c)} = x.${q(c)}`);
    // Where a move into the trash came from, kept while it stays there (SET reads the old row).
    if (columns.includes('state')) sets.push(`trashed_from = CASE WHEN x.state <> 'trashed' THEN NULL WHEN i.state = 'trashed' THEN i.trashed_from ELSE i.state END`);
    const recordType = ['id uuid', ...columns.map((c) => `${q(c)} ${CHANGEABLE[c]}`)].join(', ');
    const [rows]: [ItemRow[], number] = await m.query(
      `UPDATE items i SET ${sets.join(', ')}, version = i.version + 1, updated_at = ${WRITE_INSTANT}
         FROM jsonb_to_recordset($2::jsonb) AS x(${recordType})
        WHERE i.tenant_id = $1 AND i.id = x.id
       RETURNING ${ITEM_COLUMNS_I}`,
      [p.tenantId, JSON.stringify(batch.map((b) => ({ id: b.current.id, ...b.changes })))],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const updated = batch.map((b) => byId.get(b.current.id)!);
    await this.recordRevisions(m, p, updated);
    if (emit) {
      const everything = tenantWide(p);
      const edges = await this.edges.outgoingFor(everything, updated.map((r) => r.id), m);
      const targets = await this.targetTypes(m, p, edges);
      await this.outbox.recordMany(
        m,
        p,
        updated.map((row, n): RecordedEvent => ({
          name: batch[n].current.state !== row.state ? 'item.state_changed' : 'item.updated',
          audience: { item_type: row.type },
          payload: itemSubject(everything, row, edges.get(row.id), targets),
        })),
      );
    }
    return updated;
  }

  /**
   * Hard-deletes locked items with their edges and history (`item_versions` cascades); with
   * `emit`, an `item.deleted` per item (the item as it was, its outgoing edges included) and an
   * `edge.deleted` per edge.
   */
  async purgeMany(m: EntityManager, p: Principal, rows: ItemRow[], emit: boolean): Promise<void> {
    if (!rows.length) return;
    if (emit && rows.length > 1) {
      // Their `item.deleted` events carry them whole.
      const parts = inParts(rows, jsonChars, STATEMENT_JSON_CHARS);
      if (parts.length > 1) {
        for (const part of parts) await this.purgeMany(m, p, part, emit);
        return;
      }
    }
    const ids = rows.map((r) => r.id);
    const everything = tenantWide(p);
    const edges = emit ? await this.edges.outgoingFor(everything, ids, m) : undefined;
    const targets = edges && (await this.targetTypes(m, p, edges)); // before the targets may go too
    await this.edges.removeTouching(m, p, ids, emit);
    await m.query(`DELETE FROM items WHERE tenant_id = $1 AND id = ANY($2::uuid[])`, [p.tenantId, ids]);
    if (!edges) return;
    await this.outbox.recordMany(
      m,
      p,
      rows.map((row): RecordedEvent => ({ name: 'item.deleted', audience: { item_type: row.type }, payload: itemSubject(everything, row, edges.get(row.id), targets) })),
    );
  }

  /**
   * The type of every target of these edges. The event keeps the edges as an admin sees them;
   * each receiver gets only those it may read, which depends on the target's type
   * (event-catalogue.ts `renderBody`). No statement when there are no edges.
   */
  private async targetTypes(m: EntityManager, p: Principal, edges: Map<string, ItemEdges>): Promise<Map<string, string>> {
    const ids = [...new Set([...edges.values()].flatMap((grouped) => Object.values(grouped).flat()))];
    if (!ids.length) return new Map();
    const rows: Array<{ id: string; type: string }> = await m.query(`SELECT id, type FROM items WHERE tenant_id = $1 AND id = ANY($2::uuid[])`, [p.tenantId, ids]);
    return new Map(rows.map((r) => [r.id, r.type]));
  }

  /** The revisions: each row as it now is, by whom, at its `updated_at`. */
  private async recordRevisions(m: EntityManager, p: Principal, rows: ItemRow[]): Promise<void> {
    // One JSON parameter, not jsonb[]: node-postgres escapes array elements one by one, which
    // cost more than the insert itself for a 500-item chunk.
    await m.query(
      `INSERT INTO item_versions (tenant_id, item_id, version, snapshot, changed_by, created_at)
       SELECT $1, r.item_id, r.version, r.snapshot, $2, r.created_at
         FROM jsonb_to_recordset($3::jsonb) AS r(item_id uuid, version int, snapshot jsonb, created_at timestamptz)`,
      [p.tenantId, p.credentialId, JSON.stringify(rows.map((r) => ({ item_id: r.id, version: r.version, snapshot: r, created_at: r.updated_at })))],
    );
  }
}

/**
 * Whether `changes` leave the item's values as they are. `schema_version` alone is no change: it
 * only says which version of the type's schema last checked the properties, which still fit.
 */
function changesNothing(current: ItemRow, changes: ItemChanges): boolean {
  const comparable = (column: string, value: unknown) => (column === 'timestamp' ? new Date(value as Date | string).getTime() : value);
  return Object.entries(changes).every(
    ([column, value]) => column === 'schema_version' || isDeepStrictEqual(comparable(column, (current as unknown as Record<string, unknown>)[column]), comparable(column, value)),
  );
}

/** An item event's subject: the item as an admin sees it, with the types of its edges' targets. */
function itemSubject(everything: Principal, row: ItemRow, edges: ItemEdges = {}, targets: Map<string, string> = new Map()): EventSubject {
  const ids = Object.values(edges).flat();
  const item = toItem(everything, row, edges);
  return ids.length ? { item, edge_targets: Object.fromEntries(ids.map((id) => [id, targets.get(id)!])) } : { item };
}
