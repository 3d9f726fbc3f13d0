/**
 * The event catalogue: every event name, what its body carries, and who may receive it.
 * One place decides both for webhooks and for the event stream:
 * - `audience` says what a reader must be able to read (the item's type; for an edge, the
 *   edge type and both items' types), checked with the credential's permissions at fan-out;
 * - `renderBody` is the exact JSON a receiver gets, with the extension namespaces (and, for
 *   OAuth tokens without `metadata:read`, the tags) it may not read left out, and an item's
 *   outgoing `edges` cut to those GET /items/{id} would show it: read on the edge type and on
 *   the target's type (`canSeeEdge`; the source is the item, which the receiver may read). The
 *   item writer stores each target's type beside the item (`edge_targets`) for that; it is never
 *   sent.
 * An item type's place in the hierarchy is settled when the event is written: the outbox stores,
 * beside the types an audience names and the types of an item's edge targets, their ancestors as
 * they were then (`lineage`), and `selects`, `mayReceive` and `renderBody` judge by those. A type
 * deleted and made again under another parent since (its name free again once its items are
 * purged) neither widens a replay of the old type's events (or of edges to its items) to the new
 * parent's readers nor takes pending deliveries from those they were owed to.
 * A bulk job's end (`bulk_job.completed`, `.failed`, `.cancelled`) reaches what may see the job:
 * the credential that started it (for an OAuth token, its tokens with no scope the job's lacks:
 * `ownsWork`), and admins.
 */
import { canExtension, canMetadata, canType, isAdmin } from '../auth/permissions';
import { ownsWork, type Principal } from '../auth/principal';
import { matchesPattern } from '../common/type-pattern';
import { canSeeEdge } from '../edges/edge-rules';
import { tokenScopesOf } from '../oidc/scopes';
import type { Item, ItemEdges } from '../items/item.model';
import { TypeCatalog } from '../types/type-catalog';

export const EVENT_NAMES = [
  'item.created',
  'item.updated',
  'item.state_changed',
  'item.deleted',
  'edge.created',
  'edge.deleted',
  'bulk_job.completed',
  'bulk_job.failed',
  'bulk_job.cancelled',
] as const;
export type EventName = (typeof EVENT_NAMES)[number];

/** Most patterns a subscription (a webhook's or a stream's `events`, `type_filter`) may list. */
export const MAX_SUBSCRIPTION_PATTERNS = 50;

/**
 * Each item type an event's lineage covers (`lineageTypes`), with its ancestors (nearest first)
 * when the event was written. Absent in events stored before it was kept: those are judged by the
 * types as they are. Events stored before it covered edge targets hold the audience's types only:
 * their edges are judged by the types as they are.
 */
export type Lineage = Record<string, string[]>;

export type Audience =
  | { item_type: string; lineage?: Lineage }
  | { edge_type: string; source_type: string; target_type: string; lineage?: Lineage }
  /** `job_scopes`: the starting token's scopes (null for an API key; absent in events stored before they were kept: then no OAuth token receives them). */
  | { job_credential: string; job_scopes?: string[] | null };

export interface EdgeEventBody {
  id: string;
  type: string;
  source_id: string;
  target_id: string;
  properties: Record<string, unknown>;
  created_at: string;
}

/**
 * What the outbox stores: the full subject; each receiver gets its own view of it. With an item,
 * `edge_targets` maps each target id of its `edges` to that item's type (absent in events stored
 * before it was kept: their edges go to admins only).
 */
export type EventSubject = { item: Item; edge_targets?: Record<string, string> } | { edge: EdgeEventBody } | { job: object };

export interface StoredEvent {
  tenant_id: string;
  id: string;
  seq: string;
  name: EventName;
  audience: Audience;
  payload: EventSubject;
  created_at: string;
}

/** An events row as StoredEvent (seq as text: a bigint). */
export const EVENT_COLUMNS = `tenant_id, id, seq::text AS seq, name, audience, payload,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at`;

/**
 * The item types whose ancestors the outbox stores in an event's `lineage`: those its audience
 * names (who receives it) and its item's edge targets' (which outgoing edges each receiver sees).
 */
