/** The stored item row, its public JSON shape, and the permission-aware serializer. */
import { canExtension, canMetadata } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import type { Tier } from '../keys/api-key.entity';
import type { ItemState } from './lifecycle';

export interface ItemRow {
  tenant_id: string;
  id: string;
  type: string;
  properties: Record<string, unknown>;
  state: ItemState;
  version: number;
  schema_version: number;
  source: string;
  source_id: string | null;
  timestamp: Date | string;
  tier: Tier;
  device: string | null;
  capture_latitude: number | null;
  capture_longitude: number | null;
  tags: string[];
  extensions: Record<string, Record<string, unknown>>;
  created_at: Date | string;
  updated_at: Date | string;
  /** For a trashed item, the state it was trashed from (lifecycle.ts); never shown. */
  trashed_from: ItemState | null;
}

export const ITEM_COLUMNS =
  'tenant_id, id, type, properties, state, version, schema_version, source, source_id, "timestamp", tier, device, ' +
  'capture_latitude, capture_longitude, tags, extensions, created_at, updated_at, trashed_from';

/** The bytes of a row of ITEM_COLUMNS that can be large, as SQL: what a page's byte budget counts. */
export const ITEM_BYTES = 'octet_length(properties::text) + octet_length(extensions::text)';

/**
 * The row lock of an item a write is about to change: the one its UPDATE takes anyway, as an
 * item's key never changes. FOR UPDATE would also block the foreign-key checks (FOR KEY SHARE)
 * of edges being linked to the item meanwhile, and two writes, each holding its item while
 * linking an edge to the other's, would deadlock.
 */
export const ITEM_WRITE_LOCK = ' FOR NO KEY UPDATE';

/** ITEM_COLUMNS qualified with the items alias `i`. */
export const ITEM_COLUMNS_I = ITEM_COLUMNS.split(',')
  .map((c) => `i.${c.trim()}`)
  .join(', ');

/** Outgoing edges grouped by edge type: `{ "<edge type>": ["<target id>", ...] }`. */
export type ItemEdges = Record<string, string[]>;

export interface Item {
  id: string;
  type: string;
  properties: Record<string, unknown>;
  state: ItemState;
  version: number;
  schema_version: number;
  source: string;
  source_id: string | null;
  timestamp: string;
  created_at: string;
  updated_at: string;
  tier: Tier;
  tenant_id: string;
  device: string | null;
  capture_latitude: number | null;
  capture_longitude: number | null;
  edges: ItemEdges;
  extensions: Record<string, Record<string, unknown>>;
  tags?: string[];
}

const iso = (v: Date | string) => (v instanceof Date ? v : new Date(v)).toISOString();

/** Readable extension namespaces only; tags only when the credential may read metadata. */
export function visibleExtensions(p: Principal, extensions: ItemRow['extensions']): ItemRow['extensions'] {
  const out: ItemRow['extensions'] = {};
  for (const [ns, value] of Object.entries(extensions ?? {})) if (canExtension(p, ns, 'read')) out[ns] = value;
  return out;
}

export function toItem(p: Principal, r: ItemRow, edges: ItemEdges = {}): Item {
  return {
    id: r.id,
    type: r.type,
    properties: r.properties,
    state: r.state,
    version: r.version,
    schema_version: r.schema_version,
    source: r.source,
    source_id: r.source_id,
    timestamp: iso(r.timestamp),
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
    tier: r.tier,
    tenant_id: r.tenant_id,
    device: r.device,
    capture_latitude: r.capture_latitude,
    capture_longitude: r.capture_longitude,
    edges,
    extensions: visibleExtensions(p, r.extensions),
    ...(canMetadata(p, 'read') ? { tags: r.tags } : {}),
  };
}
