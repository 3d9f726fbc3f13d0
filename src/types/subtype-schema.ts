/**
 * Subtypes: the schema a subtype's items are validated against is its own merged onto its
 * parent's (adding is allowed, dropping or contradicting is not: 400 inheritance_violation), and
 * the parent's whole schema keeps applying beside it, so a subtype only narrows. Also the
 * comparisons of JSON Schema types and listed values that schema-widening.ts shares.
 */
import { isDeepStrictEqual } from 'node:util';
import { ApiError } from '../common/api-error';
import { eachSchema, refPointer } from './schema-walk';
import type { JsonSchema } from './type-schema';

function typesOf(prop: JsonSchema | boolean): string[] | undefined {
  if (typeof prop === 'boolean' || prop.type === undefined) return undefined;
  return Array.isArray(prop.type) ? prop.type : [prop.type];
}

/** Whether JSON Schema type `t` stays within `types`: an `integer` is a `number`. */
export const within = (t: string, types: string[]): boolean => types.includes(t) || (t === 'integer' && types.includes('number'));

/** The JSON Schema type of a JSON value (`integer` for a whole number). */
export function typeOfValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** The values a schema lists (`const`, else `enum`): all a value may be; undefined when it lists none. */
export function listedValues(s: JsonSchema): unknown[] | undefined {
  if (Object.hasOwn(s, 'const')) return [s.const];
  return Array.isArray(s.enum) ? s.enum : undefined;
}

/**
 * How a subtype's `properties` contradict its parent's, at any depth through nested
 * `properties` and array `items`: a type outside the parent's, listed values (`enum`, `const`)
 * outside the parent's type or its listed values (compared as JSON, objects and arrays
 * included), or `false` for a property the parent requires. Leaving `type` or `enum` out is no
 * contradiction: the merge keeps the parent's. Such a subtype would only be unsatisfiable (its
 * items must meet the parent's rules too, `parentRules`), so it is refused while it is written.
 */
function propertyConflicts(base: JsonSchema, child: JsonSchema, prefix: string, out: Array<{ field: string; message: string }>): void {
  const baseProps: Record<string, JsonSchema | boolean> = isSchemaObject(base.properties) ? base.properties : {};
  const childProps: Record<string, JsonSchema | boolean> = isSchemaObject(child.properties) ? child.properties : {};
  const required: unknown[] = Array.isArray(base.required) ? base.required : [];
  for (const [name, prop] of Object.entries(childProps)) {
    const field = prefix + name;
    if (prop === false && required.includes(name)) out.push({ field, message: 'is required by the parent, so it cannot be forbidden' });
    const baseProp = Object.hasOwn(baseProps, name) ? baseProps[name] : undefined;
    if (isSchemaObject(baseProp) && isSchemaObject(prop)) schemaConflicts(baseProp, prop, field, out);
  }
}

/** How one schema of a subtype (`child`, at `field`) contradicts the parent's at the same place. */
function schemaConflicts(base: JsonSchema, child: JsonSchema, field: string, out: Array<{ field: string; message: string }>): void {
  const baseTypes = typesOf(base);
  const childTypes = typesOf(child);
  if (baseTypes && childTypes && !childTypes.every((t) => within(t, baseTypes))) {
    out.push({ field, message: `must keep the parent's type ${JSON.stringify(base.type)}` });
  }
  const allowed = listedValues(base);
  const values = listedValues(child);
  if (values && baseTypes && !values.every((v) => within(typeOfValue(v), baseTypes))) {
    out.push({ field, message: `enum and const values must be of the parent's type ${JSON.stringify(base.type)}` });
  }
  if (values && allowed && !values.every((v) => allowed.some((a) => isDeepStrictEqual(a, v)))) {
    out.push({ field, message: "enum must be a subset of the parent's enum (and a const one of its values)" });
  }
  propertyConflicts(base, child, `${field}.`, out);
  // An array's elements (a schema, not a tuple's list of them), named `field[]`.
  if (isSchemaObject(base.items) && isSchemaObject(child.items)) schemaConflicts(base.items, child.items, `${field}[]`, out);
}

/**
 * A property as a subtype sees it. `true` says nothing, so adds nothing; `false` forbids the
 * property, which narrows whatever the other side allows.
 */
function mergeProperty(base: JsonSchema | boolean, prop: JsonSchema | boolean): JsonSchema | boolean {
  if (prop === true) return base;
  if (base === true) return prop;
  if (prop === false || base === false) return false;
  return { ...base, ...prop };
}

/**
 * A copy of `schema` to be placed at `at` (a JSON pointer) inside another schema: its local
 * `$ref`s meant its own root, so they are made to point into the copy.
 */
function placedAt(schema: JsonSchema, at: string): JsonSchema {
  // Through JSON: a resolved schema shares objects between its root and allOf/0 until stored.
  const copy: JsonSchema = JSON.parse(JSON.stringify(schema));
  eachSchema(copy, (s) => {
    if (typeof s === 'object' && refPointer(s.$ref) !== undefined) s.$ref = `#${at}${s.$ref.slice(1)}`;
  });
  return copy;
}

/**
 * The schema a subtype's items are validated against: the parent's properties and required
 * list, plus the child's additions. A child may narrow a parent property (add a format, a
 * pattern, an enum subset) but not change its type or widen its enum: 400 inheritance_violation.
 */
