/**
 * What full-text search reads of a type's resolved schema: `"searchable": false` at the places
 * item_search_strings (migration 1732300000500) walks, and nothing else. Two schemas with the
 * same view index every item alike, so a type change between them needs no reindex of its items
 * (migration 1732300005800).
 */
import { isDeepStrictEqual } from 'node:util';
import type { JsonSchema } from './type-schema';

/** A place where every string is indexed ('all'), none is ('none'), or it depends on the key or position. */
type View = 'all' | 'none' | { properties: Record<string, View>; additional: View; items: View };

const isObject = (v: unknown): v is JsonSchema => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The view of the schema a value meets (undefined: none). As item_search_strings does: a key
 * takes its `properties` entry when there is one (any JSON, so `true` or `null` index all), else
 * an object `additionalProperties`; an element takes an object `items`; anything that is not an
 * object indexes all below it; `"searchable": false` none (not at the root, which it never reads).
 */
function viewOf(s: unknown, root = false): View {
  if (!isObject(s)) return 'all';
  if (!root && s.searchable === false) return 'none';
  const additional = viewOf(isObject(s.additionalProperties) ? s.additionalProperties : undefined);
  const items = viewOf(isObject(s.items) ? s.items : undefined);
  const properties: Record<string, View> = {};
  if (isObject(s.properties)) {
    for (const [name, sub] of Object.entries(s.properties)) {
      const v = viewOf(sub);
      // A key whose entry reads as additionalProperties does is indexed alike without it.
      if (!isDeepStrictEqual(v, additional)) properties[name] = v;
    }
  }
  if (!Object.keys(properties).length && additional === 'all' && items === 'all') return 'all';
  return { properties, additional, items };
}

/** Whether search indexes every item alike under either resolved schema. */
export function sameSearchView(a: JsonSchema, b: JsonSchema): boolean {
  return isDeepStrictEqual(viewOf(a, true), viewOf(b, true));
}
