/**
 * The shape of a JSON Schema, as the rules about schemas walk it: which keywords hold
 * subschemas and where each applies, the JSON pointer of each, the local `$ref`s that name them,
 * and the regular expressions a schema node carries.
 */
import type { JsonSchema } from './type-schema';

/**
 * Where a subschema applies, relative to the value its parent schema applies to: to that value
 * itself, to one property value (`properties` and `additionalProperties`: one of them per
 * key), to every property value, to the keys, to one array element (by position), to every
 * element; or nowhere until a `$ref` names it.
 */
export type Slot = 'same' | 'oneKey' | 'everyKey' | 'keyName' | 'oneIndex' | 'everyIndex' | 'definition';

/** The keywords that hold subschemas (draft-07's, and later drafts' that a `$ref` could reach). */
const SUBSCHEMAS: Record<string, { form: 'one' | 'list' | 'map'; slot: Slot }> = {
  allOf: { form: 'list', slot: 'same' },
  anyOf: { form: 'list', slot: 'same' },
  oneOf: { form: 'list', slot: 'same' },
  not: { form: 'one', slot: 'same' },
  if: { form: 'one', slot: 'same' },
  then: { form: 'one', slot: 'same' },
  else: { form: 'one', slot: 'same' },
  dependencies: { form: 'map', slot: 'same' },
  dependentSchemas: { form: 'map', slot: 'same' },
  properties: { form: 'map', slot: 'oneKey' },
  additionalProperties: { form: 'one', slot: 'oneKey' },
  patternProperties: { form: 'map', slot: 'everyKey' },
  unevaluatedProperties: { form: 'one', slot: 'everyKey' },
  propertyNames: { form: 'one', slot: 'keyName' },
  prefixItems: { form: 'list', slot: 'oneIndex' },
  additionalItems: { form: 'one', slot: 'oneIndex' },
  items: { form: 'one', slot: 'everyIndex' }, // or a list, by position (below)
  contains: { form: 'one', slot: 'everyIndex' },
  unevaluatedItems: { form: 'one', slot: 'everyIndex' },
  definitions: { form: 'map', slot: 'definition' },
  $defs: { form: 'map', slot: 'definition' },
};

interface Subschema {
  path: string[];
  slot: Slot;
  schema: JsonSchema | boolean;
}

const isSchema = (v: unknown): v is JsonSchema | boolean => typeof v === 'boolean' || (v !== null && typeof v === 'object' && !Array.isArray(v));

/** The direct subschemas of `schema`, keyword-aware: a property named `$id` is no keyword. */
export function subschemas(schema: JsonSchema | boolean): Subschema[] {
  if (typeof schema === 'boolean') return [];
  const out: Subschema[] = [];
  for (const [keyword, { form, slot }] of Object.entries(SUBSCHEMAS)) {
    const value = schema[keyword];
    if (keyword === 'items' && Array.isArray(value)) {
      value.forEach((s, i) => isSchema(s) && out.push({ path: [keyword, String(i)], slot: 'oneIndex', schema: s }));
    } else if (form === 'one') {
      if (isSchema(value)) out.push({ path: [keyword], slot, schema: value });
    } else if (form === 'list') {
      if (Array.isArray(value)) value.forEach((s, i) => isSchema(s) && out.push({ path: [keyword, String(i)], slot, schema: s }));
    } else if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [name, s] of Object.entries(value)) if (isSchema(s)) out.push({ path: [keyword, name], slot, schema: s });
    }
  }
  return out;
}

export const pointerOf = (path: string[]) => path.map((p) => `/${p.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');

/** Calls `visit` on `schema` and every subschema in it, with its JSON pointer from `schema`. */
export function eachSchema(schema: JsonSchema | boolean, visit: (s: JsonSchema | boolean, pointer: string) => void, pointer = ''): void {
  visit(schema, pointer);
  for (const sub of subschemas(schema)) eachSchema(sub.schema, visit, pointer + pointerOf(sub.path));
}

/** The JSON pointer a local `$ref` (`#` or `#/…`, URI-escaped) names; undefined for any other. */
export function refPointer(ref: unknown): string | undefined {
  if (ref === '#') return '';
  if (typeof ref !== 'string' || !ref.startsWith('#/')) return undefined;
  try {
    return pointerOf(ref.slice(2).split('/').map((p) => decodeURIComponent(p).replace(/~1/g, '/').replace(/~0/g, '~')));
  } catch {
    return undefined;
  }
}

/** A schema node's own regular expressions (`pattern`, `patternProperties` keys), each with the pointer it stands at. */
export function ownRegexes(s: JsonSchema, at: string): Array<[source: string, pointer: string]> {
  const found: Array<[string, string]> = [];
  if (typeof s.pattern === 'string') found.push([s.pattern, `${at}/pattern`]);
  if (s.patternProperties && typeof s.patternProperties === 'object') {
    for (const source of Object.keys(s.patternProperties)) found.push([source, `${at}/patternProperties`]);
  }
  return found;
}
