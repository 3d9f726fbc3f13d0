/**
 * The in-memory model of who receives what in one tenant's events, that
 * test/events-model.e2e-spec.ts drives against the real service: its items (with extensions in
 * namespaces some credentials may not read), edges, the credentials that registered webhooks or
 * opened streams, and every event with what each webhook and stream may get of it (one outcome
 * once the event has settled; either of two for one in flight while a webhook or a key changed).
 * Written from SPEC.md 2.8, 4.6
 * and 6, CONTRACT.md "Webhooks and events", the README's "Events and webhooks" and docs/events.md
 * "The path of an event", independently of src/events and src/webhooks.
 *
 * Three credentials: the tenant's admin key, a member key M whose permissions never change, and a
 * member key N that a run may narrow or revoke. All writes go through the admin key, but for
 * some bulk actions, started by M (which writes notes) so that their jobs' ends are M's.
 */

export type ItemType = 'core.note' | 'core.task' | 'acme.base' | 'acme.kid';
export type EdgeType = 'm.rel' | 'm.hid';
export type Namespace = 'pub.ns' | 'sec.ns';
export type Owner = 'admin' | 'M' | 'N';
export type State = 'active' | 'archived' | 'trashed';
export type JobEnd = 'completed' | 'failed' | 'cancelled';
export type EventName =
  | 'item.created' | 'item.updated' | 'item.state_changed' | 'item.deleted' | 'edge.created' | 'edge.deleted' | `bulk_job.${JobEnd}`;

export const ITEM_TYPES: ItemType[] = ['core.note', 'core.task', 'acme.base', 'acme.kid'];
export const EDGE_TYPES: EdgeType[] = ['m.rel', 'm.hid'];
export const NAMESPACES: Namespace[] = ['pub.ns', 'sec.ns'];

/** Each type's parent chain, nearest first (acme.kid is created with `parent: acme.base`). */
export const ANCESTORS: Record<ItemType, string[]> = { 'core.note': [], 'core.task': [], 'acme.base': [], 'acme.kid': ['acme.base'] };

/** Tenant types made in each run's tenant, parents first (README "Types"). */
export const TYPE_BODIES = [
  { name: 'acme.base', schema: { type: 'object' } },
  { name: 'acme.kid', parent: 'acme.base', schema: { type: 'object' } },
];
export const EDGE_TYPE_BODIES = [
  { name: 'm.rel', source_types: ['core.*', 'acme.*'], target_types: ['core.*', 'acme.*'] },
  { name: 'm.hid', source_types: ['core.*', 'acme.*'], target_types: ['core.*', 'acme.*'] },
];

/** A member's three maps (README "Roles and permissions"); `null` for a revoked key. */
export interface Perms {
  type_permissions: Record<string, 'read' | 'write'>;
  extension_permissions: Record<string, 'read' | 'write'>;
  edge_permissions: Record<string, 'read' | 'write'>;
}

/** M reads notes and acme.kid (not its parent acme.base, nor core.task), the pub.ns namespace and m.rel edges. */
export const M_PERMS: Perms = {
  type_permissions: { 'core.note': 'write', 'acme.kid': 'read' },
  extension_permissions: { 'pub.ns': 'read' },
  edge_permissions: { 'm.rel': 'read' },
};
/** N starts reading everything. */
export const N_PERMS: Perms = { type_permissions: { '*': 'read' }, extension_permissions: { '*': 'read' }, edge_permissions: { '*': 'read' } };
/** What a run may narrow N to. */
export const N_NARROWINGS: Perms[] = [
  { type_permissions: { 'core.task': 'read' }, extension_permissions: {}, edge_permissions: {} },
  { type_permissions: { 'acme.base.*': 'read' }, extension_permissions: { 'sec.ns': 'read' }, edge_permissions: { 'm.hid': 'read' } },
  { type_permissions: { '*': 'read' }, extension_permissions: { 'pub.ns': 'read' }, edge_permissions: { 'm.rel': 'read' } },
];

/** Subscriptions a webhook or stream may be given (SPEC 2.8: `*`, exact names, `parent.*`). */
export const EVENT_PATTERNS: string[][] = [
  ['*'], ['item.*'], ['item.created', 'edge.created'], ['item.updated', 'item.state_changed', 'item.deleted'], ['edge.*'], ['bulk_job.*', 'item.updated'], ['bulk_job.completed', 'edge.deleted'],
];
export const TYPE_FILTERS: Array<string[] | null> = [null, ['*'], ['core.note'], ['acme.base.*'], ['acme.kid', 'core.task']];

/**
 * A dotted name against a pattern (README "Roles and permissions"): `*` every name, `a.b.*` `a.b`,
 * names below it and, for item types, every subtype of those, `a.b` exactly.
 */
