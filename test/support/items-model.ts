/**
 * The in-memory model of one tenant's items, edges and tags that test/items-model.e2e-spec.ts
 * drives against the real service: what each answer of the items surface must be, written from
 * SPEC.md, CONTRACT.md, the README and docs/api-reference.md, independently of src/items.
 * Two credentials act on the tenant: its admin key and a member key whose permissions are
 * MEMBER_TYPES / MEMBER_EDGES below.
 */
import { LIFECYCLE_TABLE, State } from './lifecycle-table';

export type { State };
export type ItemType = 'core.note' | 'core.task' | 'core.contact';
export type EdgeType = 'm.rel' | 'm.one' | 'm.dag';
export type Who = 'admin' | 'member';
export type Props = Record<string, unknown>;

export const ITEM_TYPES: ItemType[] = ['core.note', 'core.task', 'core.contact'];
export const EDGE_TYPES: EdgeType[] = ['m.rel', 'm.one', 'm.dag'];
export const STATES: State[] = ['active', 'archived', 'trashed', 'revoked'];
export const TAG_POOL = ['red', 'green', 'blue', 'x-y'];

/** The member key: writes notes, reads tasks, does not see contacts; writes m.rel, reads m.dag, nothing on m.one. */
export const MEMBER_TYPES = { 'core.note': 'write', 'core.task': 'read' } as const;
export const MEMBER_EDGES = { 'm.rel': 'write', 'm.dag': 'read' } as const;

/** Edge types created in each run's tenant (docs/api-reference.md "Edge types and edges"). */
export const EDGE_TYPE_BODIES = [
  { name: 'm.rel', source_types: ['core.*'], target_types: ['core.*'] },
  { name: 'm.one', source_types: ['core.note'], target_types: ['core.note', 'core.task'], cardinality: 'one' },
  { name: 'm.dag', source_types: ['core.*'], target_types: ['core.*'], acyclic: true },
];

/** The property each type requires (core.note requires none, so its `title` may be removed). */
export const MAIN_KEY: Record<ItemType, string> = { 'core.note': 'title', 'core.task': 'title', 'core.contact': 'name' };
export const REQUIRES_MAIN: Record<ItemType, boolean> = { 'core.note': false, 'core.task': true, 'core.contact': true };

export interface Snapshot {
  properties: Props;
  tags: string[];
  state: State;
}

export interface MItem {
  id: string;
  type: ItemType;
  owner: Who;
  /** The writing key's `source` (SPEC 2.1: stamped by the key, clients cannot override). */
  source: string;
  sourceId?: string;
  properties: Props;
  tags: string[];
  state: State;
  /** For a trashed item, the state it was trashed from: one trashed from revoked is never restored. */
  trashedFrom: State | null;
  version: number;
  /** history[v - 1] is the item as version v left it (GET /items/{id}/versions; the ancestor of a stale PATCH). */
  history: Snapshot[];
  timestamp: string;
  purged: boolean;
}

export interface MEdge {
  id: string;
  type: EdgeType;
  source: MItem;
  target: MItem;
  gone: boolean;
}

export class Model {
  items: MItem[] = [];
  edges: MEdge[] = [];
  /** Creations so far: each new item gets its own timestamp from it, so a one-millisecond window selects exactly it. */
  seq = 0;

  live(): MItem[] {
    return this.items.filter((i) => !i.purged);
  }

  liveEdges(): MEdge[] {
    return this.edges.filter((e) => !e.gone);
  }

  byNaturalKey(who: Who, sourceId: string): MItem | undefined {
    return this.live().find((i) => i.owner === who && i.sourceId === sourceId);
  }

