/**
 * Whether one JSON Schema provably accepts everything another accepts (a *widening*): what lets
 * PATCH /types/{name} change the schema of a type that has items without reading them
 * (schema-change-check.ts). Structural and conservative: it answers true only where the subset of
 * JSON Schema a type may use (type-schema.ts) makes the proof plain, and false ("not proven",
 * not "narrowing") for everything else, which the caller then settles by checking the items.
 */
import { isDeepStrictEqual } from 'node:util';
import type { JsonSchema } from './type-schema';
import { listedValues, typeOfValue, within } from './subtype-schema';

type Schema = JsonSchema | boolean;

/**
 * Keywords that never refuse a value (annotations, and `definitions`, which apply only through
 * a `$ref`, checked on its own below). `searchable` is ours: it steers search, not validation.
 */
const ANNOTATIONS = new Set([
  'title', 'description', 'default', 'examples', '$comment', 'searchable', 'readOnly', 'writeOnly', 'deprecated',
  '$schema', 'definitions', '$defs', 'contentMediaType', 'contentEncoding',
]);

/** Keywords widening() reasons about one by one; any other a new schema carries must stand unchanged in the old one. */
const LOWER_BOUNDS = ['minLength', 'minItems', 'minProperties'] as const;
const UPPER_BOUNDS = ['maxLength', 'maxItems', 'maxProperties'] as const;

const isObject = (v: unknown): v is JsonSchema => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The schema without annotations, so that `{}` and `{"description": "…"}` compare alike. */
function rules(s: Schema): Schema {
  if (typeof s === 'boolean') return s;
  return Object.fromEntries(Object.entries(s).filter(([k]) => !ANNOTATIONS.has(k)));
}

/** Whether `s` accepts every value. */
function acceptsAll(s: Schema): boolean {
  const r = rules(s);
  return r === true || (isObject(r) && Object.keys(r).length === 0);
}

const sameRules = (a: unknown, b: unknown): boolean =>
  isDeepStrictEqual(isObject(a) || typeof a === 'boolean' ? rules(a) : a, isObject(b) || typeof b === 'boolean' ? rules(b) : b);

const typesOf = (s: JsonSchema): string[] | undefined => (s.type === undefined ? undefined : Array.isArray(s.type) ? s.type : [s.type]);

const num = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/**
 * Whether every value `oldSchema` accepts, `newSchema` accepts too. Both are whole schemas (a
 * type's resolved schema): their `$ref`s point into themselves. `absent` names top-level keys
 * known to be missing from every value that matters (no item holds them): a property the new
 * schema adds under such a name constrains nothing that exists, whatever the old schema let
 * the key hold.
 */
export function isWidening(oldSchema: Schema, newSchema: Schema, absent: ReadonlySet<string> = NONE): boolean {
  if (!refsAgree(oldSchema, newSchema)) return false;
  return widens(oldSchema, newSchema, absent);
}

/**
 * The top-level properties `newSchema` names that `oldSchema` does not (in its root or the root's
 * allOf branches, where a subtype's resolved schema keeps its parent's): the names for which
 * isWidening's `absent` can make the difference.
 */
export function addedProperties(oldSchema: Schema, newSchema: Schema): string[] {
  const names = (s: Schema, out = new Set<string>()): Set<string> => {
    if (!isObject(s)) return out;
    for (const name of Object.keys(propsOf(s))) out.add(name);
    if (Array.isArray(s.allOf)) s.allOf.forEach((branch: Schema) => names(branch, out));
    return out;
  };
  const before = names(oldSchema);
  return [...names(newSchema)].filter((name) => !before.has(name));
}

const NONE: ReadonlySet<string> = new Set();

/**
 * A `$ref` means the same on both sides when the schema it names is the same on both sides: then
 * a node of the new schema may keep a `$ref` its old counterpart has. Every `$ref` of the new
 * schema is checked, so those inside a named schema are too.
 */
function refsAgree(oldRoot: Schema, newRoot: Schema): boolean {
  const refs: string[] = [];
  collectRefs(newRoot, refs);
  return refs.every((ref) => {
    const pointer = localPointer(ref);
    if (pointer === undefined) return false;
    const before = resolvePointer(oldRoot, pointer);
    const after = resolvePointer(newRoot, pointer);
    return before !== undefined && after !== undefined && isDeepStrictEqual(before, after);
  });
}

function collectRefs(v: unknown, out: string[]): void {
  if (Array.isArray(v)) v.forEach((x) => collectRefs(x, out));
  else if (isObject(v)) {
    if (typeof v.$ref === 'string') out.push(v.$ref);
    else if (v.$ref !== undefined) out.push('');
    // Under `properties` and the like a key named `$ref` is a property's name, and counted too: over-cautious, never wrong.
    for (const x of Object.values(v)) collectRefs(x, out);
  }
}