export function resolveSubtypeSchema(parent: JsonSchema, child: JsonSchema): JsonSchema {
  const own: Array<JsonSchema | boolean> = Array.isArray(child.allOf) ? child.allOf : [];
  // After the subtype's own entries, whose `#/allOf/…` pointers thus keep their meaning.
  const base = parentRules(parent, `/allOf/${own.length}`);
  const violations: Array<{ field: string; message: string }> = [];
  const parentProps: Record<string, JsonSchema | boolean> = base.properties ?? {};
  const childProps: Record<string, JsonSchema | boolean> = child.properties ?? {};
  const merged: Record<string, JsonSchema | boolean> = { ...parentProps };
  propertyConflicts(base, child, '', violations);
  for (const [name, prop] of Object.entries(childProps)) {
    const baseProp = parentProps[name];
    merged[name] = baseProp === undefined ? prop : mergeProperty(baseProp, prop);
  }
  if (base.additionalProperties === false && (Object.keys(childProps).some((n) => parentProps[n] === undefined) || (child.additionalProperties ?? false) !== false)) {
    violations.push({ field: '*', message: 'the parent allows no additional properties, so a subtype cannot add any' });
  }
  if (violations.length) {
    throw ApiError.badRequest('inheritance_violation', 'The subtype contradicts its parent type', { fields: violations });
  }
  const required = [...new Set([...(base.required ?? []), ...(child.required ?? [])])];
  const additionalProperties = child.additionalProperties ?? base.additionalProperties;
  // Both sides' definitions, for the child's references; the parent's own point into its copy.
  const definitions = (key: string) => (base[key] !== undefined || child[key] !== undefined ? { [key]: { ...base[key], ...child[key] } } : {});
  return keepUnsearchable(base, {
    ...base,
    ...child,
    type: 'object',
    properties: merged,
    ...(required.length ? { required } : {}),
    ...(additionalProperties !== undefined ? { additionalProperties } : {}),
    ...definitions('definitions'),
    ...definitions('$defs'),
    allOf: [...own, base],
  }) as JsonSchema;
}

const isSchemaObject = (s: unknown): s is JsonSchema => s !== null && typeof s === 'object' && !Array.isArray(s);

/**
 * `merged` with each `"searchable": false` of `base` kept where search would read it. Search
 * walks the resolved schema's `properties`, `additionalProperties` and `items` alone (not
 * `allOf`, where the parent's rules are kept whole), and the merge above is one level deep: a
 * subtype's `"searchable": true`, or its own nested `properties` or `additionalProperties`,
 * would put text the parent keeps out of search back in. So would a property the subtype adds
 * where the parent's `additionalProperties` kept every other key out: search read that schema
 * for the key under the parent, and keeps reading its `"searchable": false` there. Where
 * `merged` lacks the place, it gets one that validates as what stood there before (`{}`, or the
 * `additionalProperties` schema the value would have met); where `merged` forbids the value
 * (`false`), there is nothing to keep.
 */
function keepUnsearchable(base: JsonSchema | boolean, merged: JsonSchema | boolean): JsonSchema | boolean {
  if (merged === true) {
    // `true` says what `{}` says, and search reads no "searchable" in it.
    const empty = {};
    const kept = keepUnsearchable(base, empty);
    return kept === empty ? merged : kept;
  }
  if (!isSchemaObject(base) || !isSchemaObject(merged)) return merged;
  if (base.searchable === false) return merged.searchable === false ? merged : { ...merged, searchable: false };
  let out = merged;
  const put = (key: string, value: unknown) => {
    if (out === merged) out = { ...merged };
    out[key] = value;
  };
  const baseProps: Record<string, JsonSchema | boolean> = isSchemaObject(base.properties) ? base.properties : {};
  const props: Record<string, JsonSchema | boolean> = isSchemaObject(merged.properties) ? merged.properties : {};
  const instead = merged.additionalProperties === undefined || merged.additionalProperties === true ? {} : merged.additionalProperties;
  let kept = props;
  for (const name of new Set([...Object.keys(baseProps), ...Object.keys(props)])) {
    // What search read for the key under `base`: its property, or else its additionalProperties.
    const was = Object.hasOwn(baseProps, name) ? baseProps[name] : base.additionalProperties;
    const there = Object.hasOwn(props, name) ? props[name] : isSchemaObject(instead) ? instead : undefined;
    if (there === undefined) continue;
    const next = keepUnsearchable(was, there);
    if (next !== there) kept = { ...kept, [name]: next };
  }
  if (kept !== props) put('properties', kept);
  for (const key of ['additionalProperties', 'items']) {
    if (!isSchemaObject(base[key])) continue;
    const there = merged[key] === undefined || merged[key] === true ? {} : merged[key];
    if (!isSchemaObject(there)) continue;
    const next = keepUnsearchable(base[key], there);
    if (next !== there) put(key, next);
  }
  return out;
}

/**
 * The parent's whole resolved schema, which a subtype's items must also satisfy, as it sits in
 * the subtype's `allOf` (at pointer `at`): the merge above lets a subtype's keyword replace its
 * parent's (`maxLength`, `pattern`, `minimum`, …), and without this a subtype could loosen what
 * `parent.*` promises of every item it matches. With it, a subtype's keywords can only narrow.
 * The parent's `$ref`s are made to point into that copy, and so do those of the parent's parts
 * merged into the subtype's root: a subtype redefining `$defs/code` must not change what the
 * parent's `#/$defs/code` means. `$id` and `$schema` (older types may carry them) stay out.
 */
function parentRules(parent: JsonSchema, at: string): JsonSchema {
  const { $id, $schema, ...rules } = parent; // eslint-disable-line @typescript-eslint/no-unused-vars
  return placedAt(rules, at);
}
