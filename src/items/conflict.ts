/**
 * Optimistic-concurrency rules for PATCH: which fields a patch touches, which of those changed
 * since the client's ancestor version, and the server-side merge of tags, tier and state.
 */
import { isDeepStrictEqual } from 'node:util';
import type { ItemRow } from './item.model';

/** Fields the server merges by itself when the client's version is stale. */
export const AUTO_MERGED = new Set(['tags', 'tier', 'state']);

export interface ItemPatch {
  properties?: Record<string, unknown>;
  tags?: string[];
  tier?: string;
  state?: string;
  timestamp?: string;
  extensions?: Record<string, unknown>;
  device?: string | null;
  capture_latitude?: number | null;
  capture_longitude?: number | null;
}

/** Field paths a patch writes: `properties.title`, `extensions.acme`, `tags`, ... */
export function touchedFields(patch: ItemPatch): string[] {
  const fields: string[] = [];
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    if (key === 'properties' || key === 'extensions') {
      for (const sub of Object.keys(value as object)) fields.push(`${key}.${sub}`);
    } else fields.push(key);
  }
  return fields;
}

function valueAt(row: ItemRow, path: string): unknown {
  const [head, sub] = path.split(/\.(.*)/s, 2);
  const top = (row as unknown as Record<string, unknown>)[head];
  if (sub === undefined) return top instanceof Date ? top.toISOString() : top;
  return (top as Record<string, unknown> | null)?.[sub];
}

/** Touched fields whose value differs between the ancestor and the current item. */
export function conflictingFields(touched: string[], ancestor: ItemRow, current: ItemRow): string[] {
  return touched.filter((f) => !isDeepStrictEqual(valueAt(ancestor, f), valueAt(current, f)));
}

/** True when every touched field is one the server merges itself. */
export function onlyAutoMerged(touched: string[]): boolean {
  return touched.length > 0 && touched.every((f) => AUTO_MERGED.has(f));
}

/**
 * Three-way tag merge: what the client added and removed relative to its ancestor, applied to
 * the current tags, so concurrent tag edits by others survive.
 */
export function mergeTags(ancestor: string[], client: string[], current: string[]): string[] {
  const added = client.filter((t) => !ancestor.includes(t));
  const removed = new Set(ancestor.filter((t) => !client.includes(t)));
  const out = current.filter((t) => !removed.has(t));
  for (const t of added) if (!out.includes(t)) out.push(t);
  return out;
}
