import { thrownApiError } from '../../test/support/thrown';
import { ApiError } from '../common/api-error';
import { assertValidSchema, JsonSchema, propertyIssues, resolveMergePolicy, resolveSubtypeSchema, validatorFor } from './type-schema';

const str = { type: 'string' };
let cacheSeq = 0;
/** ajv errors for `value` against `schema` (fresh cache key per call). */
function errorsFor(schema: JsonSchema, value: unknown) {
  const fn = validatorFor(`spec:${cacheSeq++}`, schema);
  expect(fn(value)).toBe(false);
  return fn.errors ?? [];
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
      ['an uncompilable $ref', { properties: { a: { $ref: '#/definitions/missing' } } }],
    ])('rejects %s with 400 invalid_schema', (_, schema) => {
      const err = thrownApiError(() => assertValidSchema(schema));
      expect(err).toBeInstanceOf(ApiError);
      expect(err!.status).toBe(400);
      expect(err!.code).toBe('invalid_schema');
    });
  });

  describe('resolveSubtypeSchema', () => {
    const parent: JsonSchema = {
      type: 'object',
      properties: { url: { type: 'string', format: 'uri' }, title: str, status: { type: 'string', enum: ['open', 'done', 'cancelled'] } },
      required: ['url'],
    };

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

    it.each<[string, JsonSchema, string]>([
      ['changing a property type', { properties: { title: { type: 'integer' } } }, 'title'],
      ['widening a property type', { properties: { title: { type: ['string', 'null'] } } }, 'title'],
      ['widening an enum', { properties: { status: { type: 'string', enum: ['open', 'done', 'reopened'] } } }, 'status'],
    ])('rejects %s with 400 inheritance_violation naming the field', (_, child, field) => {
      const err = thrownApiError(() => resolveSubtypeSchema(parent, child));
      expect(err?.status).toBe(400);
      expect(err?.code).toBe('inheritance_violation');
      expect((err?.details?.fields as Array<{ field: string }>).map((f) => f.field)).toContain(field);
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
      const fn = validatorFor(`spec:${cacheSeq++}`, loose);
      expect(fn({ title: 'abc', n: 3 })).toBe(true);
      expect(fn({ title: 'zzzzzzzzzz' })).toBe(false);
      expect(fn({ n: 500 })).toBe(false);
      // Two generations deep: the grandparent's rules hold too.
      const grandchild = resolveSubtypeSchema(loose, { properties: { extra: str } });
      expect(validatorFor(`spec:${cacheSeq++}`, grandchild)({ title: 'zzzzzzzzzz', extra: 'x' })).toBe(false);
      // A parent with its own $id: the copy the subtype carries drops it, so the schema compiles.
      const identified = resolveSubtypeSchema({ ...strict, $id: 'https://example.com/strict' }, {});
      expect(validatorFor(`spec:${cacheSeq++}`, identified)({ title: 'abc' })).toBe(true);
    });

    it('resolved schemas validate items: parent-required enforced for the subtype', () => {
      const out = resolveSubtypeSchema(parent, { properties: { rating: { type: 'integer' } } });
      const fn = validatorFor(`spec:${cacheSeq++}`, out);
      expect(fn({ url: 'https://example.com', rating: 3 })).toBe(true);
      expect(fn({ rating: 3 })).toBe(false);
      expect(fn({ url: 'https://example.com', rating: 'x' })).toBe(false);
    });
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
