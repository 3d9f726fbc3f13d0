/**
 * JSON Schema rules for item types: checking a submitted schema, merging a subtype's schema onto
 * its parent's (adding is allowed, dropping or contradicting is not, and the parent's rules keep
 * applying: a subtype only narrows), the limits that keep one tenant's schema from stalling or
 * breaking validation for everyone, and the validators item properties are checked with.
 */
import Ajv, { ErrorObject, Options, ValidateFunction } from 'ajv';
import { isDeepStrictEqual } from 'node:util';
import { ApiError } from '../common/api-error';
import { WeighedMap } from '../common/weighed-map';
import { addSafeFormats } from './formats';
import { cannotCheck, patternChecker } from './pattern-check';
import { regexCost, RegexEngine } from './regex-engine';

export type JsonSchema = Record<string, any>;
export const MERGE_POLICIES = ['manual', 'client_wins', 'server_wins', 'union'] as const;
export type MergePolicy = (typeof MERGE_POLICIES)[number];

/**
 * What a type's schema may carry (README "Types" and docs/api-reference.md list them). Each
 * bounds a cost that validation pays on every item write, in the one process all tenants share.
 */
export const SCHEMA_LIMITS = {
  /** JSON size of a schema as submitted. */
  schemaBytes: 64 * 1024,
  /**
   * JSON size of a resolved schema, its ancestors' rules merged in (they grow with depth): ajv
   * takes about half a second to compile 128 KiB (an 830 KB one took 6 s, at the first write).
   */
  resolvedBytes: 128 * 1024,
  /** Types in a chain of parents: a type and at most 15 ancestors. */
  typeDepth: 16,
  /** ajv checks an enum value by value: 1,000 values over a 1 MB array took 1-3 s. */
  enumValues: 256,
  /** Distinct regular expressions (`pattern`s, `patternProperties` keys) of a resolved schema. */
  regexes: 64,
  regexLength: 512,
  /** Sum of regexCost (regex-engine.ts) over those: about a quarter of a second to compile. */
  regexCost: 20_000,
  /**
   * Schemas that can apply to one value of the properties: every allOf/anyOf/oneOf/not/if
   * branch, `$ref` and inherited copy counts, at each level of nesting. References let a small
   * schema apply itself twice per level (2^30 times to one string in a 1 KB schema), or forever.
   */
  applications: 256,
  /**
   * Enum values (a `const` counts one) that one value of the properties can be compared with,
   * summed over the schemas that can apply to it: each is a comparison at every value, and the
   * two limits above multiply (127 `$ref`s to one 256-value enum held each element of an 80 KB
   * array 650 µs, 13 s in all). Four full enums' worth: about 3 µs a value, 1.5 s over 1 MB.
   */
  enumComparisons: 1024,
} as const;

/**
 * Properties holding more values than this get their first error only (the pass that finds it
 * stops there): listing every one, where many schemas apply to each element of a large array,
 * took gigabytes (an error per failed anyOf branch per element).
 */
const MAX_VALUES_LISTED = 1000;

/** How deep a request body nests at most (README "Input rules"), so how deep a schema applies. */
const MAX_NESTING = 64;

/** The dialects `$schema` may name: the one ajv here checks (once, any schema ajv had seen). */
const DRAFT_07 = new Set(['http://json-schema.org/draft-07/schema', 'http://json-schema.org/draft-07/schema#']);

function newAjv(options: Options): Ajv {
  // Not strict: tenant schemas may carry keywords ajv does not know (they are ignored), and
  // stored ones formats it does not know (unknownFormats refuses new ones); and no logger, so
  // ajv's warnings about them do not reach the console past LOG_LEVEL.
  // multipleOf within 1e-12 of a whole quotient: 0.07 / 0.01 is 7.000000000000001 in binary
  // floating point, and a money field of `multipleOf: 0.01` refused one amount in six.
  // Own properties only: otherwise `required: ["toString"]` held for every item, and an item
  // without a declared `constructor` property was refused for Object's function in its place.
  const ajv = new Ajv({ strict: false, logger: false, multipleOfPrecision: 12, ownProperties: true, ...options });
  // ajv-formats' formats, each linear in the value's length (formats.ts: not its own `url`).
  addSafeFormats(ajv);
  // Our own annotations inside a property schema.
  ajv.addKeyword({ keyword: 'searchable', schemaType: 'boolean' });
  return ajv;
}

/** Checks schemas against the draft-07 meta-schema; it never compiles, nor keeps, a tenant's schema. */
const meta = newAjv({ allErrors: true, addUsedSchema: false });

