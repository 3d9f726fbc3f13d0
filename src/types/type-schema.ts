/**
 * JSON Schema rules for item types: checking a submitted schema (ajv), merging a subtype's
 * schema onto its parent's (adding is allowed, dropping or contradicting is not, and the parent's
 * rules keep applying: a subtype only narrows), and the compiled validators for item properties.
 */
import Ajv, { ErrorObject, ValidateFunction } from 'ajv';
import type { RegExpEngine } from 'ajv/dist/types';
import addFormats from 'ajv-formats';
import { RE2 } from 're2-wasm';
import { ApiError } from '../common/api-error';

export type JsonSchema = Record<string, any>;
export const MERGE_POLICIES = ['manual', 'client_wins', 'server_wins', 'union'] as const;
export type MergePolicy = (typeof MERGE_POLICIES)[number];

/**
 * A tenant's `pattern` runs on RE2, in time linear in the input: as a JavaScript RegExp, a
 * pattern like `(a+)+$` backtracks for seconds on a short string and blocks every request of
 * the process. RE2 has no lookaround or backreferences; a schema using them is refused.
 */
const re2: RegExpEngine = Object.assign((pattern: string, flags: string) => new RE2(pattern, flags.includes('u') ? flags : `${flags}u`), {
  code: 'require("re2-wasm").RE2',
});

// Not strict: tenant schemas may carry keywords and formats ajv does not know (they are ignored);
// and no logger, so ajv's warnings about them do not reach the console past LOG_LEVEL.
const ajv = new Ajv({ allErrors: true, strict: false, logger: false, validateSchema: true, code: { regExp: re2 } });
addFormats(ajv);
// Our own annotations inside a property schema.
ajv.addKeyword({ keyword: 'searchable', schemaType: 'boolean' });

/** Checks that `schema` is a usable JSON Schema for an item's `properties` object. */
export function assertValidSchema(schema: unknown): asserts schema is JsonSchema {
  const fail = (message: string, details?: Record<string, unknown>) => {
    throw ApiError.badRequest('invalid_schema', message, details);
  };
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) fail('schema must be a JSON Schema object');
  const s = schema as JsonSchema;
  if (s.type !== undefined && s.type !== 'object') fail('schema.type must be "object": it describes the properties object');
  if (s.properties !== undefined && (typeof s.properties !== 'object' || Array.isArray(s.properties) || s.properties === null)) {
    fail('schema.properties must be an object');
  }
  for (const [name, prop] of Object.entries<JsonSchema>(s.properties ?? {})) {
    if (prop && typeof prop === 'object' && 'searchable' in prop && typeof prop.searchable !== 'boolean') {
      fail(`schema.properties.${name}.searchable must be a boolean`);
    }
  }
  if (s.$schema !== undefined && !ajv.getSchema(String(s.$schema))) {
    fail('schema.$schema names a JSON Schema dialect this service does not know; omit it (draft-07 is assumed)');
  }
  if (!ajv.validateSchema(s)) {
    fail('schema is not a valid JSON Schema', { errors: (ajv.errors ?? []).map((e) => ({ path: e.instancePath || '/', message: e.message })) });
  }
  try {
    ajv.compile(s);
  } catch (err) {
    fail(`schema cannot be compiled: ${(err as Error).message}`);
  }
}

function typesOf(prop: JsonSchema): string[] | undefined {
  if (prop.type === undefined) return undefined;
  return Array.isArray(prop.type) ? prop.type : [prop.type];
}

/**
 * The schema a subtype's items are validated against: the parent's properties and required
 * list, plus the child's additions. A child may narrow a parent property (add a format, a
 * pattern, an enum subset) but not change its type or widen its enum: 400 inheritance_violation.
 */
export function resolveSubtypeSchema(parent: JsonSchema, child: JsonSchema): JsonSchema {
  const violations: Array<{ field: string; message: string }> = [];
  const parentProps: Record<string, JsonSchema> = parent.properties ?? {};
  const childProps: Record<string, JsonSchema> = child.properties ?? {};
  const merged: Record<string, JsonSchema> = { ...parentProps };
  for (const [name, prop] of Object.entries(childProps)) {
    const base = parentProps[name];
    if (!base) {
      merged[name] = prop;
      continue;
    }
    const baseTypes = typesOf(base);
    const childTypes = typesOf(prop);
    // Leaving `type` or `enum` out is not a contradiction: the merge below keeps the parent's.
    if (baseTypes && childTypes && !childTypes.every((t) => baseTypes.includes(t))) {
      violations.push({ field: name, message: `must keep the parent's type ${JSON.stringify(base.type)}` });
    }
    if (Array.isArray(base.enum) && prop.enum !== undefined && (!Array.isArray(prop.enum) || !prop.enum.every((v: unknown) => base.enum.includes(v)))) {
      violations.push({ field: name, message: "enum must be a subset of the parent's enum" });
    }
    merged[name] = { ...base, ...prop };
  }
  if (parent.additionalProperties === false && (Object.keys(childProps).some((n) => !parentProps[n]) || (child.additionalProperties ?? false) !== false)) {
    violations.push({ field: '*', message: 'the parent allows no additional properties, so a subtype cannot add any' });
  }
  if (violations.length) {
    throw ApiError.badRequest('inheritance_violation', 'The subtype contradicts its parent type', { fields: violations });
  }
  const required = [...new Set([...(parent.required ?? []), ...(child.required ?? [])])];
  const additionalProperties = child.additionalProperties ?? parent.additionalProperties;
  return {
    ...parent,
    ...child,
    type: 'object',
    properties: merged,
    ...(required.length ? { required } : {}),
    ...(additionalProperties !== undefined ? { additionalProperties } : {}),
    allOf: [parentRules(parent), ...(Array.isArray(child.allOf) ? child.allOf : [])],
  };
}

/**
 * The parent's whole resolved schema, which a subtype's items must also satisfy: the merge above
 * lets a subtype's keyword replace its parent's (`maxLength`, `pattern`, `minimum`, …), and
 * without this a subtype could loosen what `parent.*` promises of every item it matches. With
 * it, a subtype's keywords can only narrow. Its own `$id` and `$schema` stay at the root.
 */
function parentRules(parent: JsonSchema): JsonSchema {
  const { $id, $schema, ...rules } = parent; // eslint-disable-line @typescript-eslint/no-unused-vars
  return rules;
}

const compiled = new Map<string, ValidateFunction>();

/** A cached validator; `cacheKey` must change whenever the schema does. */
export function validatorFor(cacheKey: string, schema: JsonSchema): ValidateFunction {
  let fn = compiled.get(cacheKey);
  if (!fn) {
    fn = ajv.compile(schema);
    if (compiled.size > 5000) compiled.clear();
    compiled.set(cacheKey, fn);
  }
  return fn;
}

/** Turns ajv's errors into field issues: which property, and what is wrong with it. */
export function propertyIssues(errors: ErrorObject[]): { missing: string[]; invalid: Array<{ field: string; message: string }> } {
  const missing: string[] = [];
  const invalid: Array<{ field: string; message: string }> = [];
  for (const e of errors) {
    if (e.keyword === 'required') {
      const base = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
      missing.push(base ? `${base}.${e.params.missingProperty}` : e.params.missingProperty);
    } else if (e.keyword !== 'allOf') {
      const field = e.instancePath.replace(/^\//, '').replace(/\//g, '.') || (e.params.additionalProperty ?? '(properties)');
      invalid.push({ field, message: e.message ?? 'is invalid' });
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