export function matchesPattern(pattern: string, name: string, ancestors: string[] = []): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('.*')) {
    const base = pattern.slice(0, -2);
    return [name, ...ancestors].some((n) => n === base || n.startsWith(`${base}.`));
  }
  return pattern === name;
}

/** `write` implies `read`, an unmatched name is denied: for reading, any matching pattern grants it. */
const reads = (map: Record<string, string>, name: string, ancestors: string[] = []) => Object.keys(map).some((p) => matchesPattern(p, name, ancestors));
/** For writing, a matching pattern that grants `write`. */
const writes = (map: Record<string, string>, name: string, ancestors: string[] = []) =>
  Object.entries(map).some(([p, level]) => level === 'write' && matchesPattern(p, name, ancestors));

export interface MItem {
  id: string;
  type: ItemType;
  title: string;
  extensions: Partial<Record<Namespace, { v: number }>>;
  tags: string[];
  tier: string;
  state: State;
  version: number;
  /** Creation order: the item's `timestamp` is one second per creation, so a 1 ms window selects exactly it. */
  n: number;
  purged: boolean;
}

export interface MEdge {
  id: string;
  type: EdgeType;
  source: MItem;
  target: MItem;
  gone: boolean;
}

export interface Subscription {
  owner: Owner;
  events: string[];
  typeFilter: string[] | null;
}

export interface MHook extends Subscription {
  id: string;
  path: string;
  secret: string;
  disabled: boolean;
}

/** What one receiver gets of one event: its name, the subject's id and, for item events, the extension namespaces its body shows. */
export interface Owed {
  name: EventName;
  subject: string;
  extensions?: string[];
  /** The item's outgoing edges its body shows, as `edge type:target id`. */
  edges?: string[];
  /** The item's tags (an API key's bodies show them all: only an OAuth token lacking `metadata:read` has them left out). */
  tags?: string[];
}
const list = (xs: string[]) => [...xs].sort().join(',');
export const owedKey = (o: Owed): string =>
  `${o.name} ${o.subject}${o.extensions ? ` ext[${list(o.extensions)}]` : ''}${o.edges ? ` edges[${list(o.edges)}]` : ''}${o.tags ? ` tags[${list(o.tags)}]` : ''}`;

/**
 * One event as one receiver may get it: `outcomes` holds each acceptable `owedKey`, and '' where
 * getting nothing is acceptable. An event settled before every change of its receivers has one
 * outcome; one still in flight when a webhook or a key changed may go out as either would have it.
 */
export interface Due {
  name: EventName;
  subject: string;
  outcomes: Set<string>;
}

/** Who may read an event: an item's type; an edge's type and both its items' types; a bulk job's credential (and admins). */
type Audience = { itemType: ItemType } | { edgeType: EdgeType; sourceType: ItemType; targetType: ItemType } | { jobOwner: Owner };

export interface MEvent {
  name: EventName;
  subject: string;
  /** The item's version in the event's body (item events): with name and subject, it names the event in the outbox. */
  version?: number;
  audience: Audience;
  extensions?: Namespace[];
  /** The item's outgoing edges when the event was written. */
  edges?: Array<{ type: EdgeType; target: MItem }>;
  tags?: string[];
  hooks: Array<Set<string>>;
  streams: Array<Set<string>>;
}

export class Model {
  items: MItem[] = [];
  edges: MEdge[] = [];
  hooks: MHook[] = [];
  streams: Subscription[] = [];
  perms: Record<Owner, Perms | 'admin' | null> = { admin: 'admin', M: M_PERMS, N: N_PERMS };
  events: MEvent[] = [];
  /** Events written since the service was last seen idle: a change to a webhook or a key may still catch them. */
  unsettled: MEvent[] = [];
  /** Changes made so far, for unique titles and extension values. */
  tick = 0;

  live(): MItem[] {
    return this.items.filter((i) => !i.purged);
  }

  liveEdges(): MEdge[] {
    return this.edges.filter((e) => !e.gone);
  }

  /** Whether `who` may, by `check` of its permission maps: an admin always, a revoked key never. */
  private allows(who: Owner, check: (p: Perms) => boolean): boolean {
    const p = this.perms[who];
    return p === 'admin' || (p !== null && check(p));
  }

  canType(who: Owner, type: ItemType): boolean {
    return this.allows(who, (p) => reads(p.type_permissions, type, ANCESTORS[type]));
  }

  canExtension(who: Owner, ns: Namespace): boolean {
    return this.allows(who, (p) => reads(p.extension_permissions, ns));
  }

  /** README "Bulk actions": a member's match set is narrowed to the types it may write. */
  canWriteType(who: Owner, type: ItemType): boolean {
    return this.allows(who, (p) => writes(p.type_permissions, type, ANCESTORS[type]));
  }