/** 400 invalid_schema listing `problems` (JSON pointers into the schema), first one in the message. */
function refuse(problems: Array<{ path: string; message: string }>): never {
  const [first] = problems;
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more in details.errors)` : '';
  throw ApiError.badRequest('invalid_schema', `schema ${first.path}: ${first.message}${more}`, { errors: problems });
}

/** The draft-07 meta-schema's complaints about `schema`, as refuse() lists them; empty when it conforms. */
function metaSchemaProblems(schema: JsonSchema): Array<{ path: string; message: string }> {
  if (meta.validateSchema(schema)) return [];
  return (meta.errors ?? []).map((e) => ({ path: e.instancePath || '/', message: e.message ?? 'is invalid' }));
}

/**
 * Checks that `schema`, as submitted, is a JSON Schema for an item's `properties` object.
 * `submitted` is false for a stored schema checked again (a PATCH of the merge policy alone):
 * rules newer than the type (where `searchable` may stand) do not apply to it.
 */
export function assertValidSchema(schema: unknown, submitted = true): asserts schema is JsonSchema {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) refuse([{ path: '/', message: 'must be a JSON Schema object' }]);
  const s = schema as JsonSchema;
  if (s.type !== undefined && s.type !== 'object') refuse([{ path: '/type', message: 'must be "object": it describes the properties object' }]);
  if (s.properties !== undefined && (typeof s.properties !== 'object' || Array.isArray(s.properties) || s.properties === null)) {
    refuse([{ path: '/properties', message: 'must be an object' }]);
  }
  const searchable = searchableProblems(s, submitted);
  if (searchable.length) refuse(searchable);
  const formats = submitted ? unknownFormats(s) : [];
  if (formats.length) refuse(formats);
  if (s.$schema !== undefined && !DRAFT_07.has(s.$schema)) {
    refuse([{ path: '/$schema', message: 'names a JSON Schema dialect this service does not know; omit it (draft-07 is assumed)' }]);
  }
  const bytes = Buffer.byteLength(JSON.stringify(s));
  if (bytes > SCHEMA_LIMITS.schemaBytes) refuse([{ path: '/', message: `is ${bytes} bytes of JSON; at most ${SCHEMA_LIMITS.schemaBytes}` }]);
  const problems = metaSchemaProblems(s);
  if (problems.length) refuse(problems);
}

/**
 * A `format` ajv here does not check: ajv passes every value under it (not strict, so stored
 * schemas keep compiling), which made a typo (`emial`) or a draft-07 format ajv-formats lacks
 * (`idn-email`, `iri`) a rule that never refused anything. Refused in a schema being written.
 */
function unknownFormats(schema: JsonSchema): Array<{ path: string; message: string }> {
  const problems: Array<{ path: string; message: string }> = [];
  eachSchema(schema, (s, at) => {
    if (typeof s === 'boolean' || typeof s.format !== 'string' || meta.formats[s.format]) return;
    problems.push({ path: `${at}/format`, message: `is not a format this service checks, so it would refuse nothing; one of ${Object.keys(meta.formats).join(', ')}` });
  });
  return problems;
}

/**
 * The schemas of `schema` where `"searchable"` is honoured: search (item_search_strings,
 * migration 1732300000500) walks an item's properties with its type's schema through
 * `properties`, an object `additionalProperties` and an object `items`, from the root's
 * `properties` and `additionalProperties` down, and looks at nothing else (`$ref`s and their
 * definitions, allOf/anyOf/oneOf, if/then/else, patternProperties, an array `items`, …).
 */
function searchablePlaces(schema: JsonSchema): Set<string> {
  const places = new Set<string>();
  const visit = (s: unknown, at: string, root: boolean) => {
    if (s === null || typeof s !== 'object' || Array.isArray(s)) return;
    if (!root) places.add(at);
    const { properties, additionalProperties, items } = s as JsonSchema;
    if (properties !== null && typeof properties === 'object' && !Array.isArray(properties)) {
      for (const [name, sub] of Object.entries(properties)) visit(sub, `${at}/properties${pointerOf([name])}`, false);
    }
    visit(additionalProperties, `${at}/additionalProperties`, false);
    if (!root) visit(items, `${at}/items`, false);
  };
  visit(schema, '', true);
  return places;
}

/**
 * `"searchable"` where it means something and is a boolean. Elsewhere it would promise what
 * search does not keep (the value would be found and shown in snippets): refused in a schema
 * being written, left alone in a stored one.
 */
function searchableProblems(schema: JsonSchema, submitted: boolean): Array<{ path: string; message: string }> {
  const places = searchablePlaces(schema);
  const problems: Array<{ path: string; message: string }> = [];
  eachSchema(schema, (s, at) => {
    if (typeof s === 'boolean' || !('searchable' in s)) return;
    if (!places.has(at)) {
      if (submitted) {
        problems.push({
          path: `${at}/searchable`,
          message:
            'has no effect here: search honours it only on a property\'s schema, reached from the root through "properties", "additionalProperties" and single-schema "items", ' +
            'not through "$ref", "definitions", "allOf"/"anyOf"/"oneOf", "if"/"then"/"else", "patternProperties", array "items" or the like; put it on the property itself',
        });
      }
    } else if (typeof s.searchable !== 'boolean') problems.push({ path: `${at}/searchable`, message: 'must be a boolean' });
  });
  return problems;
}

// ------------------------------------------------------------------ the shape of a schema

/**
 * Where a subschema applies, relative to the value its parent schema applies to: to that value
 * itself, to one property value (`properties` and `additionalProperties`: one of them per
 * key), to every property value, to the keys, to one array element (by position), to every
 * element; or nowhere until a `$ref` names it.
 */
type Slot = 'same' | 'oneKey' | 'everyKey' | 'keyName' | 'oneIndex' | 'everyIndex' | 'definition';

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
function subschemas(schema: JsonSchema | boolean): Subschema[] {
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

const pointerOf = (path: string[]) => path.map((p) => `/${p.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');

/** Calls `visit` on `schema` and every subschema in it, with its JSON pointer from `schema`. */
function eachSchema(schema: JsonSchema | boolean, visit: (s: JsonSchema | boolean, pointer: string) => void, pointer = ''): void {
  visit(schema, pointer);
  for (const sub of subschemas(schema)) eachSchema(sub.schema, visit, pointer + pointerOf(sub.path));
}

/** The JSON pointer a local `$ref` (`#` or `#/…`, URI-escaped) names; undefined for any other. */
function refPointer(ref: unknown): string | undefined {
  if (ref === '#') return '';
  if (typeof ref !== 'string' || !ref.startsWith('#/')) return undefined;
  try {
    return pointerOf(ref.slice(2).split('/').map((p) => decodeURIComponent(p).replace(/~1/g, '/').replace(/~0/g, '~')));
  } catch {
    return undefined;
  }
}

/** Identifiers and dynamic references: within a type's schema, JSON pointers are what refer. */
const NOT_SELF_CONTAINED = ['$id', 'id', '$anchor', '$dynamicAnchor', '$dynamicRef', '$recursiveAnchor', '$recursiveRef'];

/**
 * `uniqueItems` compares elements pairwise (100,000 distinct objects took 36 s) unless `items`
 * gives them one or more types that are neither object nor array: then ajv indexes them, in
 * linear time (node_modules/ajv/dist/vocabularies/validation/uniqueItems.js, canOptimize).
 */
function uniqueItemsLinear(schema: JsonSchema): boolean {
  const items = schema.items;
  if (items === null || typeof items !== 'object' || Array.isArray(items)) return false;
  const types: unknown[] = Array.isArray(items.type) ? items.type : items.type === undefined ? [] : [items.type];
  return types.length > 0 && types.every((t) => typeof t === 'string' && t !== 'object' && t !== 'array');
}

/**
 * Checks a resolved schema (the one items are validated against) against the rules and limits
 * above: 400 invalid_schema naming each problem by its JSON pointer. `selfContained` adds the
 * rules that keep a schema to itself (no `$async`, identifiers or outside references), which
 * types stored before them need not meet: each compile has an ajv of its own, and a Promise
 * for an answer is refused when validating.
 */
function assertWithinLimits(schema: JsonSchema, selfContained: boolean): Load {
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > SCHEMA_LIMITS.resolvedBytes) {
    refuse([{ path: '/', message: `resolved (with its parent types' rules) is ${bytes} bytes of JSON; at most ${SCHEMA_LIMITS.resolvedBytes}` }]);
  }
  const problems: Array<{ path: string; message: string }> = [];
  const nodes = new Map<string, JsonSchema | boolean>();
  const refs: Array<{ at: string; ref: string }> = [];
  const regexes = new Set<string>();
  const regex = (source: string, at: string) => {
    if (source.length > SCHEMA_LIMITS.regexLength) problems.push({ path: at, message: `a regular expression is at most ${SCHEMA_LIMITS.regexLength} characters` });
    else regexes.add(source);
  };
  eachSchema(schema, (s, at) => {
    nodes.set(at, s);
    if (typeof s === 'boolean') return;
    if (selfContained) {
      if (s.$async !== undefined) problems.push({ path: `${at}/$async`, message: 'asynchronous validation is not supported' });
      for (const keyword of NOT_SELF_CONTAINED) {
        if (s[keyword] !== undefined) {
          problems.push({ path: `${at}/${keyword}`, message: 'is not supported: a type\'s schema stands alone; refer within it with "$ref": "#/definitions/…"' });
        }
      }
      if (s.$ref !== undefined && refPointer(s.$ref) === undefined) {
        problems.push({ path: `${at}/$ref`, message: 'must be a JSON pointer into this schema: "#" or "#/…"' });
      } else if (s.$ref !== undefined) refs.push({ at, ref: s.$ref });
    }
    for (const [source, pointer] of ownRegexes(s, at)) regex(source, pointer);
    if (Array.isArray(s.enum) && s.enum.length > SCHEMA_LIMITS.enumValues) {
      problems.push({ path: `${at}/enum`, message: `has ${s.enum.length} values; at most ${SCHEMA_LIMITS.enumValues}` });
    }
    if (s.uniqueItems === true && !uniqueItemsLinear(s)) {
      problems.push({
        path: `${at}/uniqueItems`,
        message: 'needs "items" with a "type" that is neither object nor array (e.g. {"type": "string"}): comparing objects or arrays takes time quadratic in the array\'s length',
      });
    }
  });
  for (const { at, ref } of refs) {
    if (!nodes.has(refPointer(ref)!)) problems.push({ path: `${at}/$ref`, message: `"${ref}" does not point at a schema inside this one` });
  }
  if (regexes.size > SCHEMA_LIMITS.regexes) {
    problems.push({ path: '/', message: `uses ${regexes.size} distinct regular expressions (pattern, patternProperties); at most ${SCHEMA_LIMITS.regexes}` });
  }
  const cost = weightOf(regexes);
  if (cost > SCHEMA_LIMITS.regexCost) {
    problems.push({
      path: '/',
      message: `its regular expressions weigh ${cost}, at most ${SCHEMA_LIMITS.regexCost} (a character counts 1, ".", \\W \\D \\S, a negated class and each member of a class past ASCII 10, \\p{…} 2000, and {n,m} multiplies by m)`,
    });
  }
  if (problems.length) refuse(problems);
  const applications = mostApplications(nodes);
  if (applications.cycle !== undefined) {
    refuse([{ path: applications.cycle, message: 'is part of a "$ref" cycle that never descends into the data: it would apply to one value forever' }]);
  }
  if (applications.schemas > SCHEMA_LIMITS.applications) {
    refuse([{ path: '/', message: `up to ${applications.schemas} schemas can apply to one value of the properties (branches, $refs and parent types' copies, at each level); at most ${SCHEMA_LIMITS.applications}` }]);
  }
  if (applications.values > SCHEMA_LIMITS.enumComparisons) {
    refuse([
      {
        path: '/',
        message: `one value of the properties can be compared with up to ${applications.values} enum values (a const counts one), summed over the schemas that can apply to it; at most ${SCHEMA_LIMITS.enumComparisons}`,
      },
    ]);
  }
  return applications;
}