  /** Item.edges as `who` sees them: outgoing, grouped by edge type, in creation order. */
  edgesOf(item: MItem, who: Who): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const e of this.liveEdges()) {
      if (e.source !== item || !edgeRead(who, e.type) || !canRead(who, e.target.type)) continue;
      (out[e.type] ??= []).push(e.target.id);
    }
    return out;
  }

  /** Whether `from` reaches `to` through live edges of `type` (all of them, seen or not: docs "These rules hold for the whole graph"). */
  reaches(from: MItem, to: MItem, type: EdgeType): boolean {
    const seen = new Set<MItem>();
    const stack = [from];
    while (stack.length) {
      const n = stack.pop()!;
      if (n === to) return true;
      if (seen.has(n)) continue;
      seen.add(n);
      for (const e of this.liveEdges()) if (e.type === type && e.source === n) stack.push(e.target);
    }
    return false;
  }

  purge(items: MItem[]): void {
    for (const i of items) i.purged = true;
    for (const e of this.edges) if (e.source.purged || e.target.purged) e.gone = true;
  }
}

export const canRead = (who: Who, type: ItemType): boolean => who === 'admin' || type in MEMBER_TYPES;
export const canWrite = (who: Who, type: ItemType): boolean => who === 'admin' || (MEMBER_TYPES as Record<string, string>)[type] === 'write';
export const edgeRead = (who: Who, type: EdgeType): boolean => who === 'admin' || type in MEMBER_EDGES;
export const edgeWrite = (who: Who, type: EdgeType): boolean => who === 'admin' || (MEMBER_EDGES as Record<string, string>)[type] === 'write';

const ALLOWED = new Map(LIFECYCLE_TABLE.map(([from, to, ok]) => [`${from}>${to}`, ok]));

/** The lifecycle table, plus docs "an item trashed while revoked is not restored". */
export function mayMove(item: MItem, to: State): boolean {
  if (item.state === 'trashed' && item.trashedFrom === 'revoked' && to === 'active') return false;
  return ALLOWED.get(`${item.state}>${to}`)!;
}

/** Moves the model item (the move was allowed); returns whether anything changed. */
export function move(item: MItem, to: State): boolean {
  if (item.state === to) return false;
  item.trashedFrom = to === 'trashed' ? item.state : null;
  item.state = to;
  return true;
}

/** Records a new revision of the item as it now is. */
export function bump(item: MItem): void {
  item.version += 1;
  item.history.push(snapshot(item));
}

export const snapshot = (item: MItem): Snapshot => ({ properties: { ...item.properties }, tags: [...item.tags], state: item.state });

/** Shallow merge, `null` removing a key (PATCH `properties`). */
export function mergeProps(current: Props, patch: Props): Props {
  const out = { ...current };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out;
}

/** docs "tags as the client's adds and removes relative to its ancestor, applied to the current tags". */
export function mergeTags(ancestor: string[], client: string[], current: string[]): string[] {
  const removed = ancestor.filter((t) => !client.includes(t));
  const out = current.filter((t) => !removed.includes(t));
  for (const t of client) if (!ancestor.includes(t) && !out.includes(t)) out.push(t);
  return out;
}

export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical((v as Props)[k])]));
  return v;
}

export const sameSet = (a: string[], b: string[]): boolean => a.length === b.length && a.every((x) => b.includes(x));

export interface ListFilter {
  type?: 'core.note' | 'core.task' | 'core.contact' | 'core.*';
  tags?: string[];
  state?: State | 'all';
  since?: string;
  until?: string;
  source?: Who;
}

/** What GET /items (and a bulk action's filter) selects for `who` (CONTRACT "Items", docs "Listing"). */
export function matches(item: MItem, who: Who, f: ListFilter): boolean {
  if (item.purged || !canRead(who, item.type)) return false;
  if (f.type && f.type !== 'core.*' && item.type !== f.type) return false;
  if ((f.state ?? 'active') !== 'all' && item.state !== (f.state ?? 'active')) return false;
  if (f.tags && !f.tags.every((t) => item.tags.includes(t))) return false;
  if (f.since && Date.parse(item.timestamp) < Date.parse(f.since)) return false;
  if (f.until && Date.parse(item.timestamp) >= Date.parse(f.until)) return false;
  if (f.source && item.owner !== f.source) return false;
  return true;
}

const BASE = Date.UTC(2021, 0, 1);
/** The timestamp of the n-th creation: one second apart. */
export const stamp = (n: number): string => new Date(BASE + n * 1000).toISOString();
export const plusMs = (ts: string, ms: number): string => new Date(Date.parse(ts) + ms).toISOString();
