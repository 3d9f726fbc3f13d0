/**
 * Member keys against items: type permissions (read vs write, most specific pattern wins,
 * invisible items are 404), extension permissions (unreadable namespaces left out, writes
 * gated), and the metadata routes (tags replace/add/remove, extensions with null removal).
 */
import { bootstrapAdmin, createKey, startApp, TestApp } from '../support/app';
import { Api, api, createItem, expectError, expectStatus, note } from './helpers';

describe('items: permissions and metadata', () => {
  let t: TestApp;
  let adminKey: string;
  let admin: Api;
  let noteItem: Record<string, any>;
  let bookmark: Record<string, any>;

  const EXTENSIONS = { 'acme.public': { p: 1 }, 'acme.mine': { m: 1 }, 'other.secret': { s: 1 } };

  async function member(body: Record<string, unknown>): Promise<Api> {
    return api(t, (await createKey(t, adminKey, { role: 'member', ...body })).key);
  }

  beforeAll(async () => {
    t = await startApp();
    adminKey = (await bootstrapAdmin(t)).key;
    admin = api(t, adminKey);
    noteItem = await createItem(admin, note('shared note', { tags: ['t1'], extensions: EXTENSIONS }));
    bookmark = await createItem(admin, { type: 'core.bookmark', properties: { url: 'https://example.com/secret' }, tags: ['t1'] });
  });
  afterAll(() => t?.close());

  describe("type_permissions {'core.note': 'read'}", () => {
    let reader: Api;
    beforeAll(async () => {
      reader = await member({ type_permissions: { 'core.note': 'read' } });
    });

    it('reads notes', async () => {
      const res = await reader.get(`/items/${noteItem.id}`);
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ id: noteItem.id, properties: { title: 'shared note' }, tags: ['t1'] });
      expectStatus(await reader.get(`/items/${noteItem.id}/versions`), 200);
      expectStatus(await reader.get(`/items/${noteItem.id}/metadata`), 200);
    });

    it('a bookmark is 404 item_not_found on every route, as if it did not exist', async () => {
      const id = bookmark.id;
      expectError(await reader.get(`/items/${id}`), 404, 'item_not_found');
      expectError(await reader.patch(`/items/${id}`, { version: 1, tags: ['x'] }), 404, 'item_not_found');
      expectError(await reader.delete(`/items/${id}`), 404, 'item_not_found');
      expectError(await reader.get(`/items/${id}/versions`), 404, 'item_not_found');
      expectError(await reader.get(`/items/${id}/versions/1`), 404, 'item_not_found');
      expectError(await reader.get(`/items/${id}/metadata`), 404, 'item_not_found');
      expectError(await reader.patch(`/items/${id}/metadata`, { add_tags: ['x'] }), 404, 'item_not_found');
    });

    it('bookmarks are absent from GET /items, whatever the filter', async () => {
      for (const query of [{}, { type: '*' }, { type: 'core.*' }, { type: 'core.bookmark' }, { state: 'all' }, { tags: 't1' }]) {
        const res = await reader.get('/items', query);
        expectStatus(res, 200);
        const types = res.body.items.map((i: any) => i.type);
        expect(types.every((ty: string) => ty === 'core.note')).toBe(true);
      }
      expect((await reader.get('/items', { type: 'core.note' })).body.items.map((i: any) => i.id)).toContain(noteItem.id);
      expect((await reader.get('/items', { type: 'core.bookmark' })).body.items).toEqual([]);
    });

    it('edge and backref filters see no edge to or from a bookmark: they cannot tell that it exists', async () => {
      expectStatus(await admin.post('/edge-types', { name: 'acme.seealso', source_types: ['*'], target_types: ['*'] }), 201);
      const linking = await createItem(admin, note('links to the bookmark', { edges: { 'acme.seealso': [bookmark.id] } }));
      const linked = await createItem(admin, note('linked from the bookmark'));
      expectStatus(await admin.post('/edges', { type: 'acme.seealso', source_id: bookmark.id, target_id: linked.id }), 201);
      const seer = await member({ type_permissions: { 'core.note': 'read' }, edge_permissions: { 'acme.seealso': 'read' } });
      // The admin sees both edges through the filters; the member, who sees both notes, neither.
      expect((await admin.get('/items', { edge: `acme.seealso:${bookmark.id}` })).body.items.map((i: any) => i.id)).toEqual([linking.id]);
      expect((await admin.get('/items', { backref: `acme.seealso:${bookmark.id}` })).body.items.map((i: any) => i.id)).toEqual([linked.id]);
      for (const query of [{ edge: `acme.seealso:${bookmark.id}` }, { backref: `acme.seealso:${bookmark.id}` }]) {
        const res = await seer.get('/items', query);
        expect({ query, items: res.body.items }).toEqual({ query, items: [] });
        const found = await seer.get('/search', { q: 'bookmark', ...query });
        expect({ query, results: found.body.results }).toEqual({ query, results: [] });
      }
      expect((await seer.get('/items', { edge: `acme.seealso:${linked.id}` })).body.items).toEqual([]);
    });

    it('an edge clause of any type (*) means any edge type the member may read; a named one it may not read is 403', async () => {
      for (const name of ['acme.cites', 'acme.hidden']) expectStatus(await admin.post('/edge-types', { name, source_types: ['*'], target_types: ['*'] }), 201);
      const target = await createItem(admin, note('cited'));
      const citing = await createItem(admin, note('cites it', { edges: { 'acme.cites': [target.id] } }));
      const hiding = await createItem(admin, note('hides a link to it', { edges: { 'acme.hidden': [target.id] } }));
      const reader = await member({ type_permissions: { 'core.note': 'read' }, edge_permissions: { 'acme.cites': 'read' } });
      const ids = async (who: Api, query: Record<string, string>) => (await who.get('/items', query)).body.items.map((i: any) => i.id).sort();
      expect(await ids(admin, { edge: `*:${target.id}` })).toEqual([citing.id, hiding.id].sort());
      expect(await ids(reader, { edge: `*:${target.id}` })).toEqual([citing.id]);
      expect(await ids(reader, { backref: `*:${citing.id}` })).toEqual([target.id]);
      expect(await ids(reader, { backref: `*:${hiding.id}` })).toEqual([]);
      expectError(await reader.get('/items', { edge: `acme.hidden:${target.id}` }), 403, 'forbidden');
      // With no edge type to read, `*` matches nothing rather than refusing.
      expect(await ids(await member({ type_permissions: { 'core.note': 'read' } }), { edge: `*:${target.id}` })).toEqual([]);
    });

    it('writing a note → 403 type_not_permitted (create, patch, delete, tags)', async () => {
      expectError(await reader.post('/items', note('nope')), 403, 'type_not_permitted');
      expectError(await reader.patch(`/items/${noteItem.id}`, { version: noteItem.version, properties: { title: 'x' } }), 403, 'type_not_permitted');
      expectError(await reader.delete(`/items/${noteItem.id}`), 403, 'type_not_permitted');
      expectError(await reader.patch(`/items/${noteItem.id}/metadata`, { add_tags: ['x'] }), 403, 'type_not_permitted');
      const bulk = await reader.post('/items/bulk', { mode: 'upsert', items: [note('bulk')] });
      expectStatus(bulk, 200);
      expect(bulk.body.results[0]).toMatchObject({ status: 'error', error: { code: 'type_not_permitted' } });
      expect((await admin.get(`/items/${noteItem.id}`)).body.version).toBe(noteItem.version);
    });

    it('writing a type it may not read is answered as for a type that does not exist: 400 invalid_type, single or bulk', async () => {
      const answer = async (type: string) => {
        const res = await reader.post('/items', { type, properties: { url: 'https://x.test' } });
        const bulk = await reader.post('/items/bulk', { mode: 'upsert', items: [{ type, properties: {} }] });
        expectStatus(bulk, 200);
        // With the name taken out, nothing tells the two apart.
        return JSON.stringify({ status: res.status, body: res.body, bulk: bulk.body.results[0].error }).split(type).join('<type>');
      };
      const missing = await answer('acme.neverdefined');
      expect(JSON.parse(missing)).toMatchObject({ status: 400, body: { error: { code: 'invalid_type', details: { type: '<type>' } } }, bulk: { code: 'invalid_type' } });
      expect(await answer('core.bookmark')).toBe(missing);
      expect((await reader.get('/types/core.bookmark')).status).toBe((await reader.get('/types/acme.neverdefined')).status);
    });

    it('with no extension permissions, no extension namespace is shown', async () => {
      expect((await reader.get(`/items/${noteItem.id}`)).body.extensions).toEqual({});
      expect((await reader.get(`/items/${noteItem.id}/metadata`)).body).toEqual({ item_id: noteItem.id, tags: ['t1'], extensions: {} });
    });
  });

  describe("type_permissions {'core.*': 'write', 'core.bookmark': 'read'} (most specific wins)", () => {
    let writer: Api;
    beforeAll(async () => {
      writer = await member({ type_permissions: { 'core.*': 'write', 'core.bookmark': 'read' } });
    });

    it('writes notes and other core types', async () => {
      const created = await writer.post('/items', note('mine'));
      expectStatus(created, 201);
      expectStatus(await writer.patch(`/items/${created.body.id}`, { version: 1, properties: { title: 'mine 2' } }), 200);
      expectStatus(await writer.post('/items', { type: 'core.task', properties: { title: 'task' } }), 201);
      expectStatus(await writer.delete(`/items/${created.body.id}`), 200);
    });

    it('reads bookmarks but may not write them → 403 type_not_permitted', async () => {
      expectStatus(await writer.get(`/items/${bookmark.id}`), 200);
      expect((await writer.get('/items', { type: 'core.bookmark' })).body.items.map((i: any) => i.id)).toContain(bookmark.id);
      expectError(await writer.post('/items', { type: 'core.bookmark', properties: { url: 'https://x.test' } }), 403, 'type_not_permitted');
      expectError(await writer.patch(`/items/${bookmark.id}`, { version: bookmark.version, properties: { title: 'x' } }), 403, 'type_not_permitted');
      expectError(await writer.delete(`/items/${bookmark.id}`), 403, 'type_not_permitted');
      expect((await admin.get(`/items/${bookmark.id}`)).body).toMatchObject({ version: bookmark.version, state: 'active' });
    });

    it('types outside core are invisible', async () => {
      await admin.post('/types', { name: 'acme.hidden', schema: {} });
      const hidden = await createItem(admin, { type: 'acme.hidden', properties: {} });
      expectError(await writer.get(`/items/${hidden.id}`), 404, 'item_not_found');
      expectError(await writer.post('/items', { type: 'acme.hidden', properties: {} }), 400, 'invalid_type');
      expect((await writer.get('/items', { type: '*' })).body.items.map((i: any) => i.id)).not.toContain(hidden.id);
    });
  });

  describe('extension_permissions', () => {
    let ext: Api;
    beforeAll(async () => {
      ext = await member({ type_permissions: { 'core.note': 'write' }, extension_permissions: { 'acme.*': 'read', 'acme.mine': 'write' } });
    });

    it('unreadable namespaces are left out of items, lists, versions and metadata', async () => {
      const expected = { 'acme.public': { p: 1 }, 'acme.mine': { m: 1 } };
      expect((await ext.get(`/items/${noteItem.id}`)).body.extensions).toEqual(expected);
      const listed = (await ext.get('/items', { type: 'core.note' })).body.items.find((i: any) => i.id === noteItem.id);
      expect(listed.extensions).toEqual(expected);
      const versions = (await ext.get(`/items/${noteItem.id}/versions`)).body.versions;
      expect(versions.every((v: any) => !('other.secret' in v.item.extensions))).toBe(true);
      expect((await ext.get(`/items/${noteItem.id}/versions/${versions[0].version}`)).body).toEqual(versions[0]);
      expect((await ext.get(`/items/${noteItem.id}/metadata`)).body.extensions).toEqual(expected);
    });

    it('a restore brings back the namespaces it may write and leaves the others as they are; a reader may not restore', async () => {
      const item = await createItem(admin, note('restored', { extensions: EXTENSIONS }));
      const changed = await admin.patch(`/items/${item.id}`, {
        version: 1,
        properties: { title: 'changed' },
        extensions: { 'acme.public': { p: 2 }, 'acme.mine': { m: 2 }, 'other.secret': null },
      });
      expectStatus(changed, 200);
      const reader = await member({ type_permissions: { 'core.note': 'read' }, extension_permissions: { 'acme.*': 'write' } });
      expectError(await reader.post(`/items/${item.id}/versions/1/restore`, { version: 2 }), 403, 'type_not_permitted');
      const res = await ext.post(`/items/${item.id}/versions/1/restore`, { version: 2 });
      expectStatus(res, 200);
      expect([res.body.version, res.body.properties, res.body.extensions]).toEqual([3, { title: 'restored' }, { 'acme.public': { p: 2 }, 'acme.mine': { m: 1 } }]);
      expect((await admin.get(`/items/${item.id}`)).body.extensions).toEqual({ 'acme.public': { p: 2 }, 'acme.mine': { m: 1 } });
    });

    it('writing a namespace it may write, on an item whose type it may only read → 403 type_not_permitted', async () => {
      const reader = await member({ type_permissions: { 'core.note': 'read' }, extension_permissions: { 'acme.mine': 'write' } });
      const before = (await admin.get(`/items/${noteItem.id}`)).body;
      expectError(await reader.patch(`/items/${noteItem.id}/metadata`, { extensions: { 'acme.mine': { injected: true } } }), 403, 'type_not_permitted');
      expect((await admin.get(`/items/${noteItem.id}`)).body).toEqual(before);
    });

    it('writing a namespace without write → 403 forbidden, on create, PATCH and metadata', async () => {
      const current = (await admin.get(`/items/${noteItem.id}`)).body;
      expectError(await ext.post('/items', note('x', { extensions: { 'acme.public': { a: 1 } } })), 403, 'forbidden');
      expectError(await ext.post('/items', note('x', { extensions: { 'other.secret': { a: 1 } } })), 403, 'forbidden');
      expectError(await ext.patch(`/items/${noteItem.id}`, { version: current.version, extensions: { 'acme.public': { p: 2 } } }), 403, 'forbidden');
      expectError(await ext.patch(`/items/${noteItem.id}`, { version: current.version, extensions: { 'other.secret': null } }), 403, 'forbidden');
      expectError(await ext.patch(`/items/${noteItem.id}/metadata`, { extensions: { 'acme.public': null } }), 403, 'forbidden');
      expectError(await ext.patch(`/items/${noteItem.id}/metadata`, { extensions: { 'other.secret': { s: 9 } } }), 403, 'forbidden');
      expect((await admin.get(`/items/${noteItem.id}`)).body).toEqual(current);
    });

    it('writing a writable namespace leaves the unreadable ones intact', async () => {
      const item = await createItem(admin, note('ext target', { extensions: EXTENSIONS }));
      const res = await ext.patch(`/items/${item.id}`, { version: 1, extensions: { 'acme.mine': { m: 2 } } });
      expectStatus(res, 200);
      expect(res.body.extensions).toEqual({ 'acme.public': { p: 1 }, 'acme.mine': { m: 2 } });
      expect((await admin.get(`/items/${item.id}`)).body.extensions).toEqual({ ...EXTENSIONS, 'acme.mine': { m: 2 } });

      const created = await ext.post('/items', note('own ext', { extensions: { 'acme.mine': { k: 1 } } }));
      expectStatus(created, 201);
      expect(created.body.extensions).toEqual({ 'acme.mine': { k: 1 } });
    });

    it('a version_conflict payload hides unreadable namespaces too', async () => {
      const item = await createItem(admin, note('conflict', { extensions: EXTENSIONS }));
      await admin.patch(`/items/${item.id}`, { version: 1, properties: { title: 'server' } });
      const res = await ext.patch(`/items/${item.id}`, { version: 1, properties: { title: 'client' } });
      expectError(res, 409, 'version_conflict');
      expect(res.body.error.details.current.extensions).not.toHaveProperty('other.secret');
      expect(res.body.error.details.ancestor.extensions).not.toHaveProperty('other.secret');
    });
  });

  describe('GET and PATCH /items/{id}/metadata', () => {
    it('GET → item_id, tags and extensions', async () => {
      const item = await createItem(admin, note('meta', { tags: ['a'], extensions: { 'acme.one': { x: 1 } } }));
      const res = await admin.get(`/items/${item.id}/metadata`);
      expectStatus(res, 200);
      expect(res.body).toEqual({ item_id: item.id, tags: ['a'], extensions: { 'acme.one': { x: 1 } } });
    });

    it('tags replace, add_tags and remove_tags, each bumping the version', async () => {
      const item = await createItem(admin, note('tags', { tags: ['a', 'b'] }));
      const replaced = await admin.patch(`/items/${item.id}/metadata`, { tags: ['c', 'd'] });
      expectStatus(replaced, 200);
      expect(replaced.body).toEqual({ item_id: item.id, tags: ['c', 'd'], extensions: {} });
      expect((await admin.get(`/items/${item.id}`)).body).toMatchObject({ version: 2, tags: ['c', 'd'] });

      const added = await admin.patch(`/items/${item.id}/metadata`, { add_tags: ['d', 'e'] });
      expect(added.body.tags).toEqual(['c', 'd', 'e']);
      const removed = await admin.patch(`/items/${item.id}/metadata`, { remove_tags: ['c', 'zzz'] });
      expect(removed.body.tags).toEqual(['d', 'e']);
      const both = await admin.patch(`/items/${item.id}/metadata`, { add_tags: ['f'], remove_tags: ['d'] });
      expect(both.body.tags).toEqual(['e', 'f']);
      expect((await admin.get(`/items/${item.id}`)).body).toMatchObject({ version: 5, tags: ['e', 'f'] });
      const history = (await admin.get(`/items/${item.id}/versions`)).body.versions;
      expect(history.map((v: any) => v.item.tags)).toEqual([['e', 'f'], ['d', 'e'], ['c', 'd', 'e'], ['c', 'd'], ['a', 'b']]);
    });

    it('extensions: set, replace and remove with null; other namespaces untouched', async () => {
      const item = await createItem(admin, note('exts', { extensions: { 'acme.one': { x: 1 }, 'acme.two': { y: 1 } } }));
      const res = await admin.patch(`/items/${item.id}/metadata`, { extensions: { 'acme.one': null, 'acme.three': { z: 1 }, 'acme.two': { y: 2 } } });
      expectStatus(res, 200);
      expect(res.body.extensions).toEqual({ 'acme.two': { y: 2 }, 'acme.three': { z: 1 } });
      expect((await admin.get(`/items/${item.id}`)).body).toMatchObject({ version: 2, extensions: { 'acme.two': { y: 2 }, 'acme.three': { z: 1 } } });
    });

    it('a change that changes nothing does not bump the version', async () => {
      const item = await createItem(admin, note('noop', { tags: ['a'] }));
      expectStatus(await admin.patch(`/items/${item.id}/metadata`, { add_tags: ['a'], remove_tags: ['zz'] }), 200);
      expectStatus(await admin.patch(`/items/${item.id}/metadata`, { extensions: { 'acme.none': null } }), 200);
      expect((await admin.get(`/items/${item.id}`)).body.version).toBe(1);
    });

    it('invalid bodies → 400 validation_error', async () => {
      const item = await createItem(admin, note('bad meta'));
      for (const body of [{ tags: 'a' }, { add_tags: [1] }, { remove_tags: ['a,b'] }, { extensions: { 'acme.x': 'str' } }, { extensions: { 'Bad NS': { a: 1 } } }, { colour: 'red' }]) {
        expectError(await admin.patch(`/items/${item.id}/metadata`, body), 400, 'validation_error');
      }
    });
  });
});