/**
 * What applies to one value: how many schemas, how many enum (and const) values they compare it
 * with, and the summed regexCost of the regular expressions they match it (or its keys) with,
 * each as often as it applies: 255 `allOf` copies of one pattern match the value 255 times.
 */
interface Load {
  schemas: number;
  values: number;
  regexWeight: number;
}

/** The summed regexCost of the regular expressions schema `s` matches the value it applies to (or its keys) with. */
const matchedRegexes = (s: JsonSchema | boolean): number => (typeof s === 'boolean' ? 0 : ownRegexes(s, '').reduce((sum, [source]) => sum + regexCost(source), 0));

/** The enum (and const) values schema `s` compares the value it applies to with. */
const comparedValues = (s: JsonSchema | boolean): number =>
  typeof s === 'boolean' ? 0 : (Array.isArray(s.enum) ? s.enum.length : 0) + (Object.hasOwn(s, 'const') ? 1 : 0);

/**
 * An upper bound on how many schemas apply to any one value (the properties object itself, or
 * one nested in it), on how many enum values they compare it with and on the weight of the
 * regular expressions they match it with (each bounded apart: the value most schemas apply to
 * need not be the one most enum values do), and a pointer on a
 * cycle when that is what makes it unbounded. At a value, a schema applies itself and its
 * same-value subschemas (allOf/anyOf/…, its `$ref`'s target);
 * to a property value it passes the one of `properties`/`additionalProperties` that fits the
 * key plus every `patternProperties` schema, to an element the schemas for its position plus
 * `contains`, and so on one level down, as deep as a request body nests.
 */