  canEdgeType(who: Owner, type: EdgeType): boolean {
    return this.allows(who, (p) => reads(p.edge_permissions, type));
  }

  /** README "Who receives what": the credential may read the item's type; for an edge, the edge type and both items' types. */
  mayReceive(who: Owner, a: Audience): boolean {
    if (this.perms[who] === null) return false;
    if ('itemType' in a) return this.canType(who, a.itemType);
    // README "Bulk actions": a job's end goes "to the job's credential and admins".
    if ('jobOwner' in a) return who === a.jobOwner || this.perms[who] === 'admin';
    return this.canEdgeType(who, a.edgeType) && this.canType(who, a.sourceType) && this.canType(who, a.targetType);
  }

  /** Whether a subscription selects the event: its `events` patterns, and for item events only its `type_filter` (SPEC 2.8). */
  selects(s: Subscription, name: EventName, a: Audience): boolean {
    if (!s.events.some((p) => matchesPattern(p, name))) return false;
    if (!('itemType' in a) || !s.typeFilter) return true;
    const type = a.itemType;
    return s.typeFilter.some((p) => matchesPattern(p, type, ANCESTORS[type]));
  }

  /** What a subscription (a webhook when `disabled` is given) gets of the event now: its owedKey, or '' for nothing. */
  outcome(s: Subscription, disabled: boolean, e: MEvent): string {
    if (disabled || !this.selects(s, e.name, e.audience) || !this.mayReceive(s.owner, e.audience)) return '';
    const extensions = e.extensions?.filter((ns) => this.canExtension(s.owner, ns));
    // README: an item's `edges` as GET /items/{id} shows them to the receiving credential (read on the edge type and the target's type).
    const edges = e.edges?.filter((x) => this.canEdgeType(s.owner, x.type) && this.canType(s.owner, x.target.type)).map((x) => `${x.type}:${x.target.id}`);
    return owedKey({ name: e.name, subject: e.subject, ...(extensions ? { extensions } : {}), ...(edges ? { edges } : {}), ...(e.tags ? { tags: e.tags } : {}) });
  }

  /** Records an event: what each enabled webhook and each stream gets of it, by their subscriptions and their credentials' reach. */
  emit(name: EventName, subject: string, audience: Audience, extensions?: Namespace[], version?: number, edges?: MEvent['edges'], tags?: string[]): void {
    const e: MEvent = { name, subject, version, audience, extensions, edges, tags, hooks: [], streams: [] };
    e.hooks = this.hooks.map((h) => new Set([this.outcome(h, h.disabled, e)]));
    e.streams = this.streams.map((s) => new Set([this.outcome(s, false, e)]));
    this.events.push(e);
    this.unsettled.push(e);
  }

  /** After a change to a webhook or a key: the events still in flight may go out as it now has them, too. */
  reconsider(): void {
    for (const e of this.unsettled) {
      this.hooks.forEach((h, i) => e.hooks[i].add(this.outcome(h, h.disabled, e)));
      this.streams.forEach((s, i) => e.streams[i].add(this.outcome(s, false, e)));
    }
  }

  /** Some events were seen to have reached whom they reach. */
  settleWhere(done: (e: MEvent) => boolean): void {
    this.unsettled = this.unsettled.filter((e) => !done(e));
  }

  /** What a webhook (or a stream) may get, one entry per event it may get. */
  dues(kind: 'hooks' | 'streams', i: number): Due[] {
    return this.events.filter((e) => [...e[kind][i]].some((o) => o !== '')).map((e) => ({ name: e.name, subject: e.subject, outcomes: e[kind][i] }));
  }

  emitItem(name: EventName, item: MItem): void {
    // Whether a purged item's body still lists the edges the purge removes is not said: its edges are not compared.
    const edges = name === 'item.deleted' ? undefined : this.liveEdges().filter((e) => e.source === item).map((e) => ({ type: e.type, target: e.target }));
    this.emit(name, item.id, { itemType: item.type }, Object.keys(item.extensions) as Namespace[], item.version, edges, [...item.tags]);
  }

  emitEdge(name: EventName, e: MEdge): void {
    this.emit(name, e.id, { edgeType: e.type, sourceType: e.source.type, targetType: e.target.type });
  }

  emitJob(end: JobEnd, jobId: string, owner: Owner): void {
    this.emit(`bulk_job.${end}`, jobId, { jobOwner: owner });
  }
}

const BASE = Date.UTC(2022, 0, 1);
/** The n-th creation's timestamp: one second apart. */
export const stamp = (n: number): string => new Date(BASE + n * 1000).toISOString();
export const plusMs = (ts: string, ms: number): string => new Date(Date.parse(ts) + ms).toISOString();
