import { addedProperties, isWidening } from './schema-widening';
import type { JsonSchema } from './type-schema';
import { resolveSubtypeSchema } from './subtype-schema';
import { checkProperties } from './property-validation';

const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}): JsonSchema => ({ type: 'object', properties, ...extra });
const str = { type: 'string' };
let seq = 0;
const fits = (schema: JsonSchema, value: unknown) => checkProperties(`widening-spec:${seq++}`, schema, value).length === 0;

describe('isWidening', () => {
  describe('proves', () => {
    it.each<[string, JsonSchema, JsonSchema]>([
      ['the same schema', obj({ a: str }), obj({ a: str })],
      ['a change of annotations alone', obj({ a: { ...str, description: 'x', searchable: false } }), obj({ a: { ...str, title: 'A', searchable: true } })],
      ['a property added where additionalProperties was false', obj({ a: str }, { additionalProperties: false }), obj({ a: str, b: { type: 'integer' } }, { additionalProperties: false })],
      ['additionalProperties: false removed', obj({ a: str }, { additionalProperties: false }), obj({ a: str })],
      ['a property no longer required', obj({ a: str, b: str }, { required: ['a', 'b'] }), obj({ a: str, b: str }, { required: ['a'] })],
      ['required removed', obj({ a: str }, { required: ['a'] }), obj({ a: str })],
      ['a wider enum', obj({ c: { enum: ['x', 'y'] } }), obj({ c: { enum: ['x', 'y', 'z'] } })],
      ['const to an enum holding it', obj({ c: { const: 'x' } }), obj({ c: { enum: ['x', 'y'] } })],
      ['enum removed', obj({ c: { type: 'string', enum: ['x'] } }), obj({ c: { type: 'string' } })],
      ['a type to a union holding it', obj({ a: str }), obj({ a: { type: ['string', 'null'] } })],
      ['integer to number', obj({ a: { type: 'integer' } }), obj({ a: { type: 'number' } })],
      ['type removed', obj({ a: str }), obj({ a: {} })],
      ['an enum given the type of its values', obj({ c: { enum: ['x', 'y'] } }), obj({ c: { type: 'string', enum: ['x', 'y'] } })],
      ['relaxed bounds', obj({ n: { type: 'integer', minimum: 1, maximum: 5, exclusiveMaximum: 9 } }), obj({ n: { type: 'integer', minimum: 0, maximum: 10 } })],
      ['an exclusive bound kept by an inclusive one inside it', obj({ n: { minimum: 2 } }), obj({ n: { exclusiveMinimum: 1 } })],
      ['relaxed lengths', obj({ s: { type: 'string', minLength: 3, maxLength: 5 }, l: { type: 'array', minItems: 2, maxItems: 3 } }), obj({ s: { type: 'string', minLength: 1, maxLength: 50 }, l: { type: 'array', maxItems: 30 } })],
      ['pattern and format removed', obj({ s: { type: 'string', pattern: '^a', format: 'email' } }), obj({ s: { type: 'string' } })],
      ['a nested object widened', obj({ o: obj({ x: str }, { required: ['x'], additionalProperties: false }) }), obj({ o: obj({ x: { type: ['string', 'number'] }, y: str }) })],
      ['array items widened', obj({ l: { type: 'array', items: { enum: [1, 2] } } }), obj({ l: { type: 'array', items: { enum: [1, 2, 3] } } })],
      ['a property dropped into open additionalProperties', obj({ a: str }), obj({})],
      ['uniqueItems removed', obj({ l: { type: 'array', items: str, uniqueItems: true } }), obj({ l: { type: 'array', items: str } })],
      ['a wider multipleOf', obj({ n: { multipleOf: 4 } }), obj({ n: { multipleOf: 2 } })],
      ['an anyOf branch added', obj({ a: { anyOf: [str, { type: 'integer' }] } }), obj({ a: { anyOf: [str, { type: 'integer' }, { type: 'null' }] } })],
      ['an unchanged $ref', obj({ a: { $ref: '#/definitions/d' } }, { definitions: { d: str } }), obj({ a: { $ref: '#/definitions/d' }, b: {} }, { definitions: { d: str } })],
      ['a false property made optional', obj({ a: false }), obj({ a: str })],
    ])('%s', (_, before, after) => {
      expect(isWidening(before, after)).toBe(true);
    });
  });

  describe('does not prove', () => {
    it.each<[string, JsonSchema | boolean, JsonSchema | boolean]>([
      ['a typed property added where any value was allowed', obj({ a: str }), obj({ a: str, b: { type: 'integer' } })],
      ['a property made required', obj({ a: str, b: str }), obj({ a: str, b: str }, { required: ['b'] })],
      ['a narrower enum', obj({ c: { enum: ['x', 'y'] } }), obj({ c: { enum: ['x'] } })],
      ['an enum added', obj({ c: str }), obj({ c: { type: 'string', enum: ['x'] } })],
      ['a narrower type', obj({ a: { type: ['string', 'null'] } }), obj({ a: str })],
      ['number to integer', obj({ a: { type: 'number' } }), obj({ a: { type: 'integer' } })],
      ['a type added', obj({ a: {} }), obj({ a: str })],
      ['additionalProperties: false added', obj({ a: str }), obj({ a: str }, { additionalProperties: false })],
      ['a property dropped under additionalProperties: false', obj({ a: str, b: str }, { additionalProperties: false }), obj({ a: str }, { additionalProperties: false })],
      ['a tighter bound', obj({ n: { minimum: 1 } }), obj({ n: { minimum: 2 } })],
      ['a bound added', obj({ n: { type: 'integer' } }), obj({ n: { type: 'integer', maximum: 10 } })],
      ['an exclusive bound at the old inclusive one', obj({ n: { minimum: 1 } }), obj({ n: { exclusiveMinimum: 1 } })],
      ['a shorter maxLength', obj({ s: { maxLength: 5 } }), obj({ s: { maxLength: 4 } })],
      ['a pattern changed', obj({ s: { pattern: '^a' } }), obj({ s: { pattern: '^a.*' } })],
      ['a format added', obj({ s: str }), obj({ s: { type: 'string', format: 'email' } })],
      ['a nested object narrowed', obj({ o: obj({ x: str }) }), obj({ o: obj({ x: str }, { required: ['x'] }) })],
      ['array items narrowed', obj({ l: { items: { type: 'number' } } }), obj({ l: { items: { type: 'integer' } } })],
      ['uniqueItems added', obj({ l: { items: str } }), obj({ l: { items: str, uniqueItems: true } })],
      ['a narrower multipleOf', obj({ n: { multipleOf: 2 } }), obj({ n: { multipleOf: 4 } })],
      ['oneOf changed', obj({ a: { oneOf: [str] } }), obj({ a: { oneOf: [str, { type: 'integer' }] } })],
      ['a not added', obj({ a: {} }), obj({ a: { not: str } })],
      ['patternProperties changed', obj({}, { patternProperties: { '^x': str } }), obj({}, { patternProperties: { '^x': { type: 'integer' } } })],
      ['a property added beside patternProperties', obj({}, { patternProperties: { '^x': {} } }), obj({ xa: str }, { patternProperties: { '^x': {} } })],
      ['a definition changed under an unchanged $ref', obj({ a: { $ref: '#/definitions/d' } }, { definitions: { d: {} } }), obj({ a: { $ref: '#/definitions/d' } }, { definitions: { d: str } })],
      ['a tuple changed', obj({ l: { items: [str] } }), obj({ l: { items: [{ type: 'integer' }] } })],
      ['an unknown keyword added', obj({ a: str }), obj({ a: { ...str, nullable: false } })],
      ['false to a schema', obj({ a: str }), obj({ a: false })],
      ['true to a schema', true, obj({})],
      ['an allOf branch added', obj({}, { allOf: [{}] }), obj({}, { allOf: [{}, { required: ['a'] }] })],
    ])('%s', (_, before, after) => {
      expect(isWidening(before, after)).toBe(false);
    });
  });

  it("proves a subtype's resolved schema widened when its parent's was", () => {
    const parentBefore = obj({ title: str, n: { type: 'integer', maximum: 5 } }, { additionalProperties: false });
    const parentAfter = obj({ title: str, n: { type: 'integer', maximum: 9 }, extra: str }, { additionalProperties: false });
    const child = { properties: { title: { maxLength: 80 } } };
    expect(isWidening(parentBefore, parentAfter)).toBe(true);
    expect(isWidening(resolveSubtypeSchema(parentBefore, child), resolveSubtypeSchema(parentAfter, child))).toBe(true);
    expect(isWidening(resolveSubtypeSchema(parentAfter, child), resolveSubtypeSchema(parentBefore, child))).toBe(false);
  });

  describe('with keys no value holds (absent)', () => {
    it('proves a typed property added to an open schema when its key is absent', () => {
      const before = obj({ a: str });
      const after = obj({ a: str, b: { type: 'integer' } });
      expect(isWidening(before, after)).toBe(false);
      expect(isWidening(before, after, new Set(['b']))).toBe(true);
      expect(isWidening(before, after, new Set(['c']))).toBe(false);
    });

    it('still refuses what else narrows, and a property it makes required', () => {
      expect(isWidening(obj({ a: str }), obj({ a: { type: 'integer' }, b: str }), new Set(['b']))).toBe(false);
      expect(isWidening(obj({ a: str }), obj({ a: str, b: str }, { required: ['b'] }), new Set(['b']))).toBe(false);
    });

    it('applies to the root only (and its allOf branches), not to nested objects', () => {
      expect(isWidening(obj({ o: obj({}) }), obj({ o: obj({ b: str }) }), new Set(['b']))).toBe(false);
      const parentBefore = obj({ a: str });
      const parentAfter = obj({ a: str, b: str });
      const child = { properties: { c: str } };
      const [before, after] = [resolveSubtypeSchema(parentBefore, child), resolveSubtypeSchema(parentAfter, child)];
      expect(addedProperties(before, after)).toEqual(['b']);
      expect(isWidening(before, after)).toBe(false);
      expect(isWidening(before, after, new Set(['b']))).toBe(true);
    });

    it('addedProperties names the top-level properties the new schema adds', () => {
      expect(addedProperties(obj({ a: str }), obj({ a: str, b: str, c: {} }))).toEqual(['b', 'c']);
      expect(addedProperties(obj({ a: str, b: str }), obj({ a: str }))).toEqual([]);
    });
  });

  // What it proves must hold: values the old schema accepts, the new one accepts too (ajv decides).
  it('is never wrong about sample values', () => {
    const values: unknown[] = [
      {}, { a: 'x' }, { a: 1 }, { a: null }, { b: 'y' }, { b: 2 }, { c: 'x' }, { c: 'z' }, { n: 0 }, { n: 1 }, { n: 2 }, { n: 5 }, { n: 9 }, { n: 1.5 },
      { s: 'a' }, { s: 'abcdef' }, { s: 'a@b.co' }, { l: [1, 1] }, { l: ['a', 'b', 'c'] }, { o: {} }, { o: { x: 'a' } }, { o: { x: 1, y: 'b' } }, { xa: 'q' }, { xa: 3 },
    ];
    const schemas: JsonSchema[] = [
      obj({ a: str }), obj({ a: str }, { additionalProperties: false }), obj({ a: str, b: { type: 'integer' } }), obj({ a: str }, { required: ['a'] }),
      obj({ c: { enum: ['x', 'y'] } }), obj({ c: { enum: ['x', 'y', 'z'] } }), obj({ c: { const: 'x' } }), obj({ a: { type: ['string', 'null'] } }),
      obj({ n: { type: 'integer', minimum: 1, maximum: 5 } }), obj({ n: { type: 'number', exclusiveMinimum: 1 } }), obj({ n: { minimum: 2 } }),
      obj({ s: { type: 'string', minLength: 2, maxLength: 5 } }), obj({ s: { type: 'string', format: 'email' } }), obj({ l: { type: 'array', maxItems: 2 } }),
      obj({ l: { type: 'array', items: { type: 'integer' }, uniqueItems: true } }), obj({ o: obj({ x: str }, { required: ['x'], additionalProperties: false }) }),
      obj({ o: obj({ x: { type: ['string', 'number'] }, y: str }) }), obj({}, { patternProperties: { '^x': str } }), obj({}), obj({ a: false }),
    ];
    for (const before of schemas) {
      for (const after of schemas) {
        if (!isWidening(before, after)) continue;
        for (const v of values) if (fits(before, v)) expect({ before, after, v, fits: fits(after, v) }).toMatchObject({ fits: true });
      }
    }
  });
});