function mostApplications(nodes: Map<string, JsonSchema | boolean>): Load & { cycle?: string } {
  const CAP = 1e9;
  const capped = (a: Load, b: Load): Load => ({
    schemas: Math.min(CAP, a.schemas + b.schemas),
    values: Math.min(CAP, a.values + b.values),
    regexWeight: Math.min(CAP, a.regexWeight + b.regexWeight),
  });
  const same = new Map<string, string[]>();
  const below = new Map<string, Array<{ slot: Slot; at: string }>>();
  for (const [at, s] of nodes) {
    const subs = subschemas(s).map((sub) => ({ slot: sub.slot, at: at + pointerOf(sub.path) }));
    const ref = typeof s === 'object' ? refPointer(s.$ref) : undefined;
    same.set(at, [...subs.filter((sub) => sub.slot === 'same').map((sub) => sub.at), ...(ref !== undefined && nodes.has(ref) ? [ref] : [])]);
    below.set(at, subs.filter((sub) => sub.slot !== 'same' && sub.slot !== 'definition'));
  }
  let cycle: string | undefined;
  let previous = new Map<string, Load>();
  const most: Load = { schemas: 0, values: 0, regexWeight: 0 };
  for (let depth = 0; depth <= MAX_NESTING; depth++) {
    const current = new Map<string, Load>();
    const visiting = new Set<string>();
    const count = (at: string): Load => {
      const known = current.get(at);
      if (known !== undefined) return known;
      if (visiting.has(at)) {
        cycle ??= at || '/';
        return { schemas: CAP, values: CAP, regexWeight: CAP };
      }
      visiting.add(at);
      const node = nodes.get(at)!;
      let n = depth === 0 ? { schemas: 1, values: comparedValues(node), regexWeight: matchedRegexes(node) } : passedDown(below.get(at)!, previous);
      for (const next of same.get(at)!) n = capped(n, count(next));
      visiting.delete(at);
      current.set(at, n);
      return n;
    };
    for (const at of nodes.keys()) count(at);
    const root = current.get('')!;
    most.schemas = Math.max(most.schemas, root.schemas);
    most.values = Math.max(most.values, root.values);
    most.regexWeight = Math.max(most.regexWeight, root.regexWeight);
    if (root.schemas === 0 || most.schemas >= CAP) break;
    previous = current;
  }
  // A cycle in definitions nothing uses applies to nothing.
  return { ...most, ...(most.schemas >= CAP ? { cycle } : {}) };
}