function localPointer(ref: string): string[] | undefined {
  if (ref === '#') return [];
  if (!ref.startsWith('#/')) return undefined;
  try {
    return ref.slice(2).split('/').map((p) => decodeURIComponent(p).replace(/~1/g, '/').replace(/~0/g, '~'));
  } catch {
    return undefined;
  }
}

function resolvePointer(root: unknown, path: string[]): unknown {
  let at = root;
  for (const part of path) {
    if (Array.isArray(at)) at = at[Number(part)];
    else if (isObject(at) && Object.hasOwn(at, part)) at = at[part];
    else return undefined;
  }
  return at;
}

/**
 * The core of isWidening, once `$ref`s are known to mean the same on both sides. `absent` holds
 * for the value the two schemas apply to (the root, and the branches applying to it alike).
 */
function widens(o: Schema, n: Schema, absent: ReadonlySet<string> = NONE): boolean {
  if (acceptsAll(n) || o === false) return true;
  if (n === false || typeof o === 'boolean') return false; // `o` accepts everything, `n` does not
  if (sameRules(o, n)) return true;
  const nn = n as JsonSchema;
  for (const keyword of Object.keys(nn)) {
    if (ANNOTATIONS.has(keyword) || HANDLED.has(keyword)) continue;
    // Keywords with no rule below: kept exactly, or not proven.
    if (!isDeepStrictEqual(o[keyword], nn[keyword])) return false;
  }
  return KEYWORD_RULES.every((rule) => rule(o, nn, absent));
}

type Rule = (o: JsonSchema, n: JsonSchema, absent: ReadonlySet<string>) => boolean;

const KEYWORD_RULES: Rule[] = [
  // type: the old types (or, with none, the old listed values) all within the new ones.
  (o, n) => {
    const to = typesOf(n);
    if (!to) return true;
    const from = typesOf(o);
    if (from) return from.every((t) => typeof t === 'string' && within(t, to));
    const values = listedValues(o);
    return values !== undefined && values.every((v) => within(typeOfValue(v), to));
  },
  // enum / const: the old listed values a subset of the new.
  (o, n) => {
    const allowed = listedValues(n);
    if (!allowed) return true;
    const values = listedValues(o);
    return values !== undefined && values.every((v) => allowed.some((a) => isDeepStrictEqual(a, v)));
  },
  (o, n) => lowerBound(o, n, 'minimum', 'exclusiveMinimum'),
  (o, n) => upperBound(o, n, 'maximum', 'exclusiveMaximum'),
  (o, n) => LOWER_BOUNDS.every((k) => n[k] === undefined || (num(o[k]) && num(n[k]) && o[k] >= n[k])),
  (o, n) => UPPER_BOUNDS.every((k) => n[k] === undefined || (num(o[k]) && num(n[k]) && o[k] <= n[k])),
  (o, n) => n.multipleOf === undefined || o.multipleOf === n.multipleOf || (Number.isInteger(o.multipleOf) && Number.isInteger(n.multipleOf) && o.multipleOf % n.multipleOf === 0),
  (o, n) => ['pattern', 'format'].every((k) => n[k] === undefined || o[k] === n[k]),
  (o, n) => n.uniqueItems !== true || o.uniqueItems === true,
  (o, n) => {
    if (n.required === undefined) return true;
    const had: unknown[] = Array.isArray(o.required) ? o.required : [];
    return Array.isArray(n.required) && n.required.every((name: unknown) => had.includes(name));
  },
  objectKeywords,
  arrayKeywords,
  // allOf: each new branch implied by the old branch at its place (each old one holds).
  (o, n, absent) => {
    if (n.allOf === undefined) return true;
    if (!Array.isArray(n.allOf) || !Array.isArray(o.allOf)) return false;
    return n.allOf.every((branch: Schema, i: number) => i < o.allOf.length && widens(o.allOf[i], branch, absent));
  },
  // anyOf: each old branch within some new one (the value met one of the old).
  (o, n, absent) => {
    if (n.anyOf === undefined) return true;
    if (!Array.isArray(n.anyOf) || !Array.isArray(o.anyOf)) return false;
    return o.anyOf.every((was: Schema) => n.anyOf.some((branch: Schema) => widens(was, branch, absent)));
  },
  // Keywords whose branches constrain one another: only unchanged.
  (o, n) => ['oneOf', 'not', 'if', 'then', 'else', 'propertyNames', 'dependencies', 'dependentRequired', 'dependentSchemas', 'contains', '$ref'].every(
    (k) => n[k] === undefined || sameRules(o[k], n[k]),
  ),
];

