/**
 * SPEC 5.4: a `parent.*` pattern covers the type and its subtypes, also when a subtype's name
 * is not under the parent's (CONTRACT's own example: `acme.recipe` with parent `core.note`).
 * Checked through permissions, the `type` filter of GET /items, and edge type constraints.
 */
import { bearer, bootstrapAdmin, createKey, startApp, TestApp } from '../support/app';

describe('parent.* covers subtypes (e2e)', () => {
  let t: TestApp;
  let admin: string;
  let recipe: string;
  let note: string;
  let bookmark: string;

  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
    const post = (path: string, body: object) => t.http.post(path).set(bearer(admin)).send(body);
    await post('/types', { name: 'acme.recipe', parent: 'core.note', schema: { properties: { servings: { type: 'integer' } } } }).expect(201);
    recipe = (await post('/items', { type: 'acme.recipe', properties: { title: 'soup', servings: 2 } }).expect(201)).body.id;
    note = (await post('/items', { type: 'core.note', properties: { title: 'plain' } }).expect(201)).body.id;
    bookmark = (await post('/items', { type: 'core.bookmark', properties: { url: 'https://example.com' } }).expect(201)).body.id;
  });
  afterAll(() => t.close());

  it('a core.note.* grant reads and writes the subtype; an exact core.note grant does not', async () => {
    const wide = (await createKey(t, admin, { type_permissions: { 'core.note.*': 'write' } })).key;
    const exact = (await createKey(t, admin, { type_permissions: { 'core.note': 'write' } })).key;
    await t.http.get(`/items/${recipe}`).set(bearer(wide)).expect(200);
    await t.http.post('/items').set(bearer(wide)).send({ type: 'acme.recipe', properties: { title: 'stew' } }).expect(201);
    const hidden = await t.http.get(`/items/${recipe}`).set(bearer(exact));
    expect(hidden.status).toBe(404);
    expect(hidden.body.error.code).toBe('item_not_found');
    // The subtype is not readable either: for this key it does not exist.
    const denied = await t.http.post('/items').set(bearer(exact)).send({ type: 'acme.recipe', properties: { title: 'x' } });
    expect(denied.status).toBe(400);
    expect(denied.body.error.code).toBe('invalid_type');
    const listed = await t.http.get('/items').set(bearer(wide)).expect(200);
    const ids = listed.body.items.map((i: { id: string }) => i.id);
    expect(ids).toEqual(expect.arrayContaining([recipe, note]));
    expect(ids).not.toContain(bookmark);
  });

  it('the type filter core.note.* lists the subtype\'s items; core.note lists only notes', async () => {
    const wide = await t.http.get('/items').query({ type: 'core.note.*' }).set(bearer(admin)).expect(200);
    expect(wide.body.items.map((i: { type: string }) => i.type).sort()).toEqual(['acme.recipe', 'acme.recipe', 'core.note']);
    const exact = await t.http.get('/items').query({ type: 'core.note' }).set(bearer(admin)).expect(200);
    expect(exact.body.items.map((i: { type: string }) => i.type)).toEqual(['core.note']);
  });

  it('edge type constraints with core.note.* accept the subtype', async () => {
    await t.http.post('/edge-types').set(bearer(admin)).send({ name: 'acme.cites', source_types: ['core.note.*'], target_types: ['core.note.*'] }).expect(201);
    await t.http.post('/edges').set(bearer(admin)).send({ type: 'acme.cites', source_id: recipe, target_id: note }).expect(201);
    const refused = await t.http.post('/edges').set(bearer(admin)).send({ type: 'acme.cites', source_id: bookmark, target_id: note });
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('edge_constraint_violation');
  });
});
