/**
 * The in-memory model of one tenant's items, edges and tags that test/items-model.e2e-spec.ts
 * drives against the real service: what each answer of the items surface must be, written from
 * SPEC.md, CONTRACT.md, the README and docs/api-reference.md, independently of src/items.
 * Two credentials act on the tenant: its admin key and a member key whose permissions are
 * MEMBER_TYPES / MEMBER_EDGES / MEMBER_EXTENSIONS below, and whose default tier is DEFAULT_TIER.member.
 */
import { LIFECYCLE_TABLE, State } from './lifecycle-table';

export type { State };
export type ItemType = 'core.note' | 'core.task' | 'core.contact';
export type EdgeType = 'm.rel' | 'm.one' | 'm.dag';
export type Who = 'admin' | 'member';
export type Props = Record<string, unknown>;
export type Tier = 'library' | 'feed';
export type Extensions = Record<string, Props>;

export const ITEM_TYPES: ItemType[] = ['core.note', 'core.task', 'core.contact'];
export const EDGE_TYPES: EdgeType[] = ['m.rel', 'm.one', 'm.dag'];
export const STATES: State[] = ['active', 'archived', 'trashed', 'revoked'];
export const TAG_POOL = ['red', 'green', 'blue', 'x-y'];
export const TIERS: Tier[] = ['library', 'feed'];
/** `acme` and `acme.mine.sub` are covered by `acme.*` (docs "Patterns": `a.b.*` is `a.b` itself and everything below), not by `acme.mine`. */
export const NAMESPACES = ['acme.pub', 'acme.mine', 'other.secret', 'acme', 'acme.mine.sub'];
/**
 * Words a search is drawn for: each is a word of no other text of the model nor a prefix of one
 * (README "Search": the last plain word also matches as a prefix), and unlike the others in
 * spelling, so that the typo fallback has nothing to offer when nothing matches. `red` and
 * `green` are tags of TAG_POOL (tags are indexed, SPEC 4.3); the others appear only in text.
 */
export const SEARCH_WORDS = ['kumquat', 'bilberry', 'tamarind', 'red', 'green'];
/** `tamar` finds `tamarind` only as a prefix (README "Search": the last plain word also matches as a prefix). */
export const PREFIX_WORD = 'tamar';
/** A typo of `kumquat`: matches nothing exactly; bulk filters have no typo fallback (README "Bulk actions"). */
export const TYPO_WORD = 'kumqat';

/** The member key: writes notes, reads tasks, does not see contacts; writes m.rel, reads m.dag, nothing on m.one. */
export const MEMBER_TYPES = { 'core.note': 'write', 'core.task': 'read' } as const;
export const MEMBER_EDGES = { 'm.rel': 'write', 'm.dag': 'read' } as const;
/** Reads `acme.pub` and writes `acme.mine` through the patterns' most specific match; `other.secret` matches none, so it is hidden. */
export const MEMBER_EXTENSIONS = { 'acme.*': 'read', 'acme.mine': 'write' } as const;
/** SPEC 2.7 `default_tier`: the admin key keeps the default (`library`, docs "Key fields"). */
export const DEFAULT_TIER: Record<Who, Tier> = { admin: 'library', member: 'feed' };

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
  tier: Tier;
  extensions: Extensions;
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
  tier: Tier;
  /** Every namespace, seen or not: a member's view is visibleExtensions(). */
  extensions: Extensions;
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

export const snapshot = (item: MItem): Snapshot => ({
  properties: { ...item.properties },
  tags: [...item.tags],
  state: item.state,
  tier: item.tier,
  extensions: { ...item.extensions },
});

/** docs "Patterns": MEMBER_EXTENSIONS resolved by hand (`acme.mine` exact beats `acme.*`; `other.secret` unmatched, so denied). */
export const extRead = (who: Who, ns: string): boolean => who === 'admin' || ns === 'acme' || ns.startsWith('acme.');
export const extWrite = (who: Who, ns: string): boolean => who === 'admin' || ns === 'acme.mine';
/** docs "Permissions": unreadable extension namespaces are left out of responses. */
export const visibleExtensions = (who: Who, ext: Extensions): Extensions => Object.fromEntries(Object.entries(ext).filter(([ns]) => extRead(who, ns)));

/**
 * Whether a one-word query finds the item: a word of one of its string properties, or one of
 * its tags (SPEC 4.3), that is the query word or, the query's last plain word, starts with it.
 */
export function hasWord(item: MItem, word: string): boolean {
  const words = [...item.tags, ...Object.values(item.properties).flatMap((v) => (typeof v === 'string' ? v.toLowerCase().split(/[^a-z0-9]+/) : []))];
  return words.some((w) => w.startsWith(word));
}

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
  tier?: Tier | 'all';
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
  if (f.tier && f.tier !== 'all' && item.tier !== f.tier) return false;
  if (f.since && Date.parse(item.timestamp) < Date.parse(f.since)) return false;
  if (f.until && Date.parse(item.timestamp) >= Date.parse(f.until)) return false;
  if (f.source && item.owner !== f.source) return false;
  return true;
}

const BASE = Date.UTC(2021, 0, 1);
/** The timestamp of the n-th creation: one second apart. */
export const stamp = (n: number): string => new Date(BASE + n * 1000).toISOString();
export const plusMs = (ts: string, ms: number): string => new Date(Date.parse(ts) + ms).toISOString();