/** What one value a level down receives from a schema's subschemas `below` it. */
function passedDown(below: Array<{ slot: Slot; at: string }>, loads: Map<string, Load>): Load {
  const each = (part: keyof Load): number => {
    const of = (slot: Slot) => below.filter((s) => s.slot === slot).map((s) => loads.get(s.at)![part]);
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const max = (xs: number[]) => Math.max(0, ...xs);
    return Math.max(max(of('oneKey')) + sum(of('everyKey')), sum(of('keyName')), max(of('oneIndex')) + sum(of('everyIndex')));
  };
  return { schemas: each('schemas'), values: each('values'), regexWeight: each('regexWeight') };
}

// ------------------------------------------------------------------ subtypes

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

// ------------------------------------------------------------------ validators

const re2Code = 'require("re2-wasm").RE2';
let engine: RegexEngine | undefined;

/**
 * A type's validators: `quick` stops at the first error, `full` (made when needed) lists them
 * all. `valueCost`: what checking one value of the properties costs, at most (`costPerValue`).
 * `bytes`: what one of them holds, estimated when `quick` is compiled (validatorBytes).
 */
interface Compiled {
  engine: RegexEngine;
  quick: ValidateFunction;
  full?: ValidateFunction;
  valueCost: number;
  bytes: number;
}

/**
 * The cost of checking one value, in units of one schema applied to it (1.4 ns for `minimum`
 * alone, 36 ns with `multipleOf`, measured in plain node): the schemas that may apply to it,
 * plus their enum values, which ajv compares one after another (2.7 ns each for numbers).
 */
const costPerValue = (load: Load): number => load.schemas + Math.ceil(load.values / 32);

/**
 * What is kept of a schema by cache key: its Load (assertWithinLimits, once per key) and its
 * validators once compiled (their estimated bytes: `cachedBytes`).
 */
interface Cached {
  load: Load;
  validators?: Compiled;
}

/**
 * What the cache may hold, by the estimates below, in each thread that validates (the main one
 * and pattern-check.ts's worker, whose cache is its own): with both validators compiled, some
 * 3,400 types of ten string properties, 66 of 40 KB, or 20 at the 128 KiB a resolved schema may
 * reach. A type pushed out is compiled again at its next write (milliseconds for most schemas,
 * half a second at 128 KiB). A bound on the count alone let 5,000 large schemas hold gigabytes,
 * under keys that may never come back (a deleted type's, a changed type's old version).
 */
const CACHE_BYTES = 256 * 1024 * 1024;
const MAX_CACHED = 5000;

/**
 * What one compiled validator holds, from its schema's JSON size: ajv writes code some 15 times
 * that size, and V8 keeps it as source and bytecode with the ajv behind it. Measured (heap after
 * gc, 2026-11-27): a 38 KB schema of 700 flat properties, 1.7 MB a validator (45 per byte); ten
 * string properties in 471 bytes, 40 KB; four 256-value enums in 15 KB, 51 KB; 27 KB mostly of
 * descriptions, 81 KB. So the shapes that make code overestimate the others, which are only
 * compiled again sooner.
 */
const VALIDATOR_BASE_BYTES = 16 * 1024;
const VALIDATOR_BYTES_PER_SCHEMA_BYTE = 48;
const validatorBytes = (schema: JsonSchema): number => VALIDATOR_BASE_BYTES + VALIDATOR_BYTES_PER_SCHEMA_BYTE * JSON.stringify(schema).length;
/** A cache key, its Load and the map's entry. */
const loadBytes = (cacheKey: string): number => 256 + 2 * cacheKey.length;

