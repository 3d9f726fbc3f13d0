/**
 * Types over HTTP: core types are listed and immutable; tenant types are created with
 * validated JSON Schemas, inherit from a parent without contradicting it, carry merge
 * policies, can be deleted only while unused (changes of types in use: type-evolution.e2e-spec.ts),
 * are admin-only to write and are tenant-scoped; and a
 * schema can neither reach past its tenant nor harm validation for others (the limits).
 */
import { randomUUID } from 'node:crypto';
import { validatorCacheUse } from '../src/types/compiled-validators';
import { TypeCatalogService } from '../src/types/type-catalog';
import { Api, api, expectError, expectStatus, RFC3339 } from './items/helpers';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { appBehindProxy, redisUp } from './support/behind-proxy';
import { expectLocation, expectReplayed } from './support/created';
import { badFields } from './support/envelope';

describe('types', () => {
  let t: TestApp;
  let admin: Api;
  let adminKey: string;
  let tenantId: string;

  beforeAll(async () => {
    t = await startApp();
    ({ key: adminKey, tenantId } = await bootstrapAdmin(t));
    admin = api(t, adminKey);
  });

  /** Stores a type as an older version of the service could have, past today's checks. */
  async function storeOldType(tenant: string, name: string, schema: Record<string, unknown>): Promise<void> {
    await t.sql(
      `INSERT INTO item_types (tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at)
       VALUES ($1, $2, NULL, $3, $3, '{}', false, 1, now(), now())`,
      [tenant, name, { type: 'object', ...schema }],
    );
  }
  /** The JSON pointers an invalid_schema error names. */
  const refusedAt = (res: { body: any }) => expectError(res as never, 400, 'invalid_schema').details!.errors.map((e: { path: string }) => e.path);
  afterAll(() => t?.close());

  /** The names of every page of GET /types with `query`, walked through next_cursor, and each page's size. */
  async function walk(as: Api, query: Record<string, string | number> = {}): Promise<{ names: string[]; sizes: number[] }> {
    const names: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await as.get('/types', { ...query, ...(cursor ? { cursor } : {}) });
      expectStatus(res, 200);
      expect(Object.keys(res.body).sort()).toEqual(['next_cursor', 'types']);
      sizes.push(res.body.types.length);
      names.push(...res.body.types.map((ty: any) => ty.name));
      cursor = res.body.next_cursor;
      expect(cursor === null || typeof cursor === 'string').toBe(true);
    } while (cursor && sizes.length < 50);
    return { names, sizes };
  }

  const recipeSchema = {
    type: 'object',
    properties: { title: { type: 'string' }, servings: { type: 'integer', minimum: 1 }, cuisine: { type: 'string', enum: ['it', 'fr', 'jp'] } },
    required: ['title'],
  };

  describe('core types', () => {
    it('are listed with core: true, including core.note and core.bookmark', async () => {
      const res = await admin.get('/types');
      expectStatus(res, 200);
      const byName = new Map<string, any>(res.body.types.map((ty: any) => [ty.name, ty]));
      for (const name of ['core.note', 'core.bookmark']) {
        expect(byName.get(name)).toMatchObject({ name, core: true, parent: null });
      }
      expect(Object.keys(byName.get('core.note').schema.properties).sort()).toEqual(expect.arrayContaining(['body', 'title']));
      expect(byName.get('core.bookmark').schema.required).toEqual(['url']);
    });

    it('can be fetched by name', async () => {
      const res = await admin.get('/types/core.bookmark');
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ name: 'core.bookmark', core: true, parent: null });
      expect(res.body.merge_policy).toEqual({ url: 'manual', title: 'manual', description: 'manual', body: 'manual' });
    });

    it('PATCH and DELETE of a core type are 403 core_type_immutable', async () => {
      expectError(await admin.patch('/types/core.note', { merge_policy: { title: 'client_wins' } }), 403, 'core_type_immutable');
      expectError(await admin.patch('/types/core.note', { schema: { properties: { title: { type: 'string' } } } }), 403, 'core_type_immutable');
      expectError(await admin.delete('/types/core.note'), 403, 'core_type_immutable');
      const after = await admin.get('/types/core.note');
      expect(after.body.merge_policy.title).toBe('manual');
    });

    it('creating a type in the core namespace is 403 core_type_immutable', async () => {
      expectError(await admin.post('/types', { name: 'core.x', schema: { properties: {} } }), 403, 'core_type_immutable');
      expectError(await admin.post('/types', { name: 'core.note', schema: { properties: {} } }), 403, 'core_type_immutable');
      expectError(await admin.get('/types/core.x'), 404, 'type_not_found');
    });

    it('names OAuth scopes read otherwise (metadata, metadata.*, edge.*) are 400 validation_error naming name; look-alikes are fine', async () => {
      for (const name of ['metadata', 'metadata.types', 'edge.link', 'edge.a.b']) {
        expect(badFields(await admin.post('/types', { name, schema: { properties: {} } }))).toEqual(['name']);
      }
      for (const name of ['edge', 'edges.link', 'acme.metadata']) expectStatus(await admin.post('/types', { name, schema: { properties: {} } }), 201);
    });

    it('kind=core and kind=tenant split the list', async () => {
      await admin.post('/types', { name: 'kind.split', schema: {} });
      const core = await admin.get('/types', { kind: 'core' });
      const tenant = await admin.get('/types', { kind: 'tenant' });
      expect(core.body.types.length).toBeGreaterThan(0);
      expect(core.body.types.every((ty: any) => ty.core === true)).toBe(true);
      expect(tenant.body.types.every((ty: any) => ty.core === false)).toBe(true);
      expect(tenant.body.types.map((ty: any) => ty.name)).toContain('kind.split');
      expectError(await admin.get('/types', { kind: 'bogus' }), 400, 'validation_error');
    });
  });

  describe('listing a page at a time', () => {
    it('walks pages of 2 without gaps or repeats, core types first then by name, kind and permissions narrowing the pages', async () => {
      const tenant = await createTenant(t, adminKey, 'types-paging');
      const own = api(t, tenant.key);
      for (const name of ['pg.delta', 'pg.alpha', 'pg.echo', 'pg.charlie', 'pg.bravo', 'zz.hidden']) expectStatus(await own.post('/types', { name, schema: {} }), 201);

      const whole = await own.get('/types');
      expect(whole.body.next_cursor).toBeNull();
      const core: string[] = whole.body.types.filter((ty: any) => ty.core).map((ty: any) => ty.name);
      expect(core.length).toBeGreaterThanOrEqual(6);
      const mine = ['pg.alpha', 'pg.bravo', 'pg.charlie', 'pg.delta', 'pg.echo', 'zz.hidden'];
      expect(whole.body.types.map((ty: any) => ty.name)).toEqual([...[...core].sort(), ...mine]);

      const all = await walk(own, { limit: 2 });
      expect(all.names).toEqual(whole.body.types.map((ty: any) => ty.name));
      expect(all.sizes.slice(0, -1).every((n) => n === 2)).toBe(true);
      expect(all.sizes.at(-1)).toBeGreaterThan(0);

      expect(await walk(own, { kind: 'tenant', limit: 2 })).toEqual({ names: mine, sizes: [2, 2, 2] });
      expect((await walk(own, { kind: 'core', limit: 2 })).names).toEqual([...core].sort());
      expect((await walk(own, { kind: 'tenant', limit: 4 })).sizes).toEqual([4, 2]);

      // A member's pages hold only what it may read, and are full but for the last.
      const member = api(t, (await createKey(t, tenant.key, { role: 'member', type_permissions: { 'core.note': 'read', 'pg.*': 'read' } })).key);
      expect(await walk(member, { limit: 2 })).toEqual({ names: ['core.note', 'pg.alpha', 'pg.bravo', 'pg.charlie', 'pg.delta', 'pg.echo'], sizes: [2, 2, 2] });
      expect(await walk(member, { kind: 'tenant', limit: 3 })).toEqual({ names: mine.slice(0, 5), sizes: [3, 2] });
    });

    it('answers 50 types by default and at most 100', async () => {
      const tenant = await createTenant(t, adminKey, 'types-many');
      await t.sql(
        `INSERT INTO item_types (tenant_id, name, parent, schema, resolved_schema, merge_policy, core, version, created_at, updated_at)
         SELECT $1, 'many.t' || lpad(i::text, 3, '0'), NULL, '{"type":"object"}', '{"type":"object"}', '{}', false, 1, now(), now() FROM generate_series(1, 120) i`,
        [tenant.tenantId],
      );
      const own = api(t, tenant.key);
      const first = await own.get('/types', { kind: 'tenant' });
      expect(first.body.types).toHaveLength(50);
      expect(typeof first.body.next_cursor).toBe('string');
      const most = await own.get('/types', { kind: 'tenant', limit: 100 });
      expect(most.body.types.map((ty: any) => ty.name)).toEqual(Array.from({ length: 100 }, (_, i) => `many.t${String(i + 1).padStart(3, '0')}`));
      const rest = await own.get('/types', { kind: 'tenant', limit: 100, cursor: most.body.next_cursor });
      expect([rest.body.types.length, rest.body.next_cursor]).toEqual([20, null]);
    });

    it('a limit out of 1..100 or a cursor it did not issue is 400 validation_error', async () => {
      for (const limit of ['0', '101', 'x', '1.5', '-1']) expect(badFields(await admin.get('/types', { limit }))).toEqual(['limit']);
      const forged = (position: unknown) => Buffer.from(JSON.stringify(position)).toString('base64url');
      for (const cursor of ['garbage', forged(['not a date', 'core.note']), forged({}), forged(['2026-01-01T00:00:00.000Z', 'Not A Name'])]) {
        expect(badFields(await admin.get('/types', { cursor }))).toEqual(['cursor']);
      }
      expect(badFields(await admin.get('/types', { kind: 'bogus', limit: 2 }))).toEqual(['kind']);
    });
  });

  describe('creating tenant types', () => {
    it('POST /types → 201 with the contract shape and a resolved schema', async () => {
      const res = await admin.post('/types', { name: 'acme.recipe', schema: recipeSchema, merge_policy: { servings: 'server_wins' } });
      expectStatus(res, 201);
      expect(res.body).toMatchObject({ name: 'acme.recipe', parent: null, schema: recipeSchema, core: false });
      expect(res.body.created_at).toMatch(RFC3339);
      expect(res.body.resolved_schema).toMatchObject({ type: 'object', properties: recipeSchema.properties, required: ['title'] });
      expect(res.body.merge_policy).toEqual({ title: 'manual', servings: 'server_wins', cuisine: 'manual' });

      const got = await admin.get('/types/acme.recipe');
      expectStatus(got, 200);
      expect(got.body).toEqual(res.body);
      expect((await admin.get('/types')).body.types.map((ty: any) => ty.name)).toContain('acme.recipe');
    });

    it('answers Location: /types/{name}, which GET reads', async () => {
      const res = await t.http.post('/types').set(bearer(adminKey)).send({ name: 'acme.located', schema: { type: 'object' } });
      expect((await expectLocation(t, res, '/types/acme.located', adminKey)).body).toEqual(res.body);
    });

    it('takes an Idempotency-Key: a retry gets the first 201 again, not 409 type_already_exists, and the type is made once', async () => {
      const post = (name: string) => () => t.http.post('/types').set(bearer(adminKey)).send({ name, schema: recipeSchema });
      const first = await expectReplayed(post('acme.once'), post('acme.other'), 201);
      expect(first.headers.location).toBe('/types/acme.once');
      expect(await t.sql(`SELECT name FROM item_types WHERE tenant_id = $1 AND name IN ('acme.once', 'acme.other')`, [tenantId])).toEqual([{ name: 'acme.once' }]);
    });

    it('items of the new type are validated against its schema', async () => {
      const ok = await admin.post('/items', { type: 'acme.recipe', properties: { title: 'Pasta', servings: 2, cuisine: 'it' } });
      expectStatus(ok, 201);
      expect(ok.body.schema_version).toBe(1);
      const bad = await admin.post('/items', { type: 'acme.recipe', properties: { title: 'Pasta', servings: 0, cuisine: 'xx' } });
      expectError(bad, 400, 'invalid_properties');
      expect(bad.body.error.details.fields.map((f: any) => f.field).sort()).toEqual(['properties.cuisine', 'properties.servings']);
      expectError(await admin.post('/items', { type: 'acme.recipe', properties: { servings: 2 } }), 400, 'missing_required_field');
    });

    it('multipleOf a decimal takes the values that are its multiples, though their quotient is not whole in binary floating point', async () => {
      expectStatus(await admin.post('/types', { name: 'acme.money', schema: { properties: { amount: { type: 'number', multipleOf: 0.01 }, tenth: { type: 'number', multipleOf: 0.1 } } } }), 201);
      for (const amount of [0.07, 0.29, 1.15, 19.99, 123456.78]) expectStatus(await admin.post('/items', { type: 'acme.money', properties: { amount, tenth: 0.3 } }), 201);
      const bad = await admin.post('/items', { type: 'acme.money', properties: { amount: 0.071, tenth: 0.35 } });
      expectError(bad, 400, 'invalid_properties');
      expect(bad.body.error.details.fields.map((f: any) => f.field).sort()).toEqual(['properties.amount', 'properties.tenth']);
    });

    it('a rule about the properties as a whole (minProperties, dependencies) is named as properties', async () => {
      expectStatus(await admin.post('/types', { name: 'acme.whole', schema: { minProperties: 2, dependencies: { a: ['b'] } } }), 201);
      const bad = await admin.post('/items', { type: 'acme.whole', properties: { a: 1 } });
      expect(new Set(expectError(bad, 400, 'invalid_properties').details!.fields.map((f: any) => f.field))).toEqual(new Set(['properties']));
    });

    it('keys refused by propertyNames are each named in details.fields, with what is wrong with them', async () => {
      expectStatus(await admin.post('/types', { name: 'acme.lowerkeys', schema: { propertyNames: { pattern: '^[a-z]+$' } } }), 201);
      const res = await admin.post('/items', { type: 'acme.lowerkeys', properties: { A: 1, b: 2, C: 3 } });
      expectError(res, 400, 'invalid_properties');
      expect(res.body.error.details.fields).toEqual([
        { field: 'properties.A', message: 'property name must match pattern "^[a-z]+$"' },
        { field: 'properties.A', message: 'property name must be valid' },
        { field: 'properties.C', message: 'property name must match pattern "^[a-z]+$"' },
        { field: 'properties.C', message: 'property name must be valid' },
      ]);
    });

    it('a url-format value that made the expression backtrack for a minute (200 kB of "1:" in brackets) is refused like any bad url', async () => {
      expectStatus(await admin.post('/types', { name: 'acme.fmturl', schema: { properties: { x: { type: 'string', format: 'url' } } } }), 201);
      const res = await admin.post('/items', { type: 'acme.fmturl', properties: { x: `http://[${'1:'.repeat(100_000)}]` } });
      expectError(res, 400, 'invalid_properties');
      expect(res.body.error.details.fields).toEqual([{ field: 'properties.x', message: 'must match format "url"' }]);
      expectStatus(await admin.post('/items', { type: 'acme.fmturl', properties: { x: 'https://example.com/a' } }), 201);
    });

    it('a duplicate name → 409 type_already_exists', async () => {
      await admin.post('/types', { name: 'acme.dup', schema: {} });
      expectError(await admin.post('/types', { name: 'acme.dup', schema: { properties: { a: { type: 'string' } } } }), 409, 'type_already_exists');
    });

    it.each<[string, unknown, string[]]>([
      ['a non-object root type', { type: 'string' }, ['/type']],
      ['an array root type', { type: 'array' }, ['/type']],
      ['an unknown property type', { properties: { a: { type: 'nonsense' } } }, ['/properties/a/type']],
      ['properties as an array', { properties: [] }, ['/properties']],
      ['a non-boolean searchable', { properties: { 'a/b': { type: 'string', searchable: 'no' } } }, ['/properties/a~1b/searchable']],
      ['another dialect', { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' }, ['/$schema']],
      ['a lookahead, which RE2 refuses', { properties: { a: { type: 'string' }, x: { type: 'string', pattern: '(?=a)' } } }, ['/properties/x/pattern']],
      ['a backreference in a patternProperties key', { properties: { b: { type: 'object', patternProperties: { '(a)\\1': { type: 'string' } } } } }, ['/properties/b/patternProperties']],
    ])('an invalid schema (%s) → 400 invalid_schema naming where in details.errors', async (_, schema, paths) => {
      const res = await admin.post('/types', { name: 'acme.badschema', schema });
      expect([...new Set(refusedAt(res))]).toEqual(paths);
      expect(res.body.error.message).toContain(paths[0]);
      expectError(await admin.get('/types/acme.badschema'), 404, 'type_not_found');
    });

    it('a missing schema → 400 validation_error naming schema', async () => {
      const res = await admin.post('/types', { name: 'acme.noschema' });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_error');
      expect(res.body.error.details.fields.map((f: { field: string }) => f.field)).toContain('schema');
    });

    it('searchable: false is accepted as an annotation', async () => {
      const res = await admin.post('/types', { name: 'acme.secretive', schema: { properties: { pin: { type: 'string', searchable: false } } } });
      expectStatus(res, 201);
      expect(res.body.schema.properties.pin.searchable).toBe(false);
    });

    it('"searchable" where search never looks ($ref\'d definitions, allOf, patternProperties, tuple items) is 400 invalid_schema naming it; where it looks, it keeps values out', async () => {
      const secret = { type: 'string', searchable: false };
      const refused: Array<[Record<string, unknown>, string]> = [
        [{ definitions: { pin: secret }, properties: { pin: { $ref: '#/definitions/pin' } } }, '/definitions/pin/searchable'],
        [{ properties: { pin: { allOf: [secret] } } }, '/properties/pin/allOf/0/searchable'],
        [{ patternProperties: { '^pin': secret } }, '/patternProperties/^pin/searchable'],
        [{ properties: { pins: { type: 'array', items: [secret] } } }, '/properties/pins/items/0/searchable'],
      ];
      for (const [schema, path] of refused) {
        const res = await admin.post('/types', { name: 'acme.leaky', schema });
        expect(refusedAt(res)).toEqual([path]);
        expect(res.body.error.message).toContain(path);
      }
      expectError(await admin.get('/types/acme.leaky'), 404, 'type_not_found');
      // Where search looks: properties, additionalProperties and single-schema items.
      const sealed = { properties: { label: { type: 'string' }, pins: { type: 'array', items: secret } }, additionalProperties: secret };
      expectStatus(await admin.post('/types', { name: 'acme.sealed', schema: sealed }), 201);
      const item = await admin.post('/items', { type: 'acme.sealed', properties: { label: 'sealedlabel', code: 'quinquagenary', pins: ['sexagenary'] } });
      expectStatus(item, 201);
      expect((await admin.get('/search', { q: 'sealedlabel' })).body.results.map((r: any) => r.item.id)).toEqual([item.body.id]);
      for (const q of ['quinquagenary', 'sexagenary']) expect((await admin.get('/search', { q })).body.results).toEqual([]);
    });

    it('a type stored with "searchable" where search never looks keeps it: its merge policy can change, its schema only to one without it', async () => {
      const leaky = { definitions: { pin: { type: 'string', searchable: false } }, properties: { pin: { $ref: '#/definitions/pin' } } };
      await storeOldType(tenantId, 'acme.oldleaky', leaky);
      expectStatus(await admin.patch('/types/acme.oldleaky', { merge_policy: { pin: 'client_wins' } }), 200);
      expect(refusedAt(await admin.patch('/types/acme.oldleaky', { schema: leaky }))).toEqual(['/definitions/pin/searchable']);
      expectStatus(await admin.patch('/types/acme.oldleaky', { schema: { properties: { pin: { type: 'string', searchable: false } } } }), 200);
    });

    it.each<[string, Record<string, unknown>]>([
      ['missing name', { schema: {} }],
      ['a name that is not dotted lowercase', { name: 'Acme Recipe', schema: {} }],
      ['a bad merge policy', { name: 'acme.badpolicy', schema: { properties: { a: { type: 'string' } } }, merge_policy: { a: 'coin_flip' } }],
      ['a merge policy that is not a map', { name: 'acme.badpolicy2', schema: {}, merge_policy: ['manual'] }],
      ['an unknown field', { name: 'acme.extra', schema: {}, color: 'red' }],
    ])('%s → 400 validation_error', async (_, body) => {
      expectError(await admin.post('/types', body), 400, 'validation_error');
    });

    it('GET /types/{name} for a missing type → 404 type_not_found', async () => {
      expectError(await admin.get('/types/acme.nothing'), 404, 'type_not_found');
    });
  });

  describe('what a schema may not do', () => {
    it('a format no one checks (a typo, a draft-07 format ajv-formats lacks) is 400 invalid_schema naming it, at any depth; a type stored with one keeps working', async () => {
      const schema = { properties: { e: { type: 'string', format: 'emial' }, list: { type: 'array', items: { type: 'string', format: 'idn-email' } }, ok: { type: 'string', format: 'email' } } };
      expect(refusedAt(await admin.post('/types', { name: 'acme.formats', schema })).sort()).toEqual(['/properties/e/format', '/properties/list/items/format']);
      await storeOldType(tenantId, 'acme.oldformat', { properties: { e: { type: 'string', format: 'emial' } } });
      expectStatus(await admin.patch('/types/acme.oldformat', { merge_policy: { e: 'server_wins' } }), 200);
      expectStatus(await admin.post('/items', { type: 'acme.oldformat', properties: { e: 'anything' } }), 201);
    });

    it('"$async" anywhere is 400 invalid_schema naming it', async () => {
      const schemas = [
        { $async: true, properties: { n: { type: 'integer' } } },
        { properties: { n: { $async: true, type: 'integer' } } },
        { definitions: { d: { $async: true } }, properties: {} },
      ];
      const paths = [];
      for (const schema of schemas) paths.push(...refusedAt(await admin.post('/types', { name: 'acme.async', schema })));
      expect(paths).toEqual(['/$async', '/properties/n/$async', '/definitions/d/$async']);
      expectError(await admin.get('/types/acme.async'), 404, 'type_not_found');
    });

    it('a type stored with "$async" before it was refused fails every write with 400 invalid_schema, valid-looking ones too, and the service answers on', async () => {
      await storeOldType(tenantId, 'acme.oldasync', { $async: true, properties: { n: { type: 'integer' } } });
      // ajv answers such a schema with a Promise: truthy, so it passed as valid; and the
      // rejection of an invalid one went unhandled, which ended the process.
      for (const properties of [{ n: 1 }, { n: 'one' }, { n: 2 }]) {
        expectError(await admin.post('/items', { type: 'acme.oldasync', properties }), 400, 'invalid_schema');
      }
      await new Promise((resolve) => setImmediate(resolve));
      expectStatus(await admin.post('/items', { type: 'core.note', properties: { title: 'still here' } }), 201);
    });

    it('identifiers, anchors, dynamic references and any $ref but a pointer into the schema itself are 400 invalid_schema; properties named "id" or "$id" are fine', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ $id: 'urn:acme:secret2', properties: {} }, '/$id'],
        [{ properties: { a: { $id: 'urn:acme:a', type: 'string' } } }, '/properties/a/$id'],
        [{ properties: { a: { id: 'urn:acme:a', type: 'string' } } }, '/properties/a/id'],
        [{ $defs: { a: { $anchor: 'here', type: 'string' } } }, '/$defs/a/$anchor'],
        [{ properties: { a: { $dynamicRef: '#meta' } } }, '/properties/a/$dynamicRef'],
        [{ properties: { a: { $dynamicAnchor: 'meta' } } }, '/properties/a/$dynamicAnchor'],
        [{ properties: { a: { $recursiveRef: '#' } } }, '/properties/a/$recursiveRef'],
        [{ $recursiveAnchor: true, properties: {} }, '/$recursiveAnchor'],
        [{ properties: { a: { $ref: 'urn:acme:secret2' } } }, '/properties/a/$ref'],
        [{ properties: { a: { $ref: 'http://json-schema.org/draft-07/schema#' } } }, '/properties/a/$ref'],
        [{ properties: { a: { $ref: 'other.json#/definitions/x' } } }, '/properties/a/$ref'],
        [{ properties: { a: { $ref: '#here' } } }, '/properties/a/$ref'],
        // A pointer must land on a schema: `default` holds data, which ajv would compile as one.
        [{ default: { $async: true }, properties: { a: { $ref: '#/default' } } }, '/properties/a/$ref'],
      ];
      for (const [schema, path] of cases) {
        const res = await admin.post('/types', { name: 'acme.reaching', schema });
        expect({ schema, paths: refusedAt(res) }).toEqual({ schema, paths: [path] });
      }
      const named = await admin.post('/types', {
        name: 'acme.named',
        schema: { properties: { id: { type: 'string' }, $id: { type: 'integer' }, self: { $ref: '#/properties/id' } }, required: ['id'] },
      });
      expectStatus(named, 201);
      expectStatus(await admin.post('/items', { type: 'acme.named', properties: { id: 'x', $id: 1, self: 'y' } }), 201);
      expectError(await admin.post('/items', { type: 'acme.named', properties: { id: 'x', $id: 'one' } }), 400, 'invalid_properties');
    });

    it("a type stored with an $id is reachable by no other tenant's $ref, its writes keep working, and so do its subtypes'", async () => {
      await storeOldType(tenantId, 'acme.secret', { $id: 'urn:acme:secret2', properties: { s: { type: 'string', pattern: '^SECRET-[0-9]{4}$' } } });
      for (const s of ['SECRET-0001', 'SECRET-0002']) expectStatus(await admin.post('/items', { type: 'acme.secret', properties: { s } }), 201);
      expectError(await admin.post('/items', { type: 'acme.secret', properties: { s: 'nope' } }), 400, 'invalid_properties');

      const other = await createTenant(t, adminKey, 'types-ref-probe');
      const probe = api(t, other.key);
      expect(refusedAt(await probe.post('/types', { name: 'b.probe', schema: { properties: { x: { $ref: 'urn:acme:secret2' } } } }))).toEqual([
        '/properties/x/$ref',
      ]);
      // Stored past the checks, its writes cannot resolve the reference either: no existence
      // oracle, and no error quoting the other tenant's schema.
      await storeOldType(other.tenantId, 'b.probe', { properties: { x: { $ref: 'urn:acme:secret2' } } });
      for (const x of [{ s: 'guess' }, { s: 'SECRET-0001' }, 'x']) {
        const res = await probe.post('/items', { type: 'b.probe', properties: { x } });
        expectError(res, 400, 'invalid_schema');
        expect(res.text).not.toMatch(/SECRET|\[0-9\]/);
      }

      // The subtype's copy of its parent's rules leaves the $id out.
      expectStatus(await admin.post('/types', { name: 'acme.secret.kid', parent: 'acme.secret', schema: { properties: { t: { type: 'string' } } } }), 201);
      expectStatus(await admin.post('/items', { type: 'acme.secret.kid', properties: { s: 'SECRET-0003', t: 'x' } }), 201);
      expectError(await admin.post('/items', { type: 'acme.secret.kid', properties: { s: 'nope' } }), 400, 'invalid_properties');
    });

    it('pattern validation keeps working for every type after many creations with patterns, refused ones included', async () => {
      const patterned = (n: number, tag: string) =>
        Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'string', pattern: `^${tag}${i}-[a-z]{8}[0-9]{4}$` }]));
      expectStatus(await admin.post('/types', { name: 'acme.pat.taken', schema: { properties: patterned(3, 'taken') } }), 201);
      // The name is checked before the patterns are compiled: what would fail them is not reached.
      const lookbehind = { z: { type: 'string', pattern: '(?<=a)b' } };
      expectError(await admin.post('/types', { name: 'acme.pat.taken', schema: { properties: lookbehind } }), 409, 'type_already_exists');
      for (let round = 0; round < 12; round++) {
        // 500 patterns: the audit's schema, which each time took 1/9 of the RE2 heap for good.
        expect(refusedAt(await admin.post('/types', { name: `acme.pat.many${round}`, schema: { properties: patterned(500, `m${round}x`) } }))).toEqual(['/']);
        // A taken name is refused before anything is compiled.
        expectError(await admin.post('/types', { name: 'acme.pat.taken', schema: { properties: patterned(60, `d${round}x`) } }), 409, 'type_already_exists');
        // RE2 refuses the last pattern after compiling the others.
        const refused = { ...patterned(40, `r${round}x`), ...lookbehind };
        expectError(await admin.post('/types', { name: `acme.pat.bad${round}`, schema: { properties: refused } }), 400, 'invalid_schema');
        // Large but within the limits (\p{L} compiles to some 135 KB): together, more than one RE2 heap holds.
        const heavy = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`p${i}`, { type: 'string', pattern: `h${round}x${i}\\p{L}` }]));
        expectStatus(await admin.post('/types', { name: `acme.pat.heavy${round}`, schema: { properties: heavy } }), 201);
      }
      expectStatus(await admin.post('/types', { name: 'acme.pat.code', schema: { properties: { code: { type: 'string', pattern: '^[A-Z]{3}$' } } } }), 201);
      expectStatus(await admin.post('/items', { type: 'acme.pat.code', properties: { code: 'ABC' } }), 201);
      expectError(await admin.post('/items', { type: 'acme.pat.code', properties: { code: 'abc' } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/items', { type: 'acme.pat.taken', properties: { p0: 'taken0-abcdefgh1234' } }), 201);
      expectError(await admin.post('/items', { type: 'acme.pat.taken', properties: { p0: 'taken0' } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/items', { type: 'acme.pat.heavy0', properties: { p0: 'h0x0é' } }), 201);
      expectError(await admin.post('/items', { type: 'acme.pat.heavy0', properties: { p0: 'h0x0-' } }), 400, 'invalid_properties');
      // And in another tenant.
      const other = api(t, (await createTenant(t, adminKey, 'types-pattern-other')).key);
      expectStatus(await other.post('/types', { name: 'b.code', schema: { properties: { code: { type: 'string', pattern: '^[a-z]+$' } } } }), 201);
      expectError(await other.post('/items', { type: 'b.code', properties: { code: 'ABC' } }), 400, 'invalid_properties');
    }, 120_000);

    it('a pattern too slow for a long value is 400 invalid_schema, and the server answers others meanwhile', async () => {
      // Within every schema limit, yet minutes of matching over 50,000 "é" (src/types/pattern-check.ts).
      const schema = { properties: { text: { type: 'string', pattern: '(.{1,1000})x' }, code: { type: 'string', pattern: '^[a-z]+$' } } };
      expectStatus(await admin.post('/types', { name: 'acme.pat.slow', schema }), 201);
      const order: string[] = [];
      const slow = admin.post('/items', { type: 'acme.pat.slow', properties: { text: 'é'.repeat(50_000) } }).then((res) => (order.push('slow'), res));
      await t.http.get('/health').expect(200);
      order.push('health');
      expectError(await slow, 400, 'invalid_schema');
      expect(order).toEqual(['health', 'slow']);
      // Long values that match quickly are checked off the event loop too, and pass or fail as ever.
      expectStatus(await admin.post('/items', { type: 'acme.pat.slow', properties: { text: 'note x', code: 'a'.repeat(200_000) } }), 201);
      expectError(await admin.post('/items', { type: 'acme.pat.slow', properties: { code: `${'a'.repeat(200_000)}A` } }), 400, 'invalid_properties');
    }, 60_000);

    it('a batch write checks its slow values within one budget, and writes the elements that fit', async () => {
      const slow = { type: 'acme.pat.slow', properties: { text: 'é'.repeat(50_000) } };
      const items = [slow, slow, slow, slow, slow, { type: 'acme.pat.slow', properties: { code: 'fits' } }];
      const res = await admin.post('/items/bulk', { mode: 'upsert', items });
      expectStatus(res, 200);
      const outcomes = res.body.results.map((r: { status: string; error?: { code: string } }) => r.error?.code ?? r.status);
      expect(outcomes).toEqual([...Array(5).fill('invalid_schema'), 'created']);
    }, 60_000);

    it('regular expressions are bounded: how many, how long, and how large they compile', async () => {
      const props = (patterns: string[]) => Object.fromEntries(patterns.map((pattern, i) => [`p${i}`, { type: 'string', pattern }]));
      expect(refusedAt(await admin.post('/types', { name: 'acme.re', schema: { properties: props([`^${'a'.repeat(513)}$`]) } }))).toEqual(['/properties/p0/pattern']);
      expect(refusedAt(await admin.post('/types', { name: 'acme.re', schema: { properties: props(Array.from({ length: 65 }, (_, i) => `^x${i}$`)) } }))).toEqual(['/']);
      // 9 characters, but a second and 2 MB of RE2's heap to compile.
      expect(refusedAt(await admin.post('/types', { name: 'acme.re', schema: { properties: props(['\\p{L}{50}']) } }))).toEqual(['/']);
      expect(refusedAt(await admin.post('/types', { name: 'acme.re', schema: { patternProperties: { '^(x.{1000}){3}$': {} } } }))).toEqual(['/']);
      const fits = await admin.post('/types', { name: 'acme.re', schema: { properties: props([...Array.from({ length: 63 }, (_, i) => `^x${i}$`), '^\\p{Lu}\\p{Ll}+$']) } });
      expectStatus(fits, 201);
      expectError(await admin.post('/items', { type: 'acme.re', properties: { p63: 'émile' } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/items', { type: 'acme.re', properties: { p63: 'Émile', p0: 'x0' } }), 201);
    });

    it('uniqueItems is refused where ajv would compare elements pairwise, kept where it indexes them', async () => {
      for (const tags of [
        { type: 'array', uniqueItems: true },
        { type: 'array', items: { type: 'object' }, uniqueItems: true },
        { type: 'array', items: { type: ['string', 'array'] }, uniqueItems: true },
        { type: 'array', items: [{ type: 'string' }], uniqueItems: true },
        { type: 'array', items: { $ref: '#/definitions/tag' }, uniqueItems: true },
      ]) {
        const schema = { definitions: { tag: { type: 'string' } }, properties: { tags: tags } };
        expect(refusedAt(await admin.post('/types', { name: 'acme.uniq', schema }))).toEqual(['/properties/tags/uniqueItems']);
      }
      const ok = await admin.post('/types', { name: 'acme.uniq', schema: { properties: { tags: { type: 'array', items: { type: ['string', 'integer'] }, uniqueItems: true } } } });
      expectStatus(ok, 201);
      expectStatus(await admin.post('/items', { type: 'acme.uniq', properties: { tags: ['a', 'b', 1, '1'] } }), 201);
      expectError(await admin.post('/items', { type: 'acme.uniq', properties: { tags: ['a', 'b', 'a'] } }), 400, 'invalid_properties');
      // A subtype cannot bring it back by merging: its resolved schema is what is checked.
      expectStatus(await admin.post('/types', { name: 'acme.listy', schema: { properties: { tags: { type: 'array', items: { type: 'object' } } } } }), 201);
      expect(refusedAt(await admin.post('/types', { name: 'acme.listy.uniq', parent: 'acme.listy', schema: { properties: { tags: { uniqueItems: true } } } }))).toEqual([
        '/properties/tags/uniqueItems',
      ]);
    });

    it('enums and schemas are bounded in size', async () => {
      const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
      const many = await admin.post('/types', { name: 'acme.enum', schema: { properties: { list: { type: 'array', items: { enum: values(257) } } } } });
      expect(refusedAt(many)).toEqual(['/properties/list/items/enum']);
      expectStatus(await admin.post('/types', { name: 'acme.enum', schema: { properties: { list: { type: 'array', items: { enum: values(256) } } } } }), 201);
      expectError(await admin.post('/items', { type: 'acme.enum', properties: { list: ['v1', 'v256'] } }), 400, 'invalid_properties');
      const big = await admin.post('/types', { name: 'acme.big', schema: { properties: { a: { type: 'string', description: 'x'.repeat(64 * 1024) } } } });
      expect(refusedAt(big)).toEqual(['/']);
      expect(big.body.error.message).toMatch(/bytes/);
      // A subtype's resolved schema holds its parent's twice (merged, and whole in allOf).
      const described = (name: string) => ({ properties: { [name]: { type: 'string', description: 'x'.repeat(45 * 1024) } } });
      expectStatus(await admin.post('/types', { name: 'acme.wordy', schema: described('a') }), 201);
      const wordier = await admin.post('/types', { name: 'acme.wordy.more', parent: 'acme.wordy', schema: described('b') });
      expectError(wordier, 400, 'invalid_schema');
      expect(wordier.body.error.message).toMatch(/resolved .* bytes/);
    });

    it('enum values that can apply to one value are bounded in sum: many references to a full enum are 400 invalid_schema, and a type stored with them refuses its writes', async () => {
      // 127 × 256 comparisons per element held the event loop 650 µs an element, 13 s for 80 KB.
      const schema = {
        definitions: { e: { enum: Array.from({ length: 256 }, (_, i) => i) } },
        properties: { a: { type: 'array', items: { allOf: Array.from({ length: 127 }, () => ({ $ref: '#/definitions/e' })) } } },
      };
      const res = await admin.post('/types', { name: 'acme.en127', schema });
      expect(refusedAt(res)).toEqual(['/']);
      expect(res.body.error.message).toMatch(/enum values/);
      await storeOldType(tenantId, 'acme.en127old', schema);
      expectError(await admin.post('/items', { type: 'acme.en127old', properties: { a: Array(20_000).fill(255) } }), 400, 'invalid_schema');
    });

    it('checks a body whose values × schemas a value would hold the event loop in the worker, whose time limit refuses it; smaller bodies as before', async () => {
      // 241 schemas apply to each element: 480,000 elements cost seconds of validation.
      const schema = {
        definitions: { n: { type: 'integer', minimum: 0, maximum: 300, multipleOf: 1 } },
        properties: { a: { type: 'array', items: { allOf: Array.from({ length: 120 }, () => ({ $ref: '#/definitions/n' })) } } },
      };
      expectStatus(await admin.post('/types', { name: 'acme.many', schema }), 201);
      expectStatus(await admin.post('/items', { type: 'acme.many', properties: { a: [1, 2, 3] } }), 201);
      expectError(await admin.post('/items', { type: 'acme.many', properties: { a: [1, -1] } }), 400, 'invalid_properties');
      // Off the event loop, checked (so refused) the same way.
      expectError(await admin.post('/items', { type: 'acme.many', properties: { a: [...Array(5_000).fill(1), -1] } }), 400, 'invalid_properties');
      const refused = expectError(await admin.post('/items', { type: 'acme.many', properties: { a: Array(480_000).fill(1) } }), 400, 'invalid_schema');
      expect(refused.message).toMatch(/more than \d+ ms/);
    });

    it('references that multiply, or loop without descending into the data, are refused', async () => {
      // Each level applies the next twice: 2^12 schemas to one value.
      const defs = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`d${i}`, { allOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] }]));
      const doubling = { $defs: { ...defs, d12: { type: 'string' } }, properties: { x: { $ref: '#/$defs/d0' } } };
      expect(refusedAt(await admin.post('/types', { name: 'acme.refs', schema: doubling }))).toEqual(['/']);
      const loop = { $defs: { a: { $ref: '#/$defs/b' }, b: { anyOf: [{ $ref: '#/$defs/a' }] } }, properties: { x: { $ref: '#/$defs/a' } } };
      expect(refusedAt(await admin.post('/types', { name: 'acme.refs', schema: loop }))).toHaveLength(1);
      expect(refusedAt(await admin.post('/types', { name: 'acme.refs', schema: { properties: { a: { $ref: '#/properties/a' } } } }))).toHaveLength(1);
      // Recursion that descends into the data is fine.
      const tree = { properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#' } } } };
      expectStatus(await admin.post('/types', { name: 'acme.refs', schema: tree }), 201);
      expectStatus(await admin.post('/items', { type: 'acme.refs', properties: { name: 'a', children: [{ name: 'b', children: [{ name: 'c' }] }] } }), 201);
      expectError(await admin.post('/items', { type: 'acme.refs', properties: { name: 'a', children: [{ name: 'b', children: [{ name: 3 }] }] } }), 400, 'invalid_properties');
    });

    it('a type stored with a schema that cannot compile fails its writes with 400 invalid_schema, a bulk write one element at a time', async () => {
      await storeOldType(tenantId, 'acme.broken', { properties: { a: { $ref: '#/definitions/missing' } } });
      expectError(await admin.post('/items', { type: 'acme.broken', properties: { a: 1 } }), 400, 'invalid_schema');
      const bulk = await admin.post('/items/bulk', {
        mode: 'upsert',
        items: [{ type: 'acme.broken', properties: { a: 1 } }, { type: 'core.note', properties: { title: 'beside it' } }],
      });
      expectStatus(bulk, 200);
      expect(bulk.body.results.map((r: any) => [r.status, r.error?.code])).toEqual([['error', 'invalid_schema'], ['created', undefined]]);
    });
  });

  it("keeps each tenant's catalogue only while it is fresh, so the cache holds the tenants seen within its TTL, not every one since start", async () => {
    const types = t.app.get(TypeCatalogService);
    const cached = () => [...(types as unknown as { catalogs: Map<string, unknown> }).catalogs.keys()];
    const [idle, active] = [randomUUID(), randomUUID()];
    await types.catalog(idle);
    await types.catalog(active);
    expect(cached()).toEqual(expect.arrayContaining([idle, active]));
    // A minute and more later, a catalogue read drops the stale ones it passes.
    const clock = jest.spyOn(Date, 'now').mockReturnValue(Date.now() + 61_000);
    let read: Promise<unknown>;
    try {
      read = types.catalog(active);
    } finally {
      clock.mockRestore();
    }
    await read;
    expect(cached()).toContain(active);
    expect(cached()).not.toContain(idle);
  });

  describe('subtypes', () => {
    it('may add properties; the resolved schema carries parent and child properties', async () => {
      const res = await admin.post('/types', {
        name: 'acme.journal',
        parent: 'core.note',
        schema: { properties: { mood: { type: 'string' } } },
      });
      expectStatus(res, 201);
      expect(res.body.parent).toBe('core.note');
      expect(res.body.schema).toEqual({ properties: { mood: { type: 'string' } } });
      expect(Object.keys(res.body.resolved_schema.properties).sort()).toEqual(['body', 'mood', 'title']);
      expect(Object.keys(res.body.merge_policy).sort()).toEqual(['body', 'mood', 'title']);
    });

    it('may narrow a parent property (enum subset, a format without restating the type)', async () => {
      const res = await admin.post('/types', {
        name: 'acme.quicktask',
        parent: 'core.task',
        schema: { properties: { status: { type: 'string', enum: ['open', 'done'] }, title: { maxLength: 50 } } },
      });
      expectStatus(res, 201);
      expect(res.body.resolved_schema.properties.title).toEqual({ type: 'string', maxLength: 50 });
      expectError(await admin.post('/items', { type: 'acme.quicktask', properties: { title: 't', status: 'cancelled' } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/items', { type: 'acme.quicktask', properties: { title: 't', status: 'done' } }), 201);
    });

    it('cannot loosen its parent: opening a closed schema is inheritance_violation, and restated limits only narrow', async () => {
      expectStatus(
        await admin.post('/types', {
          name: 'acme.strict',
          schema: { additionalProperties: false, properties: { title: { type: 'string', maxLength: 5, pattern: '^a' }, kind: { type: 'string', enum: ['x', 'y'] } } },
        }),
        201,
      );
      expectError(await admin.post('/types', { name: 'acme.strict.open', parent: 'acme.strict', schema: { additionalProperties: true } }), 400, 'inheritance_violation');
      expectStatus(await admin.post('/types', { name: 'acme.strict.long', parent: 'acme.strict', schema: { properties: { title: { maxLength: 500, pattern: '.*' } } } }), 201);
      // Whatever the subtype restates, `acme.strict.*` still promises the parent's rules of every item it matches.
      expectError(await admin.post('/items', { type: 'acme.strict.long', properties: { title: 'zzzzzzzzzz' } }), 400, 'invalid_properties');
      expectError(await admin.post('/items', { type: 'acme.strict.long', properties: { title: 'abc', zzz: 1 } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/items', { type: 'acme.strict.long', properties: { title: 'abc', kind: 'x' } }), 201);
    });

    it('contradicting a parent property type → 400 inheritance_violation', async () => {
      const res = await admin.post('/types', { name: 'acme.badnote', parent: 'core.note', schema: { properties: { title: { type: 'integer' } } } });
      expectError(res, 400, 'inheritance_violation');
      expect(res.body.error.details.fields.map((f: any) => f.field)).toContain('title');
      expectError(await admin.get('/types/acme.badnote'), 404, 'type_not_found');
    });

    it('widening a parent enum → 400 inheritance_violation', async () => {
      const core = await admin.post('/types', { name: 'acme.widetask', parent: 'core.task', schema: { properties: { status: { type: 'string', enum: ['open', 'someday'] } } } });
      expectError(core, 400, 'inheritance_violation');
      await admin.post('/types', { name: 'acme.dish', schema: recipeSchema });
      const tenant = await admin.post('/types', {
        name: 'acme.dish.fusion',
        parent: 'acme.dish',
        schema: { properties: { cuisine: { type: 'string', enum: ['it', 'fr', 'jp', 'kr'] } } },
      });
      expectError(tenant, 400, 'inheritance_violation');
    });

    it("the parent's required fields are inherited by items of the subtype", async () => {
      const res = await admin.post('/types', { name: 'acme.link', parent: 'core.bookmark', schema: { properties: { rating: { type: 'integer' } } } });
      expectStatus(res, 201);
      expect(res.body.resolved_schema.required).toEqual(['url']);
      const missing = await admin.post('/items', { type: 'acme.link', properties: { rating: 3 } });
      expectError(missing, 400, 'missing_required_field');
      expect(missing.body.error.details.fields.map((f: any) => f.field)).toEqual(['properties.url']);
      expectError(await admin.post('/items', { type: 'acme.link', properties: { url: 'https://example.com', rating: 'x' } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/items', { type: 'acme.link', properties: { url: 'https://example.com', rating: 3 } }), 201);
    });

    it('inheritance chains: a grandchild keeps the grandparent properties and required fields', async () => {
      expectStatus(await admin.post('/types', { name: 'acme.ref', parent: 'core.bookmark', schema: { properties: { doi: { type: 'string' } } } }), 201);
      const res = await admin.post('/types', { name: 'acme.ref.paper', parent: 'acme.ref', schema: { properties: { pages: { type: 'integer' } } } });
      expectStatus(res, 201);
      expect(Object.keys(res.body.resolved_schema.properties).sort()).toEqual(['body', 'description', 'doi', 'pages', 'title', 'url']);
      expectError(await admin.post('/items', { type: 'acme.ref.paper', properties: { pages: 3 } }), 400, 'missing_required_field');
      expectError(
        await admin.post('/types', { name: 'acme.ref.bad', parent: 'acme.ref', schema: { properties: { url: { type: 'integer' } } } }),
        400,
        'inheritance_violation',
      );
    });

    it('merge policies are inherited and may be overridden', async () => {
      await admin.post('/types', { name: 'acme.base', schema: { properties: { a: { type: 'string' }, b: { type: 'string' } } }, merge_policy: { a: 'union', b: 'server_wins' } });
      const res = await admin.post('/types', { name: 'acme.base.child', parent: 'acme.base', schema: { properties: { c: { type: 'string' } } }, merge_policy: { b: 'client_wins' } });
      expectStatus(res, 201);
      expect(res.body.merge_policy).toEqual({ a: 'union', b: 'client_wins', c: 'manual' });
    });

    it("a subtype's definitions sit beside its parent's: the parent's $refs keep meaning the parent's, so parent.* never matches an item the parent would refuse", async () => {
      const parent = { $defs: { code: { type: 'string', pattern: '^[A-Z]{3}$' } }, properties: { code: { $ref: '#/$defs/code' } } };
      expectStatus(await admin.post('/types', { name: 'acme.coded', schema: parent }), 201);
      expectStatus(await admin.post('/types', { name: 'acme.coded.loose', parent: 'acme.coded', schema: { $defs: { code: { type: 'string' } } } }), 201);
      expectError(await admin.post('/items', { type: 'acme.coded.loose', properties: { code: 'abc' } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/items', { type: 'acme.coded.loose', properties: { code: 'ABC' } }), 201);
      // The subtype's own $refs mean its own definitions, or its parent's where it has none.
      const alias = { $defs: { code: { type: 'string', maxLength: 4 } }, properties: { alias: { $ref: '#/$defs/code' } } };
      expectStatus(await admin.post('/types', { name: 'acme.coded.alias', parent: 'acme.coded', schema: alias }), 201);
      expectStatus(await admin.post('/items', { type: 'acme.coded.alias', properties: { code: 'ABC', alias: 'abc' } }), 201);
      expectError(await admin.post('/items', { type: 'acme.coded.alias', properties: { code: 'ABC', alias: 'abcde' } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/types', { name: 'acme.coded.other', parent: 'acme.coded', schema: { properties: { other: { $ref: '#/$defs/code' } } } }), 201);
      expectError(await admin.post('/items', { type: 'acme.coded.other', properties: { other: 'abc' } }), 400, 'invalid_properties');
    });

    it("a subtype with definitions of its own keeps its parent's $refs resolving: created, and its items validated, one by one and in bulk", async () => {
      const parent = { definitions: { pos: { type: 'integer', minimum: 0 } }, properties: { x: { $ref: '#/definitions/pos' } } };
      expectStatus(await admin.post('/types', { name: 'acme.geo', schema: parent }), 201);
      const child = { definitions: { other: { type: 'string' } }, properties: { label: { $ref: '#/definitions/other' } } };
      expectStatus(await admin.post('/types', { name: 'acme.geo.named', parent: 'acme.geo', schema: child }), 201);
      expectStatus(await admin.post('/items', { type: 'acme.geo.named', properties: { x: 1, label: 'a' } }), 201);
      expectError(await admin.post('/items', { type: 'acme.geo.named', properties: { x: -1 } }), 400, 'invalid_properties');
      expectError(await admin.post('/items', { type: 'acme.geo.named', properties: { label: 5 } }), 400, 'invalid_properties');
      const bulk = await admin.post('/items/bulk', {
        mode: 'upsert',
        items: [{ type: 'acme.geo.named', properties: { x: 2 } }, { type: 'acme.geo.named', properties: { x: -2 } }],
      });
      expectStatus(bulk, 200);
      expect(bulk.body.results.map((r: any) => [r.status, r.error?.code])).toEqual([['created', undefined], ['error', 'invalid_properties']]);
    });

    it('may forbid a parent property with false', async () => {
      expectStatus(await admin.post('/types', { name: 'acme.open', schema: { properties: { x: { type: 'string' }, y: { type: 'string' } } } }), 201);
      const res = await admin.post('/types', { name: 'acme.open.nox', parent: 'acme.open', schema: { properties: { x: false } } });
      expectStatus(res, 201);
      expect(res.body.resolved_schema.properties.x).toBe(false);
      expectError(await admin.post('/items', { type: 'acme.open.nox', properties: { x: 'a' } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/items', { type: 'acme.open.nox', properties: { y: 'a' } }), 201);
    });

    it("a property the subtype adds where its parent's additionalProperties keeps keys out of search stays out of search, at the root and nested", async () => {
      const hidden = { type: 'string', searchable: false };
      expectStatus(await admin.post('/types', { name: 's.base', schema: { properties: { title: { type: 'string' }, o: { type: 'object', additionalProperties: { searchable: false } } }, additionalProperties: hidden } }), 201);
      const child = await admin.post('/types', { name: 's.child', parent: 's.base', schema: { properties: { pin: { type: 'string' }, o: { properties: { pin: { type: 'string' } } } } } });
      expectStatus(child, 201);
      expect(child.body.resolved_schema.properties.pin).toEqual(hidden);
      expect(child.body.resolved_schema.properties.o.properties.pin).toEqual(hidden);
      const ids: string[] = [];
      for (const [type, n] of [['s.base', 1], ['s.child', 2]] as const) {
        const item = await admin.post('/items', { type, properties: { title: `zebratitle${n}`, pin: `zebraword${n}`, o: { pin: `zebranested${n}` } } });
        expectStatus(item, 201);
        ids.push(item.body.id);
      }
      expect((await admin.get('/search', { q: 'zebratitle2' })).body.results.map((r: any) => r.item.id)).toEqual([ids[1]]);
      for (const q of ['zebraword1', 'zebraword2', 'zebranested1', 'zebranested2']) expect((await admin.get('/search', { q })).body.results).toEqual([]);
    });

    it('a chain of parents holds at most 16 types: a 17th is 400 inheritance_violation naming parent', async () => {
      expectStatus(await admin.post('/types', { name: 'acme.deep0', schema: { properties: { a: { type: 'string', maxLength: 3 } } } }), 201);
      for (let i = 1; i < 16; i++) {
        expectStatus(await admin.post('/types', { name: `acme.deep${i}`, parent: `acme.deep${i - 1}`, schema: { properties: { [`p${i}`]: { type: 'integer' } } } }), 201);
      }
      const res = await admin.post('/types', { name: 'acme.deep16', parent: 'acme.deep15', schema: {} });
      expectError(res, 400, 'inheritance_violation');
      expect(res.body.error.details.fields.map((f: any) => f.field)).toEqual(['parent']);
      expectStatus(await admin.post('/items', { type: 'acme.deep15', properties: { a: 'abc', p15: 1 } }), 201);
      expectError(await admin.post('/items', { type: 'acme.deep15', properties: { a: 'abcd' } }), 400, 'invalid_properties');
    });

    it('a missing parent → 404 type_not_found', async () => {
      expectError(await admin.post('/types', { name: 'acme.orphan', parent: 'acme.nope', schema: {} }), 404, 'type_not_found');
    });
  });

  describe('changing and deleting', () => {
    it('an unused type can be patched (schema, merge policy) and deleted → 200', async () => {
      await admin.post('/types', { name: 'acme.free', schema: { properties: { a: { type: 'string' } } } });
      const patched = await admin.patch('/types/acme.free', {
        schema: { properties: { a: { type: 'string' }, b: { type: 'integer' } } },
        merge_policy: { b: 'server_wins' },
      });
      expectStatus(patched, 200);
      expect(Object.keys(patched.body.resolved_schema.properties).sort()).toEqual(['a', 'b']);
      expect(patched.body.merge_policy).toEqual({ a: 'manual', b: 'server_wins' });
      expect(patched.body.version).toBe(2);
      // The same again, or nothing, changes nothing: no version, no new updated_at.
      for (const same of [{ schema: { properties: { b: { type: 'integer' }, a: { type: 'string' } } }, merge_policy: { b: 'server_wins' } }, {}]) {
        const again = await admin.patch('/types/acme.free', same);
        expectStatus(again, 200);
        expect([again.body.version, again.body.updated_at]).toEqual([2, patched.body.updated_at]);
      }

      expectError(await admin.patch('/types/acme.free', { schema: { type: 'string' } }), 400, 'invalid_schema');
      expectError(await admin.patch('/types/acme.free', { merge_policy: { a: 'nope' } }), 400, 'validation_error');

      const deleted = await admin.delete('/types/acme.free');
      expectStatus(deleted, 200);
      expect(deleted.body.name).toBe('acme.free');
      expectError(await admin.get('/types/acme.free'), 404, 'type_not_found');
      expectError(await admin.delete('/types/acme.free'), 404, 'type_not_found');
      expectError(await admin.patch('/types/acme.missing', { merge_policy: {} }), 404, 'type_not_found');
    });

    it('a type changed or deleted releases its cached validators on the instance that did it, not waiting to be pushed out', async () => {
      // The app runs in this process: its validator cache is this module's.
      const cached = () => validatorCacheUse(`${tenantId}:acme.cached:`).entries;
      const refused = async () => expectError(await admin.post('/items', { type: 'acme.cached', properties: { a: 1 } }), 400, 'invalid_properties');
      expectStatus(await admin.post('/types', { name: 'acme.cached', schema: { properties: { a: { type: 'string' } } } }), 201);
      await refused();
      expect(cached()).toBe(1);
      expectStatus(await admin.patch('/types/acme.cached', { schema: { properties: { a: { type: 'string' }, b: { type: 'integer' } } } }), 200);
      expect(cached()).toBe(0);
      await refused();
      expect(cached()).toBe(1);
      expectStatus(await admin.delete('/types/acme.cached'), 200);
      expect(cached()).toBe(0);
    });

    it('a type with items → 409 type_in_use for DELETE (trashed items count too); its merge policy may still change', async () => {
      await admin.post('/types', { name: 'acme.used', schema: { properties: { a: { type: 'string' } } } });
      const item = await admin.post('/items', { type: 'acme.used', properties: { a: 'x' } });
      expectStatus(item, 201);
      await admin.delete(`/items/${item.body.id}`);
      const changed = await admin.patch('/types/acme.used', { merge_policy: { a: 'union' } });
      expectStatus(changed, 200);
      expect(changed.body).toMatchObject({ merge_policy: { a: 'union' }, version: 2 });
      expectError(await admin.delete('/types/acme.used'), 409, 'type_in_use');
      expectStatus(await admin.get('/types/acme.used'), 200);
    });

    it('an item written while its type is deleted or changed: one of the two wins, as one after the other would', async () => {
      const schema = { properties: { title: { type: 'string' } } };
      for (let i = 0; i < 12; i++) {
        expectStatus(await admin.post('/types', { name: `acme.race.del${i}`, schema }), 201);
        const [item, removed] = await Promise.all([
          admin.post('/items', { type: `acme.race.del${i}`, properties: { title: 'x' } }),
          admin.delete(`/types/acme.race.del${i}`),
        ]);
        expect([[201, 409], [400, 200]]).toContainEqual([item.status, removed.status]);

        expectStatus(await admin.post('/types', { name: `acme.race.req${i}`, schema }), 201);
        const [written, changed] = await Promise.all([
          admin.post('/items', { type: `acme.race.req${i}`, properties: { title: 'x' } }),
          admin.patch(`/types/acme.race.req${i}`, { schema: { ...schema, required: ['due'] } }),
        ]);
        // Never an item stored without the property its type now requires.
        expect([[201, 409], [400, 200]]).toContainEqual([written.status, changed.status]);
      }
    });

    it('a type with subtypes → 409 type_in_use for DELETE; deleting the subtype first frees the parent', async () => {
      await admin.post('/types', { name: 'acme.parent', schema: { properties: { a: { type: 'string' } } } });
      expectStatus(await admin.post('/types', { name: 'acme.parent.kid', parent: 'acme.parent', schema: {} }), 201);
      expectStatus(await admin.patch('/types/acme.parent', { merge_policy: { a: 'union' } }), 200);
      expectError(await admin.delete('/types/acme.parent'), 409, 'type_in_use');
      expectStatus(await admin.delete('/types/acme.parent.kid'), 200);
      expectStatus(await admin.delete('/types/acme.parent'), 200);
    });
  });

  describe('permissions and tenants', () => {
    it('creating, changing and deleting types needs admin (member → 403 forbidden)', async () => {
      await admin.post('/types', { name: 'acme.guarded', schema: {} });
      const member = api(t, (await createKey(t, adminKey, { role: 'member', type_permissions: { '*': 'write' } })).key);
      expectError(await member.post('/types', { name: 'acme.bymember', schema: {} }), 403, 'forbidden');
      expectError(await member.patch('/types/acme.guarded', { merge_policy: {} }), 403, 'forbidden');
      expectError(await member.delete('/types/acme.guarded'), 403, 'forbidden');
      expectError(await admin.get('/types/acme.bymember'), 404, 'type_not_found');
      expectStatus(await admin.get('/types/acme.guarded'), 200);
    });

    it('a member sees only the types it may read', async () => {
      await admin.post('/types', { name: 'acme.visible', schema: {} });
      await admin.post('/types', { name: 'other.hidden', schema: {} });
      const member = api(t, (await createKey(t, adminKey, { role: 'member', type_permissions: { 'core.note': 'read', 'acme.*': 'write' } })).key);
      const { names } = await walk(member, { limit: 100 });
      expect(names).toContain('core.note');
      expect(names).toContain('acme.visible');
      expect(names).not.toContain('core.bookmark');
      expect(names).not.toContain('other.hidden');
      expect(names.every((n) => n === 'core.note' || n.startsWith('acme.'))).toBe(true);
      expectStatus(await member.get('/types/core.note'), 200);
      expectError(await member.get('/types/core.bookmark'), 404, 'type_not_found');
      expectError(await member.get('/types/other.hidden'), 404, 'type_not_found');
    });

    it('a token that may write types uses as a parent, or names, only types it may read: others are answered as missing, or refused before their existence is told', async () => {
      expectStatus(await admin.post('/types', { name: 'hid.recipe', schema: recipeSchema }), 201);
      expectStatus(await admin.post('/types', { name: 'mine.base', schema: { properties: { a: { type: 'string' } } } }), 201);
      const client = (await t.http.post('/auth/clients').set(bearer(adminKey)).send({ grant_types: ['client_credentials'], scope: 'metadata.types:write mine.*:write' }).expect(201)).body;
      const token = (await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form')
        .send({ grant_type: 'client_credentials', scope: 'metadata.types:write mine.*:write' }).expect(200)).body.access_token as string;
      const tool = api(t, token);
      expectError(await tool.get('/types/hid.recipe'), 404, 'type_not_found');
      // A parent it may not read is a parent that does not exist, message and all.
      const hidden = expectError(await tool.post('/types', { name: 'mine.leak', parent: 'hid.recipe', schema: {} }), 404, 'type_not_found');
      const missing = expectError(await tool.post('/types', { name: 'mine.leak', parent: 'hid.nothing', schema: {} }), 404, 'type_not_found');
      expect(hidden.message).toBe(missing.message.replace('hid.nothing', 'hid.recipe'));
      // A name it could not read is refused whether or not a type has it.
      for (const name of ['hid.recipe', 'hid.nothing']) expectError(await tool.post('/types', { name, schema: {} }), 403, 'forbidden');
      expectError(await admin.get('/types/hid.nothing'), 404, 'type_not_found');
      expectStatus(await admin.patch('/types/hid.recipe', { merge_policy: {} }), 200);
      // What it may read it uses as ever, and a subtype under its own parent, whatever its name, stays its own.
      expectError(await tool.post('/types', { name: 'mine.base', schema: {} }), 409, 'type_already_exists');
      const sub = await tool.post('/types', { name: 'other.sub', parent: 'mine.base', schema: { properties: { b: { type: 'string' } } } });
      expectStatus(sub, 201);
      expectStatus(await tool.get('/types/other.sub'), 200);
      expectStatus(await tool.delete('/types/other.sub'), 200);
    });

    it("another tenant never sees the first tenant's types, and may reuse the names", async () => {
      await admin.post('/types', { name: 'acme.private', schema: { properties: { a: { type: 'string' } } } });
      const other = api(t, (await createTenant(t, adminKey, 'types-other')).key);
      expectError(await other.get('/types/acme.private'), 404, 'type_not_found');
      expect((await other.get('/types')).body.types.map((ty: any) => ty.name)).not.toContain('acme.private');
      expect((await other.get('/types')).body.types.map((ty: any) => ty.name)).toContain('core.note');
      expectError(await other.patch('/types/acme.private', { merge_policy: {} }), 404, 'type_not_found');
      expectError(await other.delete('/types/acme.private'), 404, 'type_not_found');
      expectError(await other.post('/types', { name: 'acme.child', parent: 'acme.private', schema: {} }), 404, 'type_not_found');
      expectError(await other.post('/items', { type: 'acme.private', properties: {} }), 400, 'invalid_type');

      const own = await other.post('/types', { name: 'acme.private', schema: { properties: { b: { type: 'integer' } } } });
      expectStatus(own, 201);
      expect(Object.keys(own.body.schema.properties)).toEqual(['b']);
      expect(Object.keys((await admin.get('/types/acme.private')).body.schema.properties)).toEqual(['a']);
    });
  });
});

describe('types while Redis is away', () => {
  const at = appBehindProxy(['redis']);
  let admin: Api;
  beforeAll(async () => {
    admin = api(at.t, (await bootstrapAdmin(at.t)).key);
  });

  // The change commits before other instances are told: the answer says it was kept, and a
  // silent Redis does not hold the answer until its connection resets.
  it.each<[string, () => Promise<void>]>([
    ['cut', () => at.redis.cut()],
    ['silent', async () => at.redis.stall()],
  ])('a type change is answered as kept when Redis is %s', async (how, away) => {
    const { t, redis } = at;
    await redisUp(t);
    await away();
    const name = `acme.away${how}`;
    expectStatus(await admin.post('/types', { name, schema: { type: 'object' } }), 201);
    expectStatus(await admin.get(`/types/${name}`), 200);
    expectStatus(await admin.delete(`/types/${name}`), 200);
    expectStatus(await admin.get(`/types/${name}`), 404);
    await redis.cut();
    await redis.restore();
  });
});
