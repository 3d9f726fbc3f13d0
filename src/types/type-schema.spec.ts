import { fullFormats } from 'ajv-formats/dist/formats';
import { thrownApiError } from '../../test/support/thrown';
import { ApiError } from '../common/api-error';
import { withPatternBudget } from './pattern-check';
import { assertValidSchema, JsonSchema } from './type-schema';
import { resolveSubtypeSchema } from './subtype-schema';
import { assertUsableSchema, forgetValidators, setValidatorCacheBudget, validatorCacheUse } from './compiled-validators';
import { checkProperties, PropertiesValidator, validatorFor } from './property-validation';
import { propertyIssues } from './property-issues';
import { resolveMergePolicy } from './merge-policy';

const str = { type: 'string' };
/** An enum of the integers 0 to n-1. */
const enumOf = (n: number) => ({ enum: Array.from({ length: n }, (_, i) => i) });
/** `n` references to definition `e`, all applying to one value. */
const refsToE = (n: number) => ({ allOf: Array.from({ length: n }, () => ({ $ref: '#/definitions/e' })) });
let cacheSeq = 0;
/** A validator for `schema` (fresh cache key per call), answering whether a value fits. */
function fitsFor(schema: JsonSchema) {
  const key = `spec:${cacheSeq++}`;
  return (value: unknown) => checkProperties(key, schema, value).length === 0;
}
/** ajv errors for `value` against `schema` (fresh cache key per call). */
function errorsFor(schema: JsonSchema, value: unknown) {
  const errors = checkProperties(`spec:${cacheSeq++}`, schema, value);
  expect(errors.length).toBeGreaterThan(0);
  return errors;
}