/**
 * By cache key, least recently used first; every validator in it is from the current engine. It
 * is all tenants' (the cache key begins with the tenant): one tenant's many or large types push
 * out others' least recently used ones, which are compiled again at their next write.
 */
const cache = new WeighedMap<string, Cached>(MAX_CACHED, CACHE_BYTES);

/** What an entry holds, by estimate: its key and Load, and its validators (the full one counted again once compiled). */
const cachedBytes = (cacheKey: string, entry: Cached): number =>
  loadBytes(cacheKey) + (entry.validators ? entry.validators.bytes * (entry.validators.full ? 2 : 1) : 0);

/** The schema's cache entry, now the most recently used, checking it against the limits once per cache key. */
function cachedFor(cacheKey: string, schema: JsonSchema): Cached {
  let entry = cache.touch(cacheKey);
  if (!entry) {
    // Types stored before a limit existed meet it here, and their writes get its 400.
    entry = { load: assertWithinLimits(schema, false) };
    cache.set(cacheKey, entry, cachedBytes(cacheKey, entry));
  }
  return entry;
}

/** The schema's Load (what applies to one value at most: assertWithinLimits). */
const loadOf = (cacheKey: string, schema: JsonSchema): Load => cachedFor(cacheKey, schema).load;

/** Sets the validators of a cache entry and weighs it again, if the entry is still cached. */
function keep(cacheKey: string, entry: Cached, validators: Compiled | undefined): void {
  entry.validators = validators;
  if (cache.get(cacheKey) === entry) cache.reweigh(cacheKey, cachedBytes(cacheKey, entry));
}

/**
 * Drops what is cached under keys starting with `prefix` (a type's `tenant:name:`), when the
 * type is deleted or changed: those keys never come back, and would wait to be pushed out. A
 * write still holding the old schema compiles it again; only this thread's cache is told.
 */
export function forgetValidators(prefix: string): void {
  for (const [key] of cache) if (key.startsWith(prefix)) cache.delete(key);
}

/** What the cache holds under keys starting with `prefix` (all of it by default): entries and estimated bytes. */
export function validatorCacheUse(prefix = ''): { entries: number; bytes: number } {
  if (!prefix) return { entries: cache.size, bytes: cache.bytes };
  let entries = 0;
  let bytes = 0;
  for (const [key, entry] of cache) {
    if (!key.startsWith(prefix)) continue;
    entries++;
    bytes += cachedBytes(key, entry);
  }
  return { entries, bytes };
}

/** Sets the cache's budget in estimated bytes (tests); answers the one it replaces. */
export function setValidatorCacheBudget(bytes: number): number {
  const was = cache.maxBytes;
  cache.maxBytes = bytes;
  cache.evict();
  return was;
}

/**
 * The engine new validators are compiled in. A spent one is dropped with every validator it
 * made: its heap goes only with the last of them (regex-engine.ts); Loads stay.
 */
function currentEngine(): RegexEngine {
  if (!engine || engine.spent) {
    engine = new RegexEngine();
    for (const [key, entry] of cache) if (entry.validators) keep(key, entry, undefined);
  }
  return engine;
}

/**
 * Compiles `schema` in an ajv of its own, whose patterns run on engine `e`. What ajv registers
 * while compiling (the schema itself, by which `"$ref": "#"` resolves; an `$id` an older type
 * carries) is that ajv's alone: one ajv for all let a tenant's `$ref` reach another tenant's
 * schema by its `$id`, and a second compile of an `$id` fail ("already exists").
 */
function compileIn(e: RegexEngine, schema: JsonSchema, allErrors: boolean): ValidateFunction {
  const regExp = Object.assign((pattern: string, flags: string) => e.regExp(pattern, flags), { code: re2Code });
  // Not optimised: that pass takes time superlinear in the code (a 250 KB schema compiled in 2.6 s
  // without it, 13.7 s with it), for validators some 30% faster.
  return newAjv({ allErrors, validateSchema: false, code: { regExp, optimize: false } }).compile(schema);
}

/** compileIn the current engine; one whose heap ran out is replaced and the compile tried again. */
function compile(schema: JsonSchema, allErrors: boolean): { engine: RegexEngine; validate: ValidateFunction } {
  for (let attempt = 1; ; attempt++) {
    const e = currentEngine();
    try {
      return { engine: e, validate: compileIn(e, schema, allErrors) };
    } catch (err) {
      if (e.broken && attempt === 1) continue;
      if (e.broken) refuse([{ path: '/', message: 'its regular expressions need more memory than one schema may use; simplify them' }]);
      refuse([{ path: refusedRegexAt(e, schema) ?? '/', message: `cannot be compiled: ${(err as Error).message}` }]);
    }
  }
}

/**
 * Where in `schema` stands a regular expression engine `e` refuses (a lookaround, a
 * backreference): ajv's compile error names the pattern, not its place. Asked only after a
 * failed compile; what `e` compiled or refused already it answers from its cache.
 */
