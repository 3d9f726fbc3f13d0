/**
 * JSON Schema rules for item types. This file owns the schema language a type is written in and
 * the check of a schema as submitted (assertValidSchema). The other rules each have a file:
 * - schema-ajv.ts: the ajv they are all built on, and their 400 invalid_schema;
 * - schema-walk.ts: the shape of a schema (its subschemas, their JSON pointers, local `$ref`s);
 * - schema-limits.ts: the limits that keep one tenant's schema from stalling or breaking
 *   validation for everyone;
 * - subtype-schema.ts: merging a subtype's schema onto its parent's (adding is allowed, dropping or
 *   contradicting is not, and the parent's rules keep applying: a subtype only narrows);
 * - compiled-validators.ts, property-validation.ts and property-issues.ts: the validators item
 *   properties are checked with, where the check runs, and its errors as field issues;
 * - merge-policy.ts: the merge policies of a type's properties.
 */
import { meta, metaSchemaProblems, refuse } from './schema-ajv';
import { SCHEMA_LIMITS } from './schema-limits';
import { eachSchema, pointerOf } from './schema-walk';


export type JsonSchema = Record<string, any>;

/** The dialects `$schema` may name: the one this service's ajv checks (schema-ajv.ts; once, any schema ajv had seen). */
const DRAFT_07 = new Set(['http://json-schema.org/draft-07/schema', 'http://json-schema.org/draft-07/schema#']);

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