export function lineageTypes(e: Pick<StoredEvent, 'audience' | 'payload'>): string[] {
  const named = audienceTypes(e.audience);
  if (!('item' in e.payload) || !e.payload.edge_targets) return named;
  return [...new Set([...named, ...Object.values(e.payload.edge_targets)])];
}

function audienceTypes(a: Audience): string[] {
  if ('item_type' in a) return [a.item_type];
  if ('source_type' in a) return [a.source_type, a.target_type];
  return [];
}

const settled = new WeakMap<Lineage, TypeCatalog>();

/** The types an event's audience is judged by: as they were when it was written where it says, else as they are. */
function typesOf(e: Pick<StoredEvent, 'audience'>, now: TypeCatalog): TypeCatalog {
  const lineage = 'lineage' in e.audience ? e.audience.lineage : undefined;
  if (!lineage) return now;
  let types = settled.get(lineage);
  if (!types) {
    const chains = Object.entries(lineage).map(([name, ancestors]) => [name, ...ancestors]);
    types = new TypeCatalog(chains.flatMap((chain) => chain.map((name, i) => ({ name, parent: chain[i + 1] ?? null }))));
    settled.set(lineage, types);
  }
  return types;
}

/** The names a registration's `events` patterns select (`*`, `item.*`, `edge.created`). */
export function isEventPattern(pattern: string): boolean {
  return EVENT_NAMES.some((name) => matchesPattern(pattern, name));
}

/** Whether a subscription (its `events` and `type_filter`) selects this event. */
export function selects(events: readonly string[], typeFilter: readonly string[] | null, e: StoredEvent, types: TypeCatalog): boolean {
  if (!events.some((pattern) => matchesPattern(pattern, e.name))) return false;
  if (!typeFilter?.length || !('item_type' in e.audience)) return true; // type_filter limits item events only
  const ref = typesOf(e, types).ref(e.audience.item_type);
  return typeFilter.some((pattern) => matchesPattern(pattern, ref));
}

/** Whether this credential may read what the event is about. */
export function mayReceive(p: Principal, e: StoredEvent, types: TypeCatalog): boolean {
  const a = e.audience;
  if ('item_type' in a) return canType(p, typesOf(e, types).ref(a.item_type), 'read');
  if ('job_credential' in a) return isAdmin(p) || ownsWork(p.credentialId, tokenScopesOf(p), a.job_credential, a.job_scopes);
  return canSeeEdge(p, a, typesOf(e, types));
}

/** The body a receiver with this principal gets: `{event, item}`, `{event, edge}` or `{event, job}`, as JSON text. */
export function renderBody(p: Principal, e: StoredEvent, types: TypeCatalog): string {
  if ('edge' in e.payload) return JSON.stringify({ event: e.name, edge: e.payload.edge });
  if ('job' in e.payload) return JSON.stringify({ event: e.name, job: e.payload.job });
  const { tags, extensions, ...item } = e.payload.item;
  // `edges` keeps its place in the item's field order; only its value is narrowed.
  const visible: Item = { ...item, edges: readableEdges(p, e, item, e.payload.edge_targets ?? {}, types), extensions: {} };
  for (const [ns, value] of Object.entries(extensions)) if (canExtension(p, ns, 'read')) visible.extensions[ns] = value;
  if (canMetadata(p, 'read')) visible.tags = tags;
  return JSON.stringify({ event: e.name, item: visible });
}

/**
 * The item's outgoing edges this receiver may read, in their stored order, each target's type
 * judged as it was when the event was written (where the lineage covers it, else as it is now).
 */
function readableEdges(p: Principal, e: StoredEvent, item: Pick<Item, 'type' | 'edges'>, targets: Record<string, string>, now: TypeCatalog): ItemEdges {
  const lineage = 'lineage' in e.audience ? e.audience.lineage : undefined;
  const then = typesOf(e, now);
  const readable: ItemEdges = {};
  for (const [edgeType, ids] of Object.entries(item.edges)) {
    const kept = ids.filter((id) => {
      const targetType = targets[id];
      if (targetType === undefined) return isAdmin(p); // stored without its target types: unknown, so not shown
      const types = lineage && !Object.hasOwn(lineage, targetType) ? now : then;
      return canSeeEdge(p, { edge_type: edgeType, source_type: item.type, target_type: targetType }, types);
    });
    if (kept.length) readable[edgeType] = kept;
  }
  return readable;
}