function refusedRegexAt(e: RegexEngine, schema: JsonSchema): string | undefined {
  let found: string | undefined;
  eachSchema(schema, (s, at) => {
    if (found !== undefined || typeof s === 'boolean') return;
    for (const [source, pointer] of ownRegexes(s, at)) {
      try {
        e.regExp(source, 'u');
      } catch {
        found ??= pointer;
      }
    }
  });
  return found;
}

/**
 * Checks that items can be validated against a resolved schema: the limits above, the
 * meta-schema, and a compile. 400 invalid_schema when not.
 */
export function assertUsableSchema(schema: JsonSchema): void {
  assertWithinLimits(schema, true);
  const problems = metaSchemaProblems(schema);
  if (problems.length) refuse(problems);
  compile(schema, true);
}

/**
 * Told when a validator compile starts and ends: the pattern-check worker tells its thread, whose
 * time limit is for checking, not for compiling (bounded by the schema limits, and slow on a
 * loaded machine: a schema of nine `\p{L}` patterns took over a second under load).
 */
let compileListener: ((phase: 'start' | 'end') => void) | undefined;
export function onCompile(listener: typeof compileListener): void {
  compileListener = listener;
}

function compiling<T>(work: () => T): T {
  compileListener?.('start');
  try {
    return work();
  } finally {
    compileListener?.('end');
  }
}

function compiledFor(cacheKey: string, schema: JsonSchema): Compiled {
  const e = currentEngine();
  const entry = cachedFor(cacheKey, schema);
  if (entry.validators?.engine === e) return entry.validators;
  const { engine: made, validate } = compiling(() => compile(schema, false));
  const validators: Compiled = { engine: made, quick: validate, valueCost: costPerValue(entry.load), bytes: validatorBytes(schema) };
  keep(cacheKey, entry, validators);
  return validators;
}

/** The validator listing every error, compiled when first needed in the engine of `quick`. */
function fullFor(cacheKey: string, schema: JsonSchema, validators: Compiled): ValidateFunction {
  if (validators.full) return validators.full;
  validators.full = compiling(() => compileIn(validators.engine, schema, true));
  const entry = cache.get(cacheKey);
  if (entry?.validators === validators) keep(cacheKey, entry, validators);
  return validators.full;
}

/**
 * Runs one pass of a type's validator: its errors, or undefined when the properties fit. Only
 * `true` is valid: an `$async` schema stored before it was refused answers a Promise (whose
 * rejection must not go unhandled: that ended the process). An engine that aborted mid-check is
 * replaced and the check run once more.
 */
function run(cacheKey: string, schema: JsonSchema, pass: 'quick' | 'full', properties: unknown): ErrorObject[] | undefined {
  for (let attempt = 1; ; attempt++) {
    const entry = compiledFor(cacheKey, schema);
    let result: unknown;
    try {
      const validate = pass === 'quick' ? entry.quick : fullFor(cacheKey, schema, entry);
      result = validate(properties);
      if (result === true) return undefined;
      if (result === false) return validate.errors?.length ? [...validate.errors] : [{ keyword: 'false', instancePath: '', schemaPath: '#', params: {}, message: 'is invalid' }];
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (entry.engine.broken && attempt === 1) continue;
      throw cannotCheck(entry.engine.broken ? 'its regular expressions ran out of memory' : (err as Error).message);
    }
    if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') (result as Promise<unknown>).then(undefined, () => undefined);
    throw cannotCheck('it does not answer synchronously ($async)');
  }
}

/** Whether `value` holds more than `limit` values (objects, arrays and scalars, itself included). */
function moreValuesThan(value: unknown, limit: number): boolean {
  let left = limit;
  const count = (v: unknown): boolean => {
    if (--left < 0) return true;
    if (v !== null && typeof v === 'object') for (const child of Object.values(v)) if (count(child)) return true;
    return false;
  };
  return count(value);
}

/**
 * Checks item properties against a type's resolved schema: the problems found ([] when they
 * fit). Rejects with 400 invalid_schema (an ApiError) when the schema cannot check them.
 */
export type PropertiesValidator = (properties: Record<string, unknown>) => Promise<ErrorObject[]>;

/**
 * Above this many (regexCost + 1) × characters of text, properties are checked off the event
 * loop (pattern-check.ts): at the slowest rate measured, some 160 ns per unit and byte of
 * UTF-8, that many take about 30 ms. The regexCost is the most that can apply to one value
 * (`Load.regexWeight`: a pattern as many times as it applies), so it bounds every character's
 * share. Most items of most types stay under it, and types without patterns never pay for the count.
 */
const IN_PROCESS_MATCH_UNITS = 100_000;

/**
 * Above this many values × `costPerValue`, properties are checked off the event loop too: at
 * most some 15-35 ms in this thread. 241 schemas with `multipleOf` applying to each of 250,000
 * values cost 2.2 s (measured 2026-11-27), which one tenant's writes could spend of every
 * tenant's event loop; in the worker such a check runs into its time limit instead (400
 * `invalid_schema`). A type of a few schemas a value keeps bodies of over 100,000 values here.
 */
