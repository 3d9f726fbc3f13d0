/**
 * Restoring an item to one of its revisions (`POST /items/{id}/versions/{version}/restore`) as
 * the PATCH that takes it there: one rule, so that a restore is checked, merged, versioned and
 * announced exactly as that PATCH would be. The PATCH names only the fields that differ, so it
 * needs the permissions a hand-made one would, and no more.
 *
 * Not restored: the lifecycle state (a move of its own, with its own rules), edges (not
 * versioned), and what the caller may not write: extension namespaces outside its write
 * permissions, and tags without `metadata:write`; those stay as they are. The properties are the
 * revision's as they were (ItemsService.restore), a top-level `null` included, which the PATCH's
 * shallow merge would remove.
 */
import { isDeepStrictEqual } from 'node:util';
import { canExtension, canMetadata } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import type { ItemRow } from './item.model';
import type { PatchItemDto } from './items.dto';

export type RestoringPatch = Omit<PatchItemDto, 'version'>;

const instant = (v: Date | string) => new Date(v).toISOString();

/** The PATCH fields that take `current` back to what `revision` held, for what `p` may write. */
export function restoringPatch(p: Principal, current: ItemRow, revision: ItemRow): RestoringPatch {
  const patch: RestoringPatch = {};
  const properties: Record<string, unknown> = {};
  for (const key of Object.keys(current.properties)) if (!(key in revision.properties)) properties[key] = null;
  for (const [key, value] of Object.entries(revision.properties)) {
    if (!isDeepStrictEqual(current.properties[key], value)) properties[key] = value;
  }
  if (Object.keys(properties).length > 0) patch.properties = properties;

  if (canMetadata(p, 'write') && !isDeepStrictEqual(current.tags, revision.tags)) patch.tags = revision.tags;
  if (current.tier !== revision.tier) patch.tier = revision.tier;
  if (instant(current.timestamp) !== instant(revision.timestamp)) patch.timestamp = instant(revision.timestamp);
  if (current.device !== revision.device) patch.device = revision.device;
  if (current.capture_latitude !== revision.capture_latitude) patch.capture_latitude = revision.capture_latitude;
  if (current.capture_longitude !== revision.capture_longitude) patch.capture_longitude = revision.capture_longitude;

  const extensions: Record<string, Record<string, unknown> | null> = {};
  for (const ns of new Set([...Object.keys(current.extensions), ...Object.keys(revision.extensions)])) {
    if (canExtension(p, ns, 'write') && !isDeepStrictEqual(current.extensions[ns], revision.extensions[ns])) extensions[ns] = revision.extensions[ns] ?? null;
  }
  if (Object.keys(extensions).length > 0) patch.extensions = extensions;
  return patch;
}
