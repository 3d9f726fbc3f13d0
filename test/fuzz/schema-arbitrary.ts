/**
 * JSON Schema (as @nestjs/swagger writes it into the OpenAPI document) → fast-check arbitrary
 * of "valid-ish" values: values the schema accepts, so that requests get past validation and
 * reach the code behind it. Where the schema says too little to get past the service's own
 * rules (a `type` field that must name an existing type, an id that must exist), a hint from
 * hints.ts supplies realistic values instead; hostility is added afterwards by mutations.
 */
import fc from 'fast-check';
import { OpenApiDoc, refName, resolve, Schema } from './openapi';

/** Supplies an arbitrary for a field (owner = component schema name, or a parameter's "query"/"header"). */
export type HintLookup = (owner: string | undefined, field: string | undefined) => fc.Arbitrary<unknown> | undefined;

const WORDS = ['alpha', 'beta', 'note', 'hello world', 'pasta', 'tomato sauce', 'Ünïcödé', '日本', 'x', 'a-b_c.d'];

export const benignString = (min = 0, max = 40): fc.Arbitrary<string> =>
  fc
    .oneof(
      { weight: 3, arbitrary: fc.constantFrom(...WORDS) },
      { weight: 2, arbitrary: fc.string({ minLength: 0, maxLength: 16 }) },
      { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 0, maxLength: 8 }) },
    )
    .map((s) => {
      let out = s;
      while (out.length < min) out += 'x';
      return out.slice(0, Math.max(min, max));
    });

/** Valid RFC 3339 date-times (the edge cases are in hostile.ts). */
export const dateTime: fc.Arbitrary<string> = fc
  .date({ min: new Date('1990-01-01T00:00:00Z'), max: new Date('2035-12-31T23:59:59Z'), noInvalidDate: true })
  .map((d) => d.toISOString());

export interface SchemaArbOptions {
  doc: OpenApiDoc;
  hints: HintLookup;
  maxDepth?: number;
}

export function schemaArbitrary(schema: Schema | undefined, opts: SchemaArbOptions, owner?: string, field?: string, depth = 0): fc.Arbitrary<unknown> {
  const hinted = opts.hints(owner, field);
  if (hinted) return hinted;
  const ownName = refName(schema) ?? owner;
  const s = resolve(opts.doc, schema);
  if (Array.isArray(s.enum) && s.enum.length) return fc.constantFrom(...s.enum);
  if ('const' in s) return fc.constant(s.const);
  const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : s.properties ? ['object'] : [];
  if (!types.length) return fc.jsonValue({ maxDepth: 2 });
  const arbs = types.map((t) => typed(t, s, opts, ownName, depth));
  return arbs.length === 1 ? arbs[0] : fc.oneof(...arbs);
}

/**
 * Strings from a pattern, with no filter: a length bound the generator rarely meets (minLength 16
 * on `^[!-~]+$`, whose default size makes at most 12 characters) had fast-check retry forever.
 * Lengths are steered with `size` and cut at maxLength; a value that still misses a bound is
 * input the service must refuse, which a fuzzer may well send. Undefined for a pattern
 * fast-check cannot generate from (lookaround).
 */
function patternArbitrary(pattern: string, min: number, max: number | undefined): fc.Arbitrary<string> | undefined {
  try {
    const matching = fc.stringMatching(new RegExp(pattern), { size: min > 8 ? 'medium' : 'small' });
    fc.sample(matching, { numRuns: 1, seed: 1 }); // fast-check refuses some syntax only when it generates
    return max === undefined ? matching : matching.map((x) => x.slice(0, max));
  } catch {
    return undefined;
  }
}

function typed(type: string, s: Schema, opts: SchemaArbOptions, owner: string | undefined, depth: number): fc.Arbitrary<unknown> {
  const maxDepth = opts.maxDepth ?? 4;
  switch (type) {
    case 'string': {
      if (s.format === 'date-time') return dateTime;
      if (s.format === 'uuid') return fc.uuid();
      const min = s.minLength ?? 0;
      const max = Math.min(s.maxLength ?? 40, 40);
      const matching = typeof s.pattern === 'string' ? patternArbitrary(s.pattern, min, s.maxLength) : undefined;
      if (matching) return matching;
      const examples = typeof s.example === 'string' ? [s.example] : [];
      return examples.length ? fc.oneof(fc.constantFrom(...examples), benignString(min, max)) : benignString(min, max);
    }
    case 'integer':
      return fc.integer({ min: s.minimum ?? -1000, max: s.maximum ?? 1000 });
    case 'number':
      // Integers mostly: the service's numeric fields are counts and versions.
      return fc.oneof(
        { weight: 4, arbitrary: fc.integer({ min: Math.ceil(s.minimum ?? -1000), max: Math.floor(s.maximum ?? 1000) }) },
        { weight: 1, arbitrary: fc.double({ min: s.minimum ?? -1000, max: s.maximum ?? 1000, noNaN: true }) },
      );
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      if (depth >= maxDepth) return fc.constant([]);
      const items = schemaArbitrary(s.items, opts, owner, undefined, depth + 1);
      const size = { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 4, 4) };
      return s.uniqueItems ? fc.uniqueArray(items, { ...size, selector: (v) => JSON.stringify(v) }) : fc.array(items, size);
    }
    case 'object': {
      if (depth >= maxDepth) return fc.constant({});
      const props: Record<string, Schema> = s.properties ?? {};
      const required: string[] = s.required ?? [];
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, sub] of Object.entries(props)) model[name] = schemaArbitrary(sub, opts, owner, name, depth + 1);
      const record = fc.record(model, { requiredKeys: required.filter((r) => r in model) });
      const ap = s.additionalProperties;
      if (!ap) return record;
      const value = ap === true ? fc.jsonValue({ maxDepth: 2 }) : schemaArbitrary(ap, opts, owner, undefined, depth + 1);
      const extra = fc.dictionary(benignString(1, 12), value, { maxKeys: 3 });
      return fc.tuple(record, extra).map(([r, e]) => ({ ...e, ...r }));
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}