const IN_PROCESS_VALUE_UNITS = 400_000;

/**
 * A type's validator; `cacheKey` must change whenever the schema does. Compiled on first use.
 * `owner` (the type's tenant) is whose turn a check in the worker takes (pattern-check.ts).
 */
export function validatorFor(cacheKey: string, schema: JsonSchema, owner = cacheKey): PropertiesValidator {
  return async (properties) => {
    const weight = loadOf(cacheKey, schema).regexWeight;
    const inProcess = weight === 0 ? Infinity : Math.floor(IN_PROCESS_MATCH_UNITS / (weight + 1));
    const costly =
      (inProcess !== Infinity && textLonger(properties, inProcess)) ||
      moreValuesThan(properties, Math.floor(IN_PROCESS_VALUE_UNITS / compiledFor(cacheKey, schema).valueCost));
    return costly ? patternChecker.check(owner, cacheKey, schema, properties) : checkProperties(cacheKey, schema, properties);
  };
}

/** validatorFor's check, in this thread (pattern-check.worker.ts runs it in the worker). */
export function checkProperties(cacheKey: string, schema: JsonSchema, properties: unknown): ErrorObject[] {
  const first = run(cacheKey, schema, 'quick', properties);
  if (!first) return [];
  if (moreValuesThan(properties, MAX_VALUES_LISTED)) return first;
  return run(cacheKey, schema, 'full', properties) ?? first;
}

/** A schema node's own regular expressions (`pattern`, `patternProperties` keys), each with the pointer it stands at. */
function ownRegexes(s: JsonSchema, at: string): Array<[source: string, pointer: string]> {
  const found: Array<[string, string]> = [];
  if (typeof s.pattern === 'string') found.push([s.pattern, `${at}/pattern`]);
  if (s.patternProperties && typeof s.patternProperties === 'object') {
    for (const source of Object.keys(s.patternProperties)) found.push([source, `${at}/patternProperties`]);
  }
  return found;
}

/** The summed regexCost of distinct regular expressions (what compiling them costs): what SCHEMA_LIMITS.regexCost bounds. */
const weightOf = (regexes: Set<string>): number => [...regexes].reduce((sum, r) => sum + regexCost(r), 0);

/** Whether the strings of `value` (object keys included, which patternProperties match) are more than `limit` characters. */
function textLonger(value: unknown, limit: number): boolean {
  let left = limit;
  const count = (v: unknown): boolean => {
    if (typeof v === 'string') return (left -= v.length) < 0;
    if (v === null || typeof v !== 'object') return false;
    if (Array.isArray(v)) return v.some(count);
    for (const [key, child] of Object.entries(v)) if ((left -= key.length) < 0 || count(child)) return true;
    return false;
  };
  return count(value);
}

/** ajv's instancePath (a JSON pointer into the properties) as a dotted field name, `key` below it appended. */
function fieldAt(instancePath: string, key?: string): string {
  const names = instancePath.split('/').slice(1).map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
  return [...names, ...(key === undefined ? [] : [key])].join('.');
}

/** Turns ajv's errors into field issues: which property (`''`: the properties as a whole), and what is wrong with it. */
export function propertyIssues(errors: ErrorObject[]): { missing: string[]; invalid: Array<{ field: string; message: string }> } {
  const missing: string[] = [];
  const invalid: Array<{ field: string; message: string }> = [];
  for (const e of errors) {
    if (e.keyword === 'required') {
      missing.push(fieldAt(e.instancePath, e.params.missingProperty));
    } else if (e.keyword !== 'allOf') {
      // additionalProperties and propertyNames are reported at the object holding the key, and
      // so are the failures of a key under propertyNames' schema: the field at fault is that key.
      const key = e.keyword === 'additionalProperties' ? e.params.additionalProperty : e.keyword === 'propertyNames' ? e.params.propertyName : e.propertyName;
      const message = e.message ?? 'is invalid';
      invalid.push({
        field: fieldAt(e.instancePath, key),
        message: e.keyword !== 'propertyNames' && e.propertyName !== undefined ? `property name ${message}` : message,
      });
    }
  }
  // A subtype's schema and its parent's (in `allOf`) can both report one problem.
  const seen = new Set<string>();
  return { missing: [...new Set(missing)], invalid: invalid.filter((i) => !seen.has(`${i.field}\n${i.message}`) && seen.add(`${i.field}\n${i.message}`)) };
}

/** Merge policy of every property of a type, defaulting to `manual`. */
export function resolveMergePolicy(schema: JsonSchema, policy: Record<string, MergePolicy>): Record<string, MergePolicy> {
  const out: Record<string, MergePolicy> = {};
  for (const name of Object.keys(schema.properties ?? {})) out[name] = policy[name] ?? 'manual';
  return { ...out, ...policy };
}
