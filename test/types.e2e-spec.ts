/**
 * Types over HTTP: core types are listed and immutable; tenant types are created with
 * validated JSON Schemas, inherit from a parent without contradicting it, carry merge
 * policies, can change only while unused, are admin-only to write and are tenant-scoped.
 */
import { Api, api, expectError, expectStatus, RFC3339 } from './items/helpers';
import { bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';

describe('types', () => {
  let t: TestApp;
  let admin: Api;
  let adminKey: string;

  beforeAll(async () => {
    t = await startApp();
    adminKey = (await bootstrapAdmin(t)).key;
    admin = api(t, adminKey);
  });
  afterAll(() => t?.close());

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

    it('kind=core and kind=tenant split the list', async () => {
      await admin.post('/types', { name: 'kind.split', schema: {} });
      const core = await admin.get('/types', { kind: 'core' });
      const tenant = await admin.get('/types', { kind: 'tenant' });
      expect(core.body.types.every((ty: any) => ty.core === true)).toBe(true);
      expect(tenant.body.types.every((ty: any) => ty.core === false)).toBe(true);
      expect(tenant.body.types.map((ty: any) => ty.name)).toContain('kind.split');
      expectError(await admin.get('/types', { kind: 'bogus' }), 400, 'validation_error');
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

    it('items of the new type are validated against its schema', async () => {
      const ok = await admin.post('/items', { type: 'acme.recipe', properties: { title: 'Pasta', servings: 2, cuisine: 'it' } });
      expectStatus(ok, 201);
      expect(ok.body.schema_version).toBe(1);
      const bad = await admin.post('/items', { type: 'acme.recipe', properties: { title: 'Pasta', servings: 0, cuisine: 'xx' } });
      expectError(bad, 400, 'invalid_properties');
      expect(bad.body.error.details.fields.map((f: any) => f.field).sort()).toEqual(['properties.cuisine', 'properties.servings']);
      expectError(await admin.post('/items', { type: 'acme.recipe', properties: { servings: 2 } }), 400, 'missing_required_field');
    });

    it('a duplicate name → 409 type_already_exists', async () => {
      await admin.post('/types', { name: 'acme.dup', schema: {} });
      expectError(await admin.post('/types', { name: 'acme.dup', schema: { properties: { a: { type: 'string' } } } }), 409, 'type_already_exists');
    });

    it.each<[string, unknown]>([
      ['a non-object root type', { type: 'string' }],
      ['an unknown property type', { properties: { a: { type: 'nonsense' } } }],
      ['properties as an array', { properties: [] }],
      ['a non-boolean searchable', { properties: { a: { type: 'string', searchable: 'no' } } }],
    ])('an invalid schema (%s) → 400 invalid_schema', async (_, schema) => {
      expectError(await admin.post('/types', { name: 'acme.badschema', schema }), 400, 'invalid_schema');
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

      expectError(await admin.patch('/types/acme.free', { schema: { type: 'string' } }), 400, 'invalid_schema');
      expectError(await admin.patch('/types/acme.free', { merge_policy: { a: 'nope' } }), 400, 'validation_error');

      const deleted = await admin.delete('/types/acme.free');
      expectStatus(deleted, 200);
      expect(deleted.body.name).toBe('acme.free');
      expectError(await admin.get('/types/acme.free'), 404, 'type_not_found');
      expectError(await admin.delete('/types/acme.free'), 404, 'type_not_found');
      expectError(await admin.patch('/types/acme.missing', { merge_policy: {} }), 404, 'type_not_found');
    });

    it('a type with items → 409 type_in_use for PATCH and DELETE (trashed items count too)', async () => {
      await admin.post('/types', { name: 'acme.used', schema: { properties: { a: { type: 'string' } } } });
      const item = await admin.post('/items', { type: 'acme.used', properties: { a: 'x' } });
      expectStatus(item, 201);
      await admin.delete(`/items/${item.body.id}`);
      expectError(await admin.patch('/types/acme.used', { merge_policy: { a: 'union' } }), 409, 'type_in_use');
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

    it('a type with subtypes → 409 type_in_use; deleting the subtype first frees the parent', async () => {
      await admin.post('/types', { name: 'acme.parent', schema: { properties: { a: { type: 'string' } } } });
      expectStatus(await admin.post('/types', { name: 'acme.parent.kid', parent: 'acme.parent', schema: {} }), 201);
      expectError(await admin.patch('/types/acme.parent', { merge_policy: { a: 'union' } }), 409, 'type_in_use');
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
      const res = await member.get('/types');
      expectStatus(res, 200);
      const names: string[] = res.body.types.map((ty: any) => ty.name);
      expect(names).toContain('core.note');
      expect(names).toContain('acme.visible');
      expect(names).not.toContain('core.bookmark');
      expect(names).not.toContain('other.hidden');
      expect(names.every((n) => n === 'core.note' || n.startsWith('acme.'))).toBe(true);
      expectStatus(await member.get('/types/core.note'), 200);
      expectError(await member.get('/types/core.bookmark'), 404, 'type_not_found');
      expectError(await member.get('/types/other.hidden'), 404, 'type_not_found');
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