/** Every keyword a rule above decides. */
const HANDLED = new Set([
  'type', 'enum', 'const', 'minimum', 'exclusiveMinimum', 'maximum', 'exclusiveMaximum', ...LOWER_BOUNDS, ...UPPER_BOUNDS, 'multipleOf',
  'pattern', 'format', 'uniqueItems', 'required', 'properties', 'additionalProperties', 'patternProperties', 'items', 'additionalItems',
  'allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else', 'propertyNames', 'dependencies', 'dependentRequired', 'dependentSchemas', 'contains', '$ref',
]);

/** A draft-07 lower bound: the new one (inclusive or exclusive) no higher than the old one. */
function lowerBound(o: JsonSchema, n: JsonSchema, inclusive: string, exclusive: string): boolean {
  const oldIncl = num(o[inclusive]) ? o[inclusive] : undefined;
  const oldExcl = num(o[exclusive]) ? o[exclusive] : undefined;
  const holds = (bound: number, strict: boolean) =>
    (oldIncl !== undefined && (strict ? oldIncl > bound : oldIncl >= bound)) || (oldExcl !== undefined && oldExcl >= bound);
  if (n[inclusive] !== undefined && !(num(n[inclusive]) && holds(n[inclusive], false))) return false;
  if (n[exclusive] !== undefined && !(num(n[exclusive]) && holds(n[exclusive], true))) return false;
  return true;
}

/** A draft-07 upper bound: the new one no lower than the old one. */
function upperBound(o: JsonSchema, n: JsonSchema, inclusive: string, exclusive: string): boolean {
  const oldIncl = num(o[inclusive]) ? o[inclusive] : undefined;
  const oldExcl = num(o[exclusive]) ? o[exclusive] : undefined;
  const holds = (bound: number, strict: boolean) =>
    (oldIncl !== undefined && (strict ? oldIncl < bound : oldIncl <= bound)) || (oldExcl !== undefined && oldExcl <= bound);
  if (n[inclusive] !== undefined && !(num(n[inclusive]) && holds(n[inclusive], false))) return false;
  if (n[exclusive] !== undefined && !(num(n[exclusive]) && holds(n[exclusive], true))) return false;
  return true;
}

const propsOf = (s: JsonSchema): Record<string, Schema> => (isObject(s.properties) ? s.properties : {});
const patternsOf = (s: JsonSchema): Record<string, Schema> => (isObject(s.patternProperties) ? s.patternProperties : {});
const additionalOf = (s: JsonSchema): Schema => (s.additionalProperties === undefined ? true : s.additionalProperties);

/**
 * `properties`, `additionalProperties` and `patternProperties` together: which of them applies to
 * a key depends on the others. With the same `patternProperties` on both sides (any change to
 * them is not proven), a key matching a pattern meets that same schema on both sides, so what
 * remains is each key's own schema: the new one must accept what the old one did.
 */
function objectKeywords(o: JsonSchema, n: JsonSchema, absent: ReadonlySet<string>): boolean {
  if (n.properties === undefined && n.additionalProperties === undefined && n.patternProperties === undefined) return true;
  if (n.properties !== undefined && !isObject(n.properties)) return false;
  if (n.patternProperties !== undefined || o.patternProperties !== undefined) {
    if (!sameRules(patternsOf(o), patternsOf(n))) return false;
  }
  const hasPatterns = Object.keys(patternsOf(o)).length > 0;
  const oldProps = propsOf(o);
  const newProps = propsOf(n);
  const oldAdditional = additionalOf(o);
  const newAdditional = additionalOf(n);
  for (const [name, schema] of Object.entries(newProps)) {
    if (Object.hasOwn(oldProps, name)) {
      if (!widens(oldProps[name], schema)) return false;
    } else if (absent.has(name)) {
      // No value holds the key: whatever the old schema allowed there was never used.
    } else if (hasPatterns) {
      // Under the old schema a key matching a pattern met that pattern's schema alone.
      if (!acceptsAll(schema)) return false;
    } else if (!widens(oldAdditional, schema)) return false;
  }
  // A property the new schema no longer names meets its additionalProperties (unless a pattern, the same as before, applies).
  for (const [name, schema] of Object.entries(oldProps)) {
    if (!Object.hasOwn(newProps, name) && !widens(schema, newAdditional)) return false;
  }
  return widens(oldAdditional, newAdditional);
}

/** `items` as one schema for every element; a list of them (a tuple) and `additionalItems` only unchanged. */
function arrayKeywords(o: JsonSchema, n: JsonSchema): boolean {
  if (n.items === undefined && n.additionalItems === undefined) return true;
  if (Array.isArray(n.items) || Array.isArray(o.items)) return sameRules(o.items, n.items) && sameRules(o.additionalItems, n.additionalItems);
  if (n.additionalItems !== undefined && !sameRules(o.additionalItems, n.additionalItems)) return false;
  if (n.items === undefined) return true;
  return widens(o.items === undefined ? true : o.items, n.items);
}
