/**
 * The limits that keep one tenant's schema from stalling or breaking validation for everyone,
 * and their check of a resolved schema (assertWithinLimits), which also weighs what applies to
 * one value at most (its Load): that weight decides where properties are checked
 * (property-validation.ts).
 */
import { regexCost } from './regex-engine';
import { eachSchema, ownRegexes, pointerOf, refPointer, Slot, subschemas } from './schema-walk';
import { refuse } from './schema-ajv';
import type { JsonSchema } from './type-schema';

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

/** How deep a request body nests at most (README "Input rules"), so how deep a schema applies. */
const MAX_NESTING = 64;

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
export function assertWithinLimits(schema: JsonSchema, selfContained: boolean): Load {
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
export interface Load {
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

/** The summed regexCost of distinct regular expressions (what compiling them costs): what SCHEMA_LIMITS.regexCost bounds. */
const weightOf = (regexes: Set<string>): number => [...regexes].reduce((sum, r) => sum + regexCost(r), 0);