describe('type schemas', () => {
  describe('assertValidSchema', () => {
    it.each<[string, unknown]>([
      ['empty object', {}],
      ['object type with properties', { type: 'object', properties: { title: str, n: { type: 'integer', minimum: 0 } }, required: ['title'] }],
      ['searchable annotation', { properties: { secret: { type: 'string', searchable: false } } }],
      ['formats', { properties: { url: { type: 'string', format: 'uri' }, at: { type: 'string', format: 'date-time' } } }],
      ['additionalProperties false', { type: 'object', properties: { a: str }, additionalProperties: false }],
    ])('accepts %s', (_, schema) => {
      expect(thrownApiError(() => assertValidSchema(schema))).toBeUndefined();
    });

    it.each<[string, unknown]>([
      ['null', null],
      ['a string', 'object'],
      ['an array', [{ type: 'object' }]],
      ['a non-object root type', { type: 'string' }],
      ['an array root type', { type: 'array' }],
      ['properties that is not an object', { properties: [] }],
      ['properties null', { properties: null }],
      ['an unknown JSON type', { properties: { a: { type: 'nonsense' } } }],
      ['a non-boolean searchable', { properties: { a: { type: 'string', searchable: 'no' } } }],
      ['a malformed required', { properties: { a: str }, required: 'a' }],
      ['a negative minLength', { properties: { a: { type: 'string', minLength: -1 } } }],
    ])('rejects %s with 400 invalid_schema', (_, schema) => {
      const err = thrownApiError(() => assertValidSchema(schema));
      expect(err).toBeInstanceOf(ApiError);
      expect(err!.status).toBe(400);
      expect(err!.code).toBe('invalid_schema');
    });

    describe('"searchable" stands only where search honours it', () => {
      const secret = { type: 'string', searchable: false };
      it.each<[string, JsonSchema]>([
        ['a property', { properties: { pin: secret } }],
        ['a nested property', { properties: { meta: { type: 'object', properties: { pin: secret } } } }],
        ['additionalProperties, at the root and nested', { additionalProperties: secret, properties: { m: { additionalProperties: { searchable: false } } } }],
        ['single-schema items', { properties: { list: { type: 'array', items: { type: 'object', properties: { pin: secret } } } } }],
        ['a property whose schema is a $ref', { definitions: { s: { type: 'string' } }, properties: { pin: { $ref: '#/definitions/s', searchable: false } } }],
        ['true, where it may stand', { properties: { pin: { type: 'string', searchable: true } } }],
      ])('is accepted on %s', (_, schema) => {
        expect(thrownApiError(() => assertValidSchema(schema))).toBeUndefined();
      });

      it.each<[string, JsonSchema, string[]]>([
        ['a $ref\'d definition', { definitions: { s: secret }, properties: { pin: { $ref: '#/definitions/s' } } }, ['/definitions/s/searchable']],
        ['$defs', { $defs: { s: secret }, properties: {} }, ['/$defs/s/searchable']],
        ['allOf', { properties: { pin: { allOf: [secret] } } }, ['/properties/pin/allOf/0/searchable']],
        ['anyOf at the root', { anyOf: [{ properties: { pin: secret } }] }, ['/anyOf/0/properties/pin/searchable']],
        ['patternProperties', { patternProperties: { '^p': secret } }, ['/patternProperties/^p/searchable']],
        ['tuple-form items', { properties: { pair: { type: 'array', items: [secret, { type: 'string' }] } } }, ['/properties/pair/items/0/searchable']],
        ['if/then', { properties: { a: { if: { type: 'string' }, then: secret } } }, ['/properties/a/then/searchable']],
        ['propertyNames', { propertyNames: { searchable: false } }, ['/propertyNames/searchable']],
        ['the root', { searchable: false, properties: {} }, ['/searchable']],
        ['items at the root', { items: secret }, ['/items/searchable']],
        ['true as well', { properties: { pin: { anyOf: [{ type: 'string', searchable: true }] } } }, ['/properties/pin/anyOf/0/searchable']],
      ])('is refused on %s with 400 invalid_schema naming where', (_, schema, paths) => {
        const err = thrownApiError(() => assertValidSchema(schema));
        expect(err?.status).toBe(400);
        expect(err?.code).toBe('invalid_schema');
        expect((err!.details!.errors as Array<{ path: string; message: string }>).map((e) => e.path)).toEqual(paths);
        expect(err!.message).toContain('has no effect here');
      });

      it('must be a boolean at any depth where it stands', () => {
        const err = thrownApiError(() => assertValidSchema({ properties: { m: { properties: { pin: { type: 'string', searchable: 'no' } } } } }));
        expect(err?.details).toEqual({ errors: [{ path: '/properties/m/properties/pin/searchable', message: 'must be a boolean' }] });
      });

      it('is left alone in a stored schema checked again (submitted: false)', () => {
        const stored = { definitions: { s: secret }, properties: { pin: { allOf: [secret] } } };
        expect(thrownApiError(() => assertValidSchema(stored, false))).toBeUndefined();
        expect(thrownApiError(() => assertValidSchema(stored))?.code).toBe('invalid_schema');
      });
    });
  });

  describe('assertUsableSchema', () => {
    const refusal = (schema: JsonSchema) => {
      const err = thrownApiError(() => assertUsableSchema({ type: 'object', ...schema }));
      expect(err?.code).toBe('invalid_schema');
      return (err!.details!.errors as Array<{ path: string }>).map((e) => e.path);
    };

    it.each<[string, JsonSchema, string[]]>([
      ['$async', { properties: { a: { $async: true } } }, ['/properties/a/$async']],
      ['$id', { $id: 'urn:x' }, ['/$id']],
      ['an id under a keyword, not a property name', { properties: { id: { id: 'urn:x' } } }, ['/properties/id/id']],
      ['$anchor', { $defs: { a: { $anchor: 'a' } } }, ['/$defs/a/$anchor']],
      ['a $ref to another document', { properties: { a: { $ref: 'urn:x' } } }, ['/properties/a/$ref']],
      ['a $ref to nothing', { properties: { a: { $ref: '#/definitions/missing' } } }, ['/properties/a/$ref']],
      ['a $ref to a definition map', { definitions: {}, properties: { a: { $ref: '#/definitions' } } }, ['/properties/a/$ref']],
      ['a $ref into data', { examples: [{ $async: true }], properties: { a: { $ref: '#/examples/0' } } }, ['/properties/a/$ref']],
      ['a $ref that is no URI', { properties: { a: { $ref: '#/%' } } }, ['/properties/a/$ref']],
      ['uniqueItems over objects', { properties: { a: { type: 'array', items: { type: 'object' }, uniqueItems: true } } }, ['/properties/a/uniqueItems']],
      ['uniqueItems with no items type', { properties: { a: { type: 'array', items: {}, uniqueItems: true } } }, ['/properties/a/uniqueItems']],
      ['a long enum', { properties: { a: { enum: Array.from({ length: 257 }, (_, i) => i) } } }, ['/properties/a/enum']],
      ['a long pattern', { patternProperties: { ['x'.repeat(513)]: {} } }, ['/patternProperties']],
      ['too many patterns', { properties: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`p${i}`, { pattern: `^${i}$` }])) }, ['/']],
      ['heavy patterns', { properties: { a: { pattern: '[^x]{1000}' }, b: { pattern: '.{1000}' } } }, ['/']],
      ['a same-value $ref cycle', { properties: { a: { $ref: '#/properties/b' }, b: { not: { $ref: '#/properties/a' } } } }, ['/properties/a']],
      ['a root that applies itself to itself', { allOf: [{ $ref: '#' }] }, ['/']],
      ['branches that multiply', { $defs: { x: { anyOf: Array.from({ length: 17 }, () => ({ $ref: '#/$defs/y' })) }, y: { anyOf: Array.from({ length: 16 }, () => ({ type: 'string' })) } }, properties: { a: { $ref: '#/$defs/x' } } }, ['/']],
      ['properties and patternProperties doubling at each level', { properties: { a: { $ref: '#' } }, patternProperties: { '^a$': { $ref: '#' } } }, ['/']],
      ['127 references to one 256-value enum, on every array element', { definitions: { e: enumOf(256) }, properties: { a: { type: 'array', items: refsToE(127) } } }, ['/']],
      ['four 256-value enums and a const on one value', { definitions: { e: enumOf(256) }, properties: { a: { ...refsToE(4), const: 0 } } }, ['/']],
    ])('refuses %s', (_, schema, paths) => {
      expect(refusal(schema)).toEqual(paths);
    });

    it('weighs each enum by its values: 127 references to a 256-value enum are within the bound on schemas, not on comparisons', () => {
      const err = thrownApiError(() => assertUsableSchema({ type: 'object', definitions: { e: enumOf(256) }, properties: { a: { type: 'array', items: refsToE(127) } } }));
      expect(err?.message).toMatch(/compared with up to 32512 enum values .*at most 1024/);
    });

    it.each<[string, JsonSchema]>([
      ['a tree', { properties: { children: { type: 'array', items: { $ref: '#' } } } }],
      ['properties named like keywords', { properties: { id: { type: 'string' }, $id: {}, $ref: { type: 'string' }, $async: {} } }],
      ['a reference to a definition', { definitions: { pos: { type: 'integer', minimum: 0 } }, properties: { a: { $ref: '#/definitions/pos' } } }],
      ['an escaped pointer', { $defs: { 'a/b': { type: 'string' }, '~': {} }, properties: { a: { $ref: '#/$defs/a~1b' }, b: { $ref: '#/$defs/%7E0' } } }],
      ['unused definitions that loop', { $defs: { a: { $ref: '#/$defs/a' } } }],
      ['uniqueItems over scalars', { properties: { a: { type: 'array', items: { type: ['string', 'null'] }, uniqueItems: true } } }],
      ['the limits themselves', { properties: { a: { enum: Array.from({ length: 256 }, (_, i) => i) }, b: { pattern: `^${'x'.repeat(510)}$` } } }],
      ['a property many schemas apply to, within the bound', { properties: { a: { anyOf: Array.from({ length: 255 }, () => ({ type: 'string' })) } } }],
      ['four 256-value enums on one value, the bound of enum comparisons', { definitions: { e: enumOf(256) }, properties: { a: { type: 'array', items: refsToE(4) } } }],
      ['a const in each of 255 schemas on one value', { properties: { a: { anyOf: Array.from({ length: 255 }, (_, i) => ({ const: i })) } } }],
      ['enums on different values, each within the bound', { definitions: { e: enumOf(256) }, properties: { a: refsToE(4), b: refsToE(4), c: { type: 'array', items: refsToE(4) } } }],
    ])('accepts %s', (_, schema) => {
      expect(thrownApiError(() => assertUsableSchema({ type: 'object', ...schema }))).toBeUndefined();
    });
  });

  describe('resolveSubtypeSchema', () => {
    const base: JsonSchema = {
      type: 'object',
      properties: { url: { type: 'string', format: 'uri' }, title: str, status: { type: 'string', enum: ['open', 'done', 'cancelled'] } },
      required: ['url'],
    };
    const parent = base;

    it('adds the child properties to the parent ones and keeps the parent required list', () => {
      const out = resolveSubtypeSchema(parent, { properties: { rating: { type: 'integer' } }, required: ['rating'] });
      expect(Object.keys(out.properties).sort()).toEqual(['rating', 'status', 'title', 'url']);
      expect(out.type).toBe('object');
      expect([...out.required].sort()).toEqual(['rating', 'url']);
      expect(out.properties.url).toEqual(parent.properties.url);
    });

    it('the parent required list survives a child that lists none or other ones', () => {
      expect(resolveSubtypeSchema(parent, { properties: {} }).required).toEqual(['url']);
      expect(resolveSubtypeSchema(parent, { required: ['title'] }).required.sort()).toEqual(['title', 'url']);
    });

    it('lets a child narrow a parent property: same type plus a pattern, or an enum subset', () => {
      const out = resolveSubtypeSchema(parent, {
        properties: { title: { type: 'string', maxLength: 10 }, status: { type: 'string', enum: ['open', 'done'] } },
      });
      expect(out.properties.title).toEqual({ type: 'string', maxLength: 10 });
      expect(out.properties.status).toEqual({ type: 'string', enum: ['open', 'done'] });
    });

    it('a narrowing that does not restate the type or enum keeps the parent type and enum', () => {
      const out = resolveSubtypeSchema(parent, {
        properties: { title: { maxLength: 10 }, status: { description: 'where it is' } },
      });
      expect(out.properties.title).toEqual({ type: 'string', maxLength: 10 });
      expect(out.properties.status).toEqual({ type: 'string', enum: ['open', 'done', 'cancelled'], description: 'where it is' });
    });

    it('lets a child narrow by integer under number, and by an enum of objects or arrays that is a subset, compared as JSON', () => {
      const shaped: JsonSchema = {
        type: 'object',
        properties: {
          n: { type: 'number' },
          point: { type: 'object', enum: [{ x: 1, y: 2 }, { x: 0, y: 0 }] },
          pair: { type: 'array', enum: [[1, 2], [3, 4]] },
          status: { type: 'string', enum: ['open', 'done'] },
        },
      };
      const out = resolveSubtypeSchema(shaped, {
        properties: { n: { type: 'integer' }, point: { enum: [{ y: 2, x: 1 }] }, pair: { enum: [[3, 4]] }, status: { const: 'open' } },
      });
      const fits = fitsFor(out);
      expect(fits({ n: 3, point: { x: 1, y: 2 }, pair: [3, 4], status: 'open' })).toBe(true);
      expect(fits({ n: 3.5 })).toBe(false);
      expect(fits({ status: 'done' })).toBe(false);
      // A nested property keeps its type too, when restated alike or narrowed.
      const nested: JsonSchema = { type: 'object', properties: { o: { type: 'object', properties: { x: { type: 'number' } } } } };
      expect(thrownApiError(() => resolveSubtypeSchema(nested, { properties: { o: { properties: { x: { type: 'integer', minimum: 0 }, y: str } } } }))).toBeUndefined();
      // So do array elements, narrowed or given properties of their own.
      const listed: JsonSchema = { type: 'object', properties: { l: { type: 'array', items: { type: ['number', 'object'], enum: [1, 2, { a: 1 }] } } } };
      expect(thrownApiError(() => resolveSubtypeSchema(listed, { properties: { l: { items: { type: 'integer', enum: [2] } } } }))).toBeUndefined();
      expect(thrownApiError(() => resolveSubtypeSchema(listed, { properties: { l: { items: { properties: { a: { type: 'integer' } } } } } }))).toBeUndefined();
    });

    it.each<[string, JsonSchema, string]>([
      ['changing a property type', { properties: { title: { type: 'integer' } } }, 'title'],
      ['widening a property type', { properties: { title: { type: ['string', 'null'] } } }, 'title'],
      ['widening an enum', { properties: { status: { type: 'string', enum: ['open', 'done', 'reopened'] } } }, 'status'],
      ['changing a nested property type', { properties: { meta: { properties: { x: { type: 'number' } } } } }, 'meta.x'],
      ['an enum of values outside the parent type, without restating it', { properties: { title: { enum: [1, 2] } } }, 'title'],
      ['a const outside the parent enum', { properties: { status: { const: 'z' } } }, 'status'],
      ['an object enum that is no subset', { properties: { point: { enum: [{ x: 1, y: 3 }] } } }, 'point'],
      ['forbidding a property the parent requires', { properties: { url: false } }, 'url'],
      ['forbidding a nested property the parent requires', { properties: { meta: { properties: { x: false } } } }, 'meta.x'],
      ['changing the type of array elements', { properties: { labels: { items: { type: 'integer' } } } }, 'labels[]'],
      ['widening the enum of array elements', { properties: { labels: { items: { enum: ['a', 'z'] } } } }, 'labels[]'],
      ['changing a property type inside array elements', { properties: { spans: { items: { properties: { from: { type: 'string' } } } } } }, 'spans[].from'],
      ['changing the type of nested array elements', { properties: { grid: { items: { items: { type: 'string' } } } } }, 'grid[][]'],
    ])('rejects %s with 400 inheritance_violation naming the field', (_, child, field) => {
      const fuller: JsonSchema = {
        ...base,
        properties: {
          ...base.properties,
          meta: { type: 'object', properties: { x: { type: 'string' } }, required: ['x'] },
          point: { type: 'object', enum: [{ x: 1, y: 2 }, { x: 0, y: 0 }] },
          labels: { type: 'array', items: { type: 'string', enum: ['a', 'b'] } },
          spans: { type: 'array', items: { type: 'object', properties: { from: { type: 'integer' } } } },
          grid: { type: 'array', items: { type: 'array', items: { type: 'number' } } },
        },
      };
      const err = thrownApiError(() => resolveSubtypeSchema(fuller, child));
      expect(err?.status).toBe(400);
      expect(err?.code).toBe('inheritance_violation');
      expect((err?.details?.fields as Array<{ field: string }>).map((f) => f.field)).toContain(field);
    });

    describe('keeps where the parent says "searchable": false, as search reads the resolved properties alone', () => {
      const hidden = { type: 'string', searchable: false };
      const vault: JsonSchema = {
        type: 'object',
        properties: { pin: hidden, meta: { type: 'object', properties: { code: hidden, label: str } }, codes: { type: 'array', items: hidden } },
        additionalProperties: hidden,
      };

      it.each<[string, JsonSchema, (out: JsonSchema) => unknown]>([
        ['a subtype saying searchable: true', { properties: { pin: { searchable: true } } }, (o) => o.properties.pin],
        ['a restated nested property', { properties: { meta: { type: 'object', properties: { code: { type: 'string', maxLength: 5 } } } } }, (o) => o.properties.meta.properties.code],
        ['restated nested properties that leave it out', { properties: { meta: { type: 'object', properties: { label: str } } } }, (o) => o.properties.meta.properties.code],
        ['restated array items', { properties: { codes: { type: 'array', items: { type: 'string', minLength: 1 } } } }, (o) => o.properties.codes.items],
        ['a restated array without items', { properties: { codes: { type: 'array', maxItems: 3 } } }, (o) => o.properties.codes.items],
        ['its own additionalProperties', { additionalProperties: { type: 'string', maxLength: 9 } }, (o) => o.additionalProperties],
        ['a property the parent has not, which its additionalProperties kept out', { properties: { secret: { type: 'string' } } }, (o) => o.properties.secret],
        ['such a property given as true', { properties: { secret: true } }, (o) => o.properties.secret],
      ])('against %s', (_, child, at) => {
        expect(at(resolveSubtypeSchema(vault, child))).toMatchObject({ searchable: false });
      });

      it('on a nested property the parent has not, under its nested additionalProperties', () => {
        const closedOff: JsonSchema = { type: 'object', properties: { o: { type: 'object', additionalProperties: { searchable: false } } } };
        const out = resolveSubtypeSchema(closedOff, { properties: { o: { properties: { pin: { type: 'string' } } } } });
        expect(out.properties.o.properties.pin).toEqual({ type: 'string', searchable: false });
      });

      it('under an additionalProperties that keeps out only what is nested in it', () => {
        const deep: JsonSchema = { type: 'object', properties: { o: { type: 'object', additionalProperties: { type: 'object', properties: { code: hidden } } } } };
        const out = resolveSubtypeSchema(deep, { properties: { o: { properties: { pin: { type: 'object', properties: { label: str } } } } } });
        expect(out.properties.o.properties.pin).toEqual({ type: 'object', properties: { label: str, code: { searchable: false } } });
        // And where the parent's additionalProperties is silent, a new property is left as written.
        expect(resolveSubtypeSchema(parent, { properties: { rating: { type: 'integer' } } }).properties.rating).toEqual({ type: 'integer' });
      });

      it('and changes nothing that validates', () => {
        const out = resolveSubtypeSchema(vault, { properties: { meta: { type: 'object', properties: { label: str }, additionalProperties: { type: 'string', maxLength: 2 } } } });
        expect(out.properties.meta.properties.code).toEqual({ type: 'string', maxLength: 2, searchable: false });
        expect(resolveSubtypeSchema(parent, { properties: { title: { maxLength: 3 } } }).properties).toEqual({ ...parent.properties, title: { type: 'string', maxLength: 3 } });
      });
    });

    it('a parent without additional properties admits no new child properties', () => {
      const closed = { ...parent, additionalProperties: false };
      expect(thrownApiError(() => resolveSubtypeSchema(closed, { properties: { extra: str } }))?.code).toBe('inheritance_violation');
      expect(thrownApiError(() => resolveSubtypeSchema(closed, { properties: { title: { type: 'string', maxLength: 3 } } }))).toBeUndefined();
    });

    it('a parent without additional properties cannot be opened up by a subtype', () => {
      const closed = { ...parent, additionalProperties: false };
      for (const open of [true, {}, { type: 'string' }]) {
        expect(thrownApiError(() => resolveSubtypeSchema(closed, { additionalProperties: open }))?.code).toBe('inheritance_violation');
      }
      expect(thrownApiError(() => resolveSubtypeSchema(closed, { additionalProperties: false }))).toBeUndefined();
    });

    it('a subtype only narrows: its items also satisfy every rule of the parent, whatever keywords it restates', () => {
      const strict: JsonSchema = { type: 'object', properties: { title: { type: 'string', maxLength: 5, pattern: '^a' }, n: { type: 'integer', maximum: 10 } } };
      const loose = resolveSubtypeSchema(strict, { properties: { title: { maxLength: 500, pattern: '.*' }, n: { maximum: 1000 } } });
      const fits = fitsFor(loose);
      expect(fits({ title: 'abc', n: 3 })).toBe(true);
      expect(fits({ title: 'zzzzzzzzzz' })).toBe(false);
      expect(fits({ n: 500 })).toBe(false);
      // Two generations deep: the grandparent's rules hold too.
      const grandchild = resolveSubtypeSchema(loose, { properties: { extra: str } });
      expect(fitsFor(grandchild)({ title: 'zzzzzzzzzz', extra: 'x' })).toBe(false);
      // A parent stored with its own $id (refused now, kept by older types): the subtype's copy drops it.
      const identified = resolveSubtypeSchema({ ...strict, $id: 'https://example.com/strict' }, {});
      expect(fitsFor(identified)({ title: 'abc' })).toBe(true);
    });

    it("the parent's $refs keep meaning the parent's definitions, whatever the subtype defines", () => {
      const coded: JsonSchema = { type: 'object', $defs: { code: { type: 'string', pattern: '^[A-Z]{3}$' } }, properties: { code: { $ref: '#/$defs/code' }, self: { $ref: '#' } } };
      const out = resolveSubtypeSchema(coded, { $defs: { code: { type: 'string' }, own: { type: 'integer' } }, properties: { n: { $ref: '#/$defs/own' } } });
      expect(out.allOf[0].properties).toEqual({ code: { $ref: '#/allOf/0/$defs/code' }, self: { $ref: '#/allOf/0' } });
      expect(out.properties.code).toEqual({ $ref: '#/allOf/0/$defs/code' });
      expect(Object.keys(out.$defs).sort()).toEqual(['code', 'own']);
      const fits = fitsFor(out);
      expect(fits({ code: 'ABC', n: 1 })).toBe(true);
      expect(fits({ code: 'abc' })).toBe(false);
      expect(fits({ n: 'one' })).toBe(false);
      expect(fits({ self: { code: 'abc' } })).toBe(false);
      // A generation further down, after the grandchild's own allOf entries, the pointers move with the copy.
      const grandchild = resolveSubtypeSchema(out, { allOf: [{ required: ['n'] }], properties: { m: { $ref: '#/allOf/0' } } });
      expect(grandchild.allOf[1].allOf[0].properties.code).toEqual({ $ref: '#/allOf/1/allOf/0/$defs/code' });
      const fitsGrandchild = fitsFor(grandchild);
      expect(fitsGrandchild({ code: 'abc', n: 1 })).toBe(false);
      expect(fitsGrandchild({ code: 'ABC', n: 1, m: {} })).toBe(false);
      expect(fitsGrandchild({ code: 'ABC', n: 1, m: { n: 2 } })).toBe(true);
    });

    it('a property the subtype sets to false is forbidden; one set to true keeps the parent schema', () => {
      const out = resolveSubtypeSchema(parent, { properties: { title: false, url: true } });
      expect(out.properties.title).toBe(false);
      expect(out.properties.url).toEqual(parent.properties.url);
      expect(fitsFor(out)({ url: 'https://example.com', title: 'x' })).toBe(false);
      expect(fitsFor(out)({ url: 'https://example.com' })).toBe(true);
    });

    it('resolved schemas validate items: parent-required enforced for the subtype', () => {
      const out = resolveSubtypeSchema(parent, { properties: { rating: { type: 'integer' } } });
      const fits = fitsFor(out);
      expect(fits({ url: 'https://example.com', rating: 3 })).toBe(true);
      expect(fits({ rating: 3 })).toBe(false);
      expect(fits({ url: 'https://example.com', rating: 'x' })).toBe(false);
    });
  });

  describe('checkProperties', () => {
    it('lists every problem of small properties, only the first of large ones', () => {
      const schema = { type: 'object', properties: { list: { type: 'array', items: { anyOf: [{ const: 1 }, { const: 2 }] } }, n: { type: 'integer' } } };
      const key = `spec:${cacheSeq++}`;
      const fn = (value: unknown) => checkProperties(key, schema, value);
      expect(new Set(fn({ list: [3, 4], n: 'x' }).map((e) => e.instancePath))).toEqual(new Set(['/list/0', '/list/1', '/n']));
      // Every failed branch of every element is an error object: millions, for a 1 MB array.
      expect(fn({ list: Array.from({ length: 5000 }, () => 3) }).length).toBeLessThanOrEqual(3);
    });

    it('reads an item\'s own properties only: names Object.prototype carries are neither there nor checked unless sent', () => {
      const fits = fitsFor({ type: 'object', required: ['toString'], properties: { constructor: { type: 'string' }, toString: { type: 'string' } } });
      expect(fits({})).toBe(false);
      expect(fits({ toString: 'a' })).toBe(true);
      expect(fits({ toString: 'a', constructor: 'b' })).toBe(true);
      expect(fits({ toString: 'a', constructor: 1 })).toBe(false);
    });

    it('checks format url in linear time (formats.ts), answering as ajv-formats would: a 200 kB adversarial value is refused', () => {
      // Never with ajv-formats' own expression, which backtracks in time quadratic in the value's length.
      const expression = jest.spyOn(fullFormats.url as RegExp, 'test');
      const fits = fitsFor({ type: 'object', properties: { x: { type: 'string', format: 'url' } } });
      expect(fits({ x: 'https://user:pw@example.com:8080/a' })).toBe(true);
      expect(fits({ x: 'http://10.0.0.1/' })).toBe(false);
      expect(expression).not.toHaveBeenCalled();
      expression.mockRestore();
      // ajv-formats' expression took 7 s over a third of this, and about a minute over it all.
      expect(fits({ x: `http://[${'1:'.repeat(100_000)}]` })).toBe(false);
    });

    it('answers invalid_schema for a schema it cannot use, and never takes a Promise for valid', () => {
      const broken = `spec:${cacheSeq++}`;
      expect(thrownApiError(() => checkProperties(broken, { type: 'object', properties: { a: { $ref: '#/nowhere' } } }, { a: 1 }))?.code).toBe('invalid_schema');
      const async = { $async: true, type: 'object', properties: { a: { type: 'integer' } } };
      for (const a of [1, 'x']) expect(thrownApiError(() => checkProperties(`spec:${cacheSeq++}`, async, { a }))?.code).toBe('invalid_schema');
    });
  });

  describe('the validator cache', () => {
    /** A schema of `n` integer properties named after `tag` (about 50 bytes of JSON each). */
    const wide = (tag: string, n: number): JsonSchema => ({
      type: 'object',
      properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`${tag}_${i}`, { type: 'integer', minimum: 0, maximum: 1000 }])),
    });

    it('holds at most its budget of estimated bytes, dropping the least recently used first, and validators compile again when their type comes back', () => {
      const budget = 2 * 1024 * 1024;
      const was = setValidatorCacheBudget(budget);
      try {
        const schemas = Array.from({ length: 12 }, (_, i) => wide(`f${i}`, 100)); // some 5 KB of JSON each
        const fits = (i: number, value: unknown) => checkProperties(`budget:${i}:1`, schemas[i], value).length === 0;
        for (let i = 0; i < schemas.length; i++) {
          expect(fits(i, { [`f${i}_0`]: 1 })).toBe(true);
          const quick = validatorCacheUse(`budget:${i}:`).bytes;
          expect(fits(i, { [`f${i}_0`]: 'x' })).toBe(false);
          // The validator listing every error weighs as much again.
          expect(validatorCacheUse(`budget:${i}:`).bytes).toBeGreaterThan(1.9 * quick);
          expect(fits(0, { f0_0: 1 })).toBe(true); // type 0 stays in use
          expect(validatorCacheUse().bytes).toBeLessThanOrEqual(budget);
        }
        // Both validators of one such type weigh about 550 KB: a bound on the count alone kept all 12.
        expect(validatorCacheUse('budget:').entries).toBeLessThanOrEqual(3);
        expect(validatorCacheUse('budget:0:').entries).toBe(1);
        expect(validatorCacheUse('budget:1:').entries).toBe(0);
        expect([fits(1, { f1_0: 1 }), fits(1, { f1_0: 'x' })]).toEqual([true, false]);
      } finally {
        setValidatorCacheBudget(was);
      }
    });

    it('forgets the entries of a type deleted or changed (keys under its tenant:name:), and no one else\'s', () => {
      const schema = wide('a', 5);
      for (const key of ['t1:acme.a:1:100', 't1:acme.a:2:200', 't1:acme.ab:1:100', 't2:acme.a:1:100']) {
        expect(checkProperties(key, schema, { a_0: 'x' }).length).toBeGreaterThan(0);
      }
      const before = validatorCacheUse();
      const forgotten = validatorCacheUse('t1:acme.a:');
      expect(forgotten.entries).toBe(2);
      forgetValidators('t1:acme.a:');
      expect(validatorCacheUse('t1:acme.a:')).toEqual({ entries: 0, bytes: 0 });
      expect(validatorCacheUse()).toEqual({ entries: before.entries - 2, bytes: before.bytes - forgotten.bytes });
      expect(validatorCacheUse('t1:acme.ab:').entries).toBe(1);
      expect(validatorCacheUse('t2:acme.a:').entries).toBe(1);
      // A write still holding the old schema compiles it again.
      expect(checkProperties('t1:acme.a:2:200', schema, { a_0: 1 })).toEqual([]);
    });
  });

  describe('validatorFor: long text under patterns is checked in a worker, within a time limit', () => {
    const schema = { type: 'object', properties: { code: { type: 'string', pattern: '^[a-z]+$' }, slow: { type: 'string', pattern: '(.{1,1000})x' } } };
    const validate = validatorFor(`spec:${cacheSeq++}`, schema);

    it('answers as the main thread would, fitting or not, for values long enough to go to the worker', async () => {
      const long = 'a'.repeat(300);
      expect(await validate({ code: long })).toEqual([]);
      const errors = await validate({ code: `${long}1` });
      expect(errors.map((e) => [e.instancePath, e.keyword])).toEqual([['/code', 'pattern']]);
      expect(errors).toEqual(checkProperties(`spec:${cacheSeq++}`, schema, { code: `${long}1` }));
    });

    it('refuses with invalid_schema a check that runs past the limit, and goes on checking afterwards', async () => {
      // Stopped, not waited out: the match alone takes minutes, past the test's own timeout.
      await expect(validate({ slow: 'é'.repeat(50_000) })).rejects.toMatchObject({ status: 400, code: 'invalid_schema' });
      expect(await validate({ code: 'a'.repeat(400) })).toEqual([]);
    });

    it('refuses a check that waited too long behind slow ones 503, to be retried, not invalid_schema', async () => {
      const slow = () => validate({ slow: 'é'.repeat(50_000) });
      const results = await Promise.allSettled([slow(), slow(), slow(), slow(), slow()]);
      const codes = results.map((r) => (r.status === 'rejected' ? (r.reason as ApiError).code : 'fitted'));
      expect([codes[0], codes[4]]).toEqual(['invalid_schema', 'service_unavailable']);
      expect(codes.every((c) => c === 'invalid_schema' || c === 'service_unavailable')).toBe(true);
    }, 15_000);

    it('takes checks in turn from each tenant: one tenant\'s flood of slow checks does not hold up another\'s', async () => {
      const flooding = validatorFor(`spec:${cacheSeq++}`, schema, 'tenant-a');
      const other = validatorFor(`spec:${cacheSeq++}`, schema, 'tenant-b');
      expect(await other({ code: 'a'.repeat(400) })).toEqual([]); // a worker ready, as in a service that has run a while
      const settled: string[] = [];
      const outcome = (who: string) => [(r: unknown) => (settled.push(who), r), (err: ApiError) => (settled.push(who), err.code)] as const;
      const flood = Array.from({ length: 5 }, () => flooding({ slow: 'é'.repeat(50_000) }).then(...outcome('flood')));
      const answer = await other({ code: 'a'.repeat(400) }).then(...outcome('other'));
      await Promise.all(flood);
      // Its turn came right after the flood's first check: in line behind all five it would be
      // answered last. On a loaded machine even that one turn may outlast the wait allowed in
      // line (then 503, retry), so the order is what is checked, and the answer only as one of two.
      expect(settled.indexOf('other')).toBeLessThanOrEqual(1);
      expect([[], 'service_unavailable']).toContainEqual(answer);
      expect(new Set(await Promise.all(flood))).toEqual(new Set(['invalid_schema', 'service_unavailable']));
    }, 15_000);

    it('holds a batch to one budget for all its checks: past it, even values that fit are refused', async () => {
      const codes = await withPatternBudget(1500, async () => {
        const outcomes: string[] = [];
        for (const properties of [{ slow: 'é'.repeat(50_000) }, { slow: 'é'.repeat(50_000) }, { code: 'a'.repeat(400) }]) {
          outcomes.push(await validate(properties).then(() => 'fitted', (err: ApiError) => err.code));
        }
        return outcomes;
      });
      expect(codes).toEqual(['invalid_schema', 'invalid_schema', 'invalid_schema']);
      // Outside the batch, the same value fits.
      expect(await validate({ code: 'a'.repeat(400) })).toEqual([]);
    }, 15_000);

    it('weighs a pattern as often as it can apply to one value: 255 copies of one send 50 KB to the worker, as one heavy pattern does', async () => {
      // Under a budget already spent, a check for the worker is refused at once; one made in place is not.
      const inPlace = (v: PropertiesValidator, properties: Record<string, unknown>) => withPatternBudget(0, () => v(properties)).then(() => true, () => false);
      const value = `${'a'.repeat(49_990)}x`;
      const copies = validatorFor(`spec:${cacheSeq++}`, { type: 'object', properties: { a: { allOf: Array.from({ length: 255 }, () => ({ pattern: 'x' })) } } });
      expect(await inPlace(copies, { a: value })).toBe(false);
      // Through $refs and inherited copies alike.
      const refs = { type: 'object', definitions: { x: { pattern: 'x' } }, properties: { a: { allOf: Array.from({ length: 255 }, () => ({ $ref: '#/definitions/x' })) } } };
      expect(await inPlace(validatorFor(`spec:${cacheSeq++}`, refs), { a: value })).toBe(false);
      // One application of it stays in place, and so do patterns on different values, each weighed apart.
      expect(await inPlace(validatorFor(`spec:${cacheSeq++}`, { type: 'object', properties: { a: { pattern: 'x' } } }), { a: value })).toBe(true);
      const apart = { type: 'object', properties: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`p${i}`, { pattern: `x${i}` }])) };
      expect(await inPlace(validatorFor(`spec:${cacheSeq++}`, apart), { p0: 'x0'.repeat(2000) })).toBe(true);
      // 255 copies keep in place what is short enough for them (100,000 / 256 characters).
      expect(await inPlace(copies, { a: 'a'.repeat(300) })).toBe(true);
    });

    it('does not count compiling a validator in the worker against the check\'s time limit', async () => {
      // Within the schema limits, some 60 KB with nine \p{L} patterns: compiling it took over a
      // second in the worker (2 s in plain node), which the check's own second used to include.
      const properties: Record<string, unknown> = {};
      for (let i = 0; i < 1500; i++) properties[`f${i}`] = i % 2 ? { type: 'string', maxLength: 50 } : { type: 'integer', minimum: 0 };
      for (let i = 0; i < 9; i++) properties[`p${i}`] = { type: 'string', pattern: `h${i}\\p{L}` };
      const heavy = validatorFor(`spec:${cacheSeq++}`, { type: 'object', properties }, 'tenant-heavy');
      expect(await heavy({ p0: `h0é${'x'.repeat(200_000)}` })).toEqual([]);
    }, 30_000);
  });

  describe('propertyIssues', () => {
    const schema: JsonSchema = {
      type: 'object',
      properties: {
        url: { type: 'string', format: 'uri' },
        title: str,
        n: { type: 'integer', maximum: 5 },
        meta: { type: 'object', properties: { inner: str, deep: { type: 'integer' } }, required: ['inner'] },
      },
      required: ['url'],
    };

    it('separates missing required properties from invalid ones and names each field', () => {
      const { missing, invalid } = propertyIssues(errorsFor(schema, { title: 5, n: 9 }));
      expect(missing).toEqual(['url']);
      expect(invalid.map((i) => i.field).sort()).toEqual(['n', 'title']);
      for (const i of invalid) expect(typeof i.message).toBe('string');
    });

    it('uses dotted paths for nested fields, missing or invalid', () => {
      const { missing, invalid } = propertyIssues(errorsFor(schema, { url: 'https://x.y', meta: { deep: 'no' } }));
      expect(missing).toEqual(['meta.inner']);
      expect(invalid.map((i) => i.field)).toEqual(['meta.deep']);
    });

    it('a format error names the field', () => {
      const { missing, invalid } = propertyIssues(errorsFor(schema, { url: 'not a uri' }));
      expect(missing).toEqual([]);
      expect(invalid.map((i) => i.field)).toEqual(['url']);
    });

    it('a key refused by propertyNames is named, each one, with what is wrong with its name', () => {
      const named = { type: 'object', propertyNames: { pattern: '^[a-z]+$' }, properties: { meta: { type: 'object', propertyNames: { maxLength: 2 } } } };
      const { invalid } = propertyIssues(errorsFor(named, { A: 1, b: 2, C: 3, meta: { abc: 1, ok: 2 } }));
      expect(invalid).toEqual([
        { field: 'A', message: 'property name must match pattern "^[a-z]+$"' },
        { field: 'A', message: 'property name must be valid' },
        { field: 'C', message: 'property name must match pattern "^[a-z]+$"' },
        { field: 'C', message: 'property name must be valid' },
        { field: 'meta.abc', message: 'property name must NOT have more than 2 characters' },
        { field: 'meta.abc', message: 'property name must be valid' },
      ]);
    });

    it('an additional property is named by its own name', () => {
      const closed = { type: 'object', properties: { a: str }, additionalProperties: false };
      const { invalid } = propertyIssues(errorsFor(closed, { a: 'x', stray: 1 }));
      expect(invalid.map((i) => i.field)).toEqual(['stray']);
    });

    it('no errors, no issues', () => {
      expect(propertyIssues([])).toEqual({ missing: [], invalid: [] });
    });
  });

  describe('resolveMergePolicy', () => {
    it('defaults every property to manual and keeps the given policies', () => {
      const s = { properties: { title: str, body: str, tags: str } };
      expect(resolveMergePolicy(s, { body: 'client_wins' })).toEqual({ title: 'manual', body: 'client_wins', tags: 'manual' });
    });
  });
});
