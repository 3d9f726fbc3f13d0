/**
 * The bulk actions as data and pure functions: their names and per-action fields, the check
 * of a request's fields, and what one action does to one item (`planChange`), built from the
 * same rules a single write uses (lifecycle.ts, item-changes.ts).
 */
import { isDeepStrictEqual } from 'node:util';
import { ApiError } from '../common/api-error';
import { FieldIssue, validationError } from '../common/validation';
import type { Tier } from '../keys/api-key.entity';
import { changeTags, mergeProperties, propertiesError, tooManyTags } from '../items/item-changes';
import type { ItemFilter } from '../items/item-filter';
import type { ItemRow } from '../items/item.model';
import type { ItemChanges } from '../items/item-writer';
import { canTransition, ItemState, transitionError } from '../items/lifecycle';
import type { ResolvedType } from '../types/types.service';

export const BULK_ACTIONS = ['transition', 'purge', 'update_tags', 'update_tier', 'update_properties', 'update_timestamp'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

export const JOB_STATUSES = ['queued', 'in_progress', 'completed', 'failed', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const FINAL_STATUSES: readonly JobStatus[] = ['completed', 'failed', 'cancelled'];

export const MAX_ITEMS_DEFAULT = 10_000;
export const MAX_ITEMS_CEILING = 50_000;
/** Items per transaction, in a job and in a direct run. */
export const CHUNK_SIZE = 500;
/** Per-item errors a job keeps (its `errored` counts them all). */
export const MAX_KEPT_ERRORS = 1000;

/** What to do to each item: the action and its fields, as validated. Stored with a job. */
export interface BulkSpec {
  action: BulkAction;
  emit_events: boolean;
  /**
   * Set once the match set is taken; absent from jobs submitted before the filter was kept
   * with them, which act on their whole match set.
   */
  filter?: BulkFilter;
  to_state?: ItemState;
  add_tags?: string[];
  remove_tags?: string[];
  tier?: Tier;
  properties?: Record<string, unknown>;
  timestamp?: string;
}

/**
 * What a job was asked to do, as its submitter sent it, kept with the job for good (its `spec`
 * is let go as it ends): the filter as sent, the action's fields, and of `update_properties`
 * the names of the properties it sets, not their values (up to a whole JSON body).
 */
export interface BulkRequest {
  filter: Record<string, unknown>;
  emit_events: boolean;
  max_items: number;
  to_state?: ItemState;
  add_tags?: string[];
  remove_tags?: string[];
  tier?: Tier;
  property_names?: string[];
  timestamp?: string;
}

export function requestOf(spec: BulkSpec, filter: object | undefined, maxItems: number): BulkRequest {
  const { action: _action, emit_events, filter: _resolved, properties, ...fields } = spec;
  return {
    filter: { ...filter },
    emit_events,
    max_items: maxItems,
    ...fields,
    ...(properties ? { property_names: Object.keys(properties) } : {}),
  };
}

/**
 * Which items the action is for: `GET /items`' filter as resolved at submission (type patterns
 * to names, a member narrowed to the types it could write then) and the free text. An item
 * changed after submission may no longer meet it, so each chunk applies it again under its row
 * locks (bulk-runner.ts).
 */
export interface BulkFilter {
  items: ItemFilter;
  /** `filter.filter`, in `GET /search`'s syntax. */
  text?: string;
}

export interface BulkItemError {
  id: string;
  code: string;
  message: string;
  /** The error's details, as a single write's error envelope has them, bounded (bulk-runner.ts). */
  details?: Record<string, unknown>;
}

type SpecField = Exclude<keyof BulkSpec, 'action' | 'emit_events'> | 'confirm';

/** Each action's fields: all of `required`, or at least one of `oneOf`. */
const ACTION_FIELDS: Record<BulkAction, { required?: SpecField[]; oneOf?: SpecField[] }> = {
  transition: { required: ['to_state'] },
  purge: { required: ['confirm'] },
  update_tags: { oneOf: ['add_tags', 'remove_tags'] },
  update_tier: { required: ['tier'] },
  update_properties: { required: ['properties'] },
  update_timestamp: { required: ['timestamp'] },
};
const ALL_FIELDS: SpecField[] = ['to_state', 'confirm', 'add_tags', 'remove_tags', 'tier', 'properties', 'timestamp'];

/**
 * The action's fields, checked together: every missing one, every one that belongs to another
 * action, and purge's confirmation, named in one 400 `validation_error`. Returns the spec.
 */
export function specOf(body: Partial<Record<SpecField, unknown>> & { action: BulkAction; emit_events?: boolean }): BulkSpec {
  const { action } = body;
  const own = ACTION_FIELDS[action];
  const mine = [...(own.required ?? []), ...(own.oneOf ?? [])];
  const issues: FieldIssue[] = [];
  for (const field of own.required ?? []) if (body[field] === undefined) issues.push({ field, message: `is required for action ${action}` });
  // An empty list changes nothing, as an absent one (update_properties' `{}` likewise, below).
  const given = (f: SpecField) => body[f] !== undefined && !(Array.isArray(body[f]) && body[f].length === 0);
  if (own.oneOf && !own.oneOf.some(given)) {
    for (const field of own.oneOf) issues.push({ field, message: `${own.oneOf.join(' or ')} is required for action ${action}` });
  }
  for (const field of ALL_FIELDS) {
    if (body[field] !== undefined && !mine.includes(field)) issues.push({ field, message: `is not a field of action ${action}` });
  }
  if (action === 'purge' && body.confirm !== undefined && body.confirm !== 'PURGE') issues.push({ field: 'confirm', message: 'must be "PURGE"' });
  if (action === 'update_properties' && body.properties !== undefined && Object.keys(body.properties as object).length === 0) {
    issues.push({ field: 'properties', message: 'must change at least one property' });
  }
  if (issues.length) throw validationError(issues);
  const spec: BulkSpec = { action, emit_events: body.emit_events ?? true };
  for (const field of mine) if (field !== 'confirm' && body[field] !== undefined) (spec as unknown as Record<string, unknown>)[field] = body[field];
  return spec;
}

/** What the action does to one item: its changes, nothing (already so), or the item's error. */
export type Plan = { changes: ItemChanges } | 'unchanged' | ApiError;

/** `type` is the item's type, resolved for writing; needed by update_properties only. */
export async function planChange(spec: BulkSpec, row: ItemRow, type?: ResolvedType): Promise<Plan> {
  switch (spec.action) {
    case 'transition': {
      const to = spec.to_state!;
      if (row.state === to) return 'unchanged';
      if (!canTransition(row, to)) return transitionError(row, to);
      return { changes: { state: to } };
    }
    case 'update_tags': {
      const tags = changeTags(row.tags, spec.add_tags, spec.remove_tags);
      return tooManyTags(row.tags, tags) ?? (isDeepStrictEqual(tags, row.tags) ? 'unchanged' : { changes: { tags } });
    }
    case 'update_tier':
      return row.tier === spec.tier ? 'unchanged' : { changes: { tier: spec.tier! } };
    case 'update_timestamp': {
      const timestamp = new Date(spec.timestamp!);
      return new Date(row.timestamp).getTime() === timestamp.getTime() ? 'unchanged' : { changes: { timestamp } };
    }
    case 'update_properties': {
      if (!type) return ApiError.badRequest('invalid_type', `Type ${row.type} no longer exists`);
      const properties = mergeProperties(row.properties, spec.properties);
      if (isDeepStrictEqual(properties, row.properties)) return 'unchanged';
      return (await propertiesError(type, properties)) ?? { changes: { properties, schema_version: type.version } };
    }
    case 'purge':
      throw new Error('purge is not a per-item change');
  }
}
