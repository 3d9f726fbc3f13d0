/**
 * The rules for computing an item's next values, as pure functions: one definition each,
 * used by single writes (items.service.ts) and bulk actions (src/bulk) alike.
 */
import type { ErrorObject } from 'ajv';
import { ApiError } from '../common/api-error';
import { validationError } from '../common/validation';
import type { ResolvedType } from '../types/types.service';
import { propertyFieldIssues, propertyIssues } from '../types/property-issues';
import type { ItemRow } from './item.model';
import type { ItemChanges } from './item-writer';
import { MAX_TAGS, PatchItemDto } from './items.dto';

export type ExtensionsPatch = Record<string, Record<string, unknown> | null>;

const BLOB_REF_RE = /^sha256:[0-9a-f]{64}$/;

/** Where a value is: its key, under its parent's place (undefined at the top). */
type Place = { key: string; parent: Place | undefined } | undefined;

const spell = (at: Place): string => (at === undefined ? '' : at.parent === undefined ? at.key : `${spell(at.parent)}.${at.key}`);

/**
 * Blob references (`sha256:<hex>` strings) anywhere in a properties object, with their paths.
 * A path is spelt only for a reference: spelling one for every value, and an array of results
 * for every object, made this walk cost more than the rest of a large write's checks.
 */
export function blobReferences(value: unknown): Array<{ path: string; ref: string }> {
  const found: Array<{ path: string; ref: string }> = [];
  const walk = (v: unknown, at: Place): void => {
    if (typeof v === 'string') {
      if (v.length === 71 && BLOB_REF_RE.test(v)) found.push({ path: spell(at), ref: v });
    } else if (v !== null && typeof v === 'object') {
      for (const key of Object.keys(v)) walk((v as Record<string, unknown>)[key], { key, parent: at });
    }
  };
  walk(value, undefined);
  return found;
}

/** Applies an extensions patch: a namespace set to null is removed. */
export function mergeExtensions(current: ItemRow['extensions'], patch: ExtensionsPatch | undefined): ItemRow['extensions'] {
  if (!patch) return current;
  const out = { ...current };
  for (const [ns, value] of Object.entries(patch)) {
    if (value === null) delete out[ns];
    else out[ns] = value;
  }
  return out;
}

/** The fields of a write's body that stand for the item's own when sent (an upsert's, a PATCH's). */
type SentFields = Pick<PatchItemDto, 'tags' | 'tier' | 'state' | 'timestamp' | 'device' | 'capture_latitude' | 'capture_longitude' | 'extensions'>;

/** A nullable field's next value: absent keeps the current one, `null` clears it. */
const given = <T>(sent: T | undefined, current: T): T => (sent !== undefined ? sent : current);

/**
 * An item's next values when a body of item fields updates it (a natural key's re-post, a PATCH):
 * each field sent, else the item's; extensions patched (mergeExtensions). The properties and the
 * schema version are the caller's, because there the two writes differ: a re-post replaces the
 * properties and always stamps its type's version; a PATCH merges them (mergeProperties) and
 * stamps the type's version only when it sends properties.
 */
export function nextValues(
  current: ItemRow, sent: SentFields, { properties, schema_version }: Required<Pick<ItemChanges, 'properties' | 'schema_version'>>,
): ItemChanges {
  return {
    properties,
    tags: sent.tags ?? current.tags,
    tier: sent.tier ?? current.tier,
    state: sent.state ?? current.state,
    timestamp: sent.timestamp ?? current.timestamp,
    device: given(sent.device, current.device),
    capture_latitude: given(sent.capture_latitude, current.capture_latitude),
    capture_longitude: given(sent.capture_longitude, current.capture_longitude),
    extensions: mergeExtensions(current.extensions, sent.extensions),
    schema_version,
  };
}

/** Shallow merge of properties: a key set to null is removed. */
export function mergeProperties(current: Record<string, unknown>, patch: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!patch) return current;
  const out = { ...current };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out;
}

const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value));

/**
 * 400 `validation_error` when a change would take an item's properties and extensions past
 * `maxBytes` of JSON (JSON_BODY_LIMIT: an item holds at most what one request can carry).
 * Shallow merges otherwise grew one item by a body at a time, without end, each version,
 * revision, event and page of it too. An item already past the mark (a lower limit since) may
 * still change as long as it does not grow.
 */
export function tooLarge(current: Pick<ItemRow, 'properties' | 'extensions'>, next: Partial<Pick<ItemRow, 'properties' | 'extensions'>>, maxBytes: number): ApiError | undefined {
  const properties = next.properties ?? current.properties;
  const extensions = next.extensions ?? current.extensions;
  if (properties === current.properties && extensions === current.extensions) return undefined;
  const propertiesAfter = jsonBytes(properties);
  const after = propertiesAfter + jsonBytes(extensions);
  if (after <= maxBytes) return undefined;
  const propertiesBefore = jsonBytes(current.properties);
  if (after <= propertiesBefore + jsonBytes(current.extensions)) return undefined;
  const field = propertiesAfter > propertiesBefore ? 'properties' : 'extensions';
  return validationError([{ field, message: `an item holds at most ${maxBytes} bytes of properties and extensions (as JSON); this change would make ${after}` }]);
}

/** Tags after adding (at the end, once) and then removing. */
export function changeTags(tags: string[], add: string[] = [], remove: string[] = []): string[] {
  const out = [...tags];
  for (const t of add) if (!out.includes(t)) out.push(t);
  return remove.length ? out.filter((t) => !remove.includes(t)) : out;
}

/** 400 `validation_error` on `field` when added tags would take an item past MAX_TAGS. */
export function tooManyTags(before: string[], after: string[], field = 'add_tags'): ApiError | undefined {
  if (after.length <= MAX_TAGS || after.length <= before.length) return undefined;
  return validationError([{ field, message: `an item carries at most ${MAX_TAGS} tags; this would make ${after.length}` }]);
}

/**
 * Why `properties` do not fit the type's schema: 400 `missing_required_field` when a required
 * one is missing (SPEC 7), else `invalid_properties`, either naming every problem found, or
 * `invalid_schema` when the type's schema cannot check them (a per-item outcome in bulk
 * writes, like the others); undefined when they fit.
 */
export async function propertiesError(type: ResolvedType, properties: Record<string, unknown>): Promise<ApiError | undefined> {
  let errors: ErrorObject[];
  try {
    errors = await type.validate(properties);
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  if (!errors.length) return undefined;
  const issues = propertyIssues(errors);
  const { missing, invalid } = issues;
  const fields = propertyFieldIssues(issues);
  if (missing.length) {
    const others = invalid.length ? ` (and ${invalid.length} other problem${invalid.length > 1 ? 's' : ''} in details.fields)` : '';
    return ApiError.badRequest('missing_required_field', `Missing required properties: ${missing.join(', ')}${others}`, { fields });
  }
  return ApiError.badRequest('invalid_properties', `The properties do not match type ${type.name}`, { fields });
}

/** The 403 for an item whose type the credential may not write: a single write's, and a bulk item's error alike. */
export function typeNotPermitted(type: string): ApiError {
  return new ApiError(403, 'type_not_permitted', `This credential may not write items of type ${type}`, { type });
}
