/**
 * Edges over HTTP against real Postgres and Redis: edge types, edge creation with every rule
 * of SPEC part 7 (rules 2 and 3), reads, listing by direction and type, deletion, a concurrent
 * cardinality race, and tenant isolation.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { MAX_OUTGOING_EDGES } from '../src/edges/edges.service';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { expectLocation, expectReplayed } from './support/created';
import { withClockSkew } from './support/clock';
import { badFields, expectError } from './support/envelope';
import { waitFor } from './support/wait';

describe('edges (e2e)', () => {
  let t: TestApp;
  let admin: string;
  let other: string; // admin of a second tenant

  const post = (key: string, path: string, body: unknown) => t.http.post(path).set(bearer(key)).send(body as object);
  const get = (key: string, path: string) => t.http.get(path).set(bearer(key));
  const del = (key: string, path: string) => t.http.delete(path).set(bearer(key));

  async function item(key = admin, type = 'core.note'): Promise<string> {
    const properties = type === 'core.bookmark' ? { url: 'https://example.com/x', title: 'x' } : { title: 'x' };
    const res = await post(key, '/items', { type, properties });
    if (res.status !== 201) throw new Error(`item creation failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.id;
  }

  async function edgeType(body: Record<string, unknown>): Promise<void> {
    const res = await post(admin, '/edge-types', body);
    if (res.status !== 201) throw new Error(`edge type creation failed: ${res.status} ${JSON.stringify(res.body)}`);
  }

  function link(type: string, source: string, target: string, key = admin) {
    return post(key, '/edges', { type, source_id: source, target_id: target });
  }

  const code = (res: { body: { error?: { code?: string } } }) => res.body.error?.code;

  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
    other = (await createTenant(t, admin, 'other')).key;
    await edgeType({ name: 'test.relates', source_types: ['core.*'], target_types: ['*'] });
    await edgeType({ name: 'test.parent', source_types: ['core.note'], target_types: ['core.note'], cardinality: 'one' });
    await edgeType({ name: 'test.depends_on', source_types: ['core.note'], target_types: ['core.note'], acyclic: true });
    await edgeType({ name: 'test.bookmarks', source_types: ['core.bookmark'], target_types: ['core.note'] });
  });
  afterAll(() => t.close());

  describe('edge types', () => {
    it('answers Location: /edge-types/{name}, which GET reads', async () => {
      const res = await post(admin, '/edge-types', { name: 'test.located', source_types: ['*'], target_types: ['*'] });
      expect((await expectLocation(t, res, '/edge-types/test.located', admin)).body).toEqual(res.body);
    });

    it('takes an Idempotency-Key: a retry gets the first 201 again, not 409 conflict, and the type is made once', async () => {
      const define = (name: string) => () => post(admin, '/edge-types', { name, source_types: ['*'], target_types: ['*'] });
      await expectReplayed(define('test.once'), define('test.other'), 201);
      expect(await t.sql(`SELECT name FROM edge_types WHERE name IN ('test.once', 'test.other')`)).toEqual([{ name: 'test.once' }]);
    });

    it('creates with defaults and shows the full shape', async () => {
      const res = await post(admin, '/edge-types', {
        name: 'test.shape',
        source_types: ['core.note', 'core.*'],
        target_types: ['*'],
        description: 'for shape',
      }).expect(201);
      expect(res.body).toEqual({
        name: 'test.shape',
        source_types: ['core.note', 'core.*'],
        target_types: ['*'],
        cardinality: 'many',
        acyclic: false,
        description: 'for shape',
        created_at: expect.any(String),
      });
      expect(Number.isNaN(Date.parse(res.body.created_at))).toBe(false);
      const again = await get(admin, '/edge-types/test.shape').expect(200);
      expect(again.body).toEqual(res.body);
    });

    it('refuses a taken name with 409 conflict', async () => {
      const res = await post(admin, '/edge-types', { name: 'test.relates', source_types: ['*'], target_types: ['*'] }).expect(409);
      expect(code(res)).toBe('conflict');
    });

    it('validates the body', async () => {
      for (const body of [
        { name: 'Bad Name', source_types: ['*'], target_types: ['*'] },
        { name: 'test.x', source_types: [], target_types: ['*'] },
        { name: 'test.x', source_types: ['core.*.x'], target_types: ['*'] },
        { name: 'test.x', source_types: ['*'], target_types: ['*'], cardinality: 'two' },
        { name: 'test.x', source_types: ['*'], target_types: ['*'], acyclic: 'yes' },
        { name: 'test.x', source_types: ['*'] },
      ]) {
        const res = await post(admin, '/edge-types', body).expect(400);
        expect(code(res)).toBe('validation_error');
      }
    });

    it('is admin-only to create and delete', async () => {
      const member = await createKey(t, admin, { role: 'member', type_permissions: { '*': 'write' }, edge_permissions: { '*': 'write' } });
      const res = await post(member.key, '/edge-types', { name: 'test.member', source_types: ['*'], target_types: ['*'] }).expect(403);
      expect(code(res)).toBe('forbidden');
      expect(code(await del(member.key, '/edge-types/test.relates').expect(403))).toBe('forbidden');
    });

    it('lists and retrieves only the edge types the caller may read', async () => {
      const all = await get(admin, '/edge-types').expect(200);
      const names = all.body.edge_types.map((e: { name: string }) => e.name);
      expect(names).toEqual(expect.arrayContaining(['test.relates', 'test.parent', 'test.depends_on', 'test.bookmarks']));
      expect(names).toEqual([...names].sort());

      const member = await createKey(t, admin, { role: 'member', type_permissions: { '*': 'read' }, edge_permissions: { 'test.relates': 'read' } });
      const mine = await get(member.key, '/edge-types').expect(200);
      expect(mine.body.edge_types.map((e: { name: string }) => e.name)).toEqual(['test.relates']);
      await get(member.key, '/edge-types/test.relates').expect(200);
      expect(code(await get(member.key, '/edge-types/test.parent').expect(404))).toBe('edge_type_not_found');
      expect(code(await get(admin, '/edge-types/test.nope').expect(404))).toBe('edge_type_not_found');
    });

    it('lists a page at a time by name, without gaps or repeats, a member\'s pages holding only what it may read', async () => {
      const tenant = await createTenant(t, admin, 'edge-type-paging');
      const names = ['pg.e', 'pg.a', 'pg.d', 'pg.c', 'pg.b'];
      for (const name of names) await post(tenant.key, '/edge-types', { name, source_types: ['*'], target_types: ['*'] }).expect(201);
      const walk = async (key: string, limit: number) => {
        const seen: string[] = [];
        const sizes: number[] = [];
        let cursor: string | null = null;
        do {
          const res: { body: { edge_types: Array<{ name: string }>; next_cursor: string | null } } = await t.http
            .get('/edge-types')
            .query({ limit, ...(cursor ? { cursor } : {}) })
            .set(bearer(key))
            .expect(200);
          expect(Object.keys(res.body).sort()).toEqual(['edge_types', 'next_cursor']);
          sizes.push(res.body.edge_types.length);
          seen.push(...res.body.edge_types.map((e) => e.name));
          cursor = res.body.next_cursor;
        } while (cursor && sizes.length < 50);
        return { seen, sizes };
      };
      expect(await walk(tenant.key, 2)).toEqual({ seen: [...names].sort(), sizes: [2, 2, 1] });
      expect(await walk(tenant.key, 5)).toEqual({ seen: [...names].sort(), sizes: [5] });
      const whole = await get(tenant.key, '/edge-types').expect(200);
      expect([whole.body.edge_types.map((e: { name: string }) => e.name), whole.body.next_cursor]).toEqual([[...names].sort(), null]);

      const member = await createKey(t, tenant.key, { role: 'member', edge_permissions: { 'pg.a': 'read', 'pg.c': 'read', 'pg.e': 'read' } });
      expect(await walk(member.key, 2)).toEqual({ seen: ['pg.a', 'pg.c', 'pg.e'], sizes: [2, 1] });
    });

    it('a limit out of 1..100 or a cursor it did not issue is 400 validation_error', async () => {
      for (const limit of ['0', '101', 'x', '1.5']) expect(badFields(await t.http.get('/edge-types').query({ limit }).set(bearer(admin)))).toEqual(['limit']);
      const forged = (position: unknown) => Buffer.from(JSON.stringify(position)).toString('base64url');
      for (const cursor of ['garbage', forged(['not a date', 'test.relates']), forged({}), forged(['2026-01-01T00:00:00.000Z', 'Not A Name'])]) {
        expect(badFields(await t.http.get('/edge-types').query({ cursor }).set(bearer(admin)))).toEqual(['cursor']);
      }
    });

    it('deletes an unused edge type, and refuses one with edges with 409 conflict', async () => {
      await edgeType({ name: 'test.doomed', source_types: ['*'], target_types: ['*'] });
      const a = await item();
      const b = await item();
      const e = await link('test.doomed', a, b).expect(201);
      expect(code(await del(admin, '/edge-types/test.doomed').expect(409))).toBe('conflict');
      await del(admin, `/edges/${e.body.id}`).expect(200);
      const res = await del(admin, '/edge-types/test.doomed').expect(200);
      expect(res.body.name).toBe('test.doomed');
      expect(code(await get(admin, '/edge-types/test.doomed').expect(404))).toBe('edge_type_not_found');
      expect(code(await del(admin, '/edge-types/test.doomed').expect(404))).toBe('edge_type_not_found');
      expect(code(await link('test.doomed', a, b).expect(404))).toBe('edge_type_not_found');
    });
  });

  describe('creating edges', () => {
    it('answers Location: /edges/{id}, which GET reads', async () => {
      const res = await link('test.relates', await item(), await item());
      expect((await expectLocation(t, res, `/edges/${res.body.id}`, admin)).body).toEqual(res.body);
    });

    it('takes an Idempotency-Key: a retry gets the first 201 again, not 400 duplicate, and links once', async () => {
      const [a, b, c] = [await item(), await item(), await item()];
      await expectReplayed(() => link('test.relates', a, b), () => link('test.relates', a, c), 201);
      expect(await t.sql(`SELECT target_id FROM edges WHERE source_id = $1`, [a])).toEqual([{ target_id: b }]);
    });

    it('creates an edge and reads it back', async () => {
      const a = await item();
      const b = await item();
      const res = await post(admin, '/edges', { type: 'test.relates', source_id: a, target_id: b, properties: { weight: 2 } }).expect(201);
      expect(res.body).toEqual({
        id: expect.any(String),
        type: 'test.relates',
        source_id: a,
        target_id: b,
        properties: { weight: 2 },
        created_at: expect.any(String),
      });
      const got = await get(admin, `/edges/${res.body.id}`).expect(200);
      expect(got.body).toEqual(res.body);
      const plain = await link('test.relates', b, a).expect(201);
      expect(plain.body.properties).toEqual({});
    });

    it('answers 400 invalid_id for malformed ids', async () => {
      const a = await item();
      expect(code(await link('test.relates', 'nope', a).expect(400))).toBe('invalid_id');
      expect(code(await link('test.relates', a, '1234').expect(400))).toBe('invalid_id');
      expect(code(await get(admin, '/edges/not-an-id').expect(400))).toBe('invalid_id');
      expect(code(await del(admin, '/edges/not-an-id').expect(400))).toBe('invalid_id');
      expect(code(await get(admin, '/items/not-an-id/edges').expect(400))).toBe('invalid_id');
    });

    it('answers 400 validation_error for a malformed body', async () => {
      const a = await item();
      const b = await item();
      expect(code(await post(admin, '/edges', { source_id: a, target_id: b }).expect(400))).toBe('validation_error');
      expect(code(await post(admin, '/edges', { type: 'test.relates', source_id: a, target_id: b, properties: [1] }).expect(400))).toBe(
        'validation_error',
      );
      expect(code(await post(admin, '/edges', { type: 'test.relates', source_id: a, target_id: b, extra: 1 }).expect(400))).toBe(
        'validation_error',
      );
    });

    it('answers 404 edge_type_not_found for an unknown edge type', async () => {
      const a = await item();
      const b = await item();
      expect(code(await link('test.unknown', a, b).expect(404))).toBe('edge_type_not_found');
    });

    it('answers 404 item_not_found for a missing source or target', async () => {
      const a = await item();
      const r1 = await link('test.relates', randomUUID(), a).expect(404);
      expect(code(r1)).toBe('item_not_found');
      expect(r1.body.error.details.field).toBe('source_id');
      const r2 = await link('test.relates', a, randomUUID()).expect(404);
      expect(code(r2)).toBe('item_not_found');
      expect(r2.body.error.details.field).toBe('target_id');
    });

    it('answers 400 edge_constraint_violation (type) when an item type is outside the patterns', async () => {
      const note = await item();
      const bookmark = await item(admin, 'core.bookmark');
      const asSource = await link('test.bookmarks', note, note).expect(400);
      expect(code(asSource)).toBe('edge_constraint_violation');
      expect(asSource.body.error.details).toMatchObject({ reason: 'type', end: 'source', item_type: 'core.note' });
      const asTarget = await link('test.bookmarks', bookmark, bookmark).expect(400);
      expect(code(asTarget)).toBe('edge_constraint_violation');
      expect(asTarget.body.error.details).toMatchObject({ reason: 'type', end: 'target', item_type: 'core.bookmark' });
      await link('test.bookmarks', bookmark, note).expect(201);
    });

    it('answers 400 edge_constraint_violation (duplicate) for the same type, source and target', async () => {
      const a = await item();
      const b = await item();
      const first = await link('test.relates', a, b).expect(201);
      const res = await link('test.relates', a, b).expect(400);
      expect(code(res)).toBe('edge_constraint_violation');
      expect(res.body.error.details).toMatchObject({ reason: 'duplicate', existing_edge_id: first.body.id });
      // Another type between the same items, and the reverse direction, are different edges.
      await link('test.parent', a, b).expect(201);
      await link('test.relates', b, a).expect(201);
    });

    it('answers 400 edge_constraint_violation (cardinality) for a second outgoing edge of a `one` type', async () => {
      const a = await item();
      const b = await item();
      const c = await item();
      await link('test.parent', a, b).expect(201);
      const res = await link('test.parent', a, c).expect(400);
      expect(code(res)).toBe('edge_constraint_violation');
      expect(res.body.error.details).toMatchObject({ reason: 'cardinality' });
      // Cardinality counts outgoing edges only: c may point at b too, and b at a.
      await link('test.parent', c, b).expect(201);
      await link('test.parent', b, a).expect(201);
    });

    it('lets exactly one of two concurrent `one` edges from the same source through', async () => {
      for (let round = 0; round < 5; round++) {
        const a = await item();
        const b = await item();
        const c = await item();
        const results = await Promise.all([link('test.parent', a, b), link('test.parent', a, c)]);
        const statuses = results.map((r) => r.status).sort();
        expect(statuses).toEqual([201, 400]);
        expect(results.map(code).filter(Boolean)).toEqual(['edge_constraint_violation']);
        const list = await get(admin, `/items/${a}/edges?direction=outgoing&type=test.parent`).expect(200);
        expect(list.body.edges).toHaveLength(1);
      }
    });

    it('lets exactly one of two concurrent identical edges through', async () => {
      const a = await item();
      const b = await item();
      const results = await Promise.all([link('test.relates', a, b), link('test.relates', a, b), link('test.relates', a, b)]);
      expect(results.map((r) => r.status).sort()).toEqual([201, 400, 400]);
      for (const r of results.filter((x) => x.status === 400)) expect(r.body.error.details.reason).toBe('duplicate');
    });
  });

  describe('cycles', () => {
    it('refuses a self-loop on an acyclic type with 400 edge_cycle', async () => {
      const a = await item();
      expect(code(await link('test.depends_on', a, a).expect(400))).toBe('edge_cycle');
    });

    it('refuses the edge closing a 2- or 3-node cycle with 400 edge_cycle', async () => {
      const a = await item();
      const b = await item();
      const c = await item();
      await link('test.depends_on', a, b).expect(201);
      expect(code(await link('test.depends_on', b, a).expect(400))).toBe('edge_cycle');
      await link('test.depends_on', b, c).expect(201);
      const res = await link('test.depends_on', c, a).expect(400);
      expect(code(res)).toBe('edge_cycle');
      expect(res.body.error.details).toMatchObject({ edge_type: 'test.depends_on', source_id: c, target_id: a });
      // A shortcut that adds no cycle is fine, and so is a cycle through another type.
      await link('test.depends_on', a, c).expect(201);
      await link('test.relates', c, a).expect(201);
    });

    it('allows cycles and self-loops on a type that is not acyclic', async () => {
      const a = await item();
      const b = await item();
      const c = await item();
      await link('test.relates', a, b).expect(201);
      await link('test.relates', b, c).expect(201);
      await link('test.relates', c, a).expect(201);
      await link('test.relates', a, a).expect(201);
    });

    it('serialises concurrent edges that would close a cycle together', async () => {
      for (let round = 0; round < 5; round++) {
        const a = await item();
        const b = await item();
        const results = await Promise.all([link('test.depends_on', a, b), link('test.depends_on', b, a)]);
        expect(results.map((r) => r.status).sort()).toEqual([201, 400]);
        expect(results.map(code).filter(Boolean)).toEqual(['edge_cycle']);
      }
    });

    it('accepts a wide fan of targets into a shared DAG, and still refuses a cycle through it naming the edge that closes it', async () => {
      // Every top reaches the hub and every leaf, so the check must not walk the DAG once per target.
      const notes = (n: number, extra: (i: number) => Record<string, unknown> = () => ({})) =>
        Array.from({ length: n }, (_, i) => ({ type: 'core.note', properties: { title: 'x' }, ...extra(i) }));
      const bulk = async (items: unknown[]): Promise<string[]> =>
        (await post(admin, '/items/bulk', { mode: 'create_only', items }).expect(200)).body.results.map((r: { id: string }) => r.id);
      const natural = `fan-${randomUUID()}`;
      const leaves = await bulk(notes(300, (i) => (i === 0 ? { source: 'test.fan', source_id: natural } : {})));
      const [hub] = await bulk(notes(1, () => ({ edges: { 'test.depends_on': leaves } })));
      const tops = await bulk(notes(300, () => ({ edges: { 'test.depends_on': [hub] } })));

      const fan = await post(admin, '/items', { type: 'core.note', properties: { title: 'fan' }, edges: { 'test.depends_on': tops } }).expect(201);
      expect(fan.body.edges['test.depends_on']).toEqual(tops);

      const back = await link('test.depends_on', leaves[0], fan.body.id).expect(400);
      expect(code(back)).toBe('edge_cycle');
      expect(back.body.error.details).toMatchObject({ edge_type: 'test.depends_on', source_id: leaves[0], target_id: fan.body.id });

      // Among many new edges, the one whose target reaches the source is named, and none is created.
      const targets = [...leaves.slice(1, 100), fan.body.id, ...leaves.slice(100, 200)];
      const upsert = await post(admin, '/items', {
        type: 'core.note',
        properties: { title: 'x' },
        source: 'test.fan',
        source_id: natural,
        edges: { 'test.depends_on': targets },
      }).expect(400);
      expect(code(upsert)).toBe('edge_cycle');
      expect(upsert.body.error.details).toMatchObject({ edge_type: 'test.depends_on', source_id: leaves[0], target_id: fan.body.id });
      expect((await get(admin, `/items/${leaves[0]}/edges?direction=outgoing`).expect(200)).body.edges).toEqual([]);
    });
  });

  describe('permissions', () => {
    let a: string;
    let b: string;
    let bookmark: string;
    beforeAll(async () => {
      a = await item();
      b = await item();
      bookmark = await item(admin, 'core.bookmark');
    });

    it('answers 403 edge_permission_denied without write on the source item type', async () => {
      const member = await createKey(t, admin, { role: 'member', type_permissions: { 'core.note': 'read' }, edge_permissions: { '*': 'write' } });
      const res = await link('test.relates', a, b, member.key).expect(403);
      expect(code(res)).toBe('edge_permission_denied');
      expect(res.body.error.details).toMatchObject({ missing: 'item_type_write' });
    });

    it('answers 403 edge_permission_denied without write on the edge type', async () => {
      const member = await createKey(t, admin, {
        role: 'member',
        type_permissions: { 'core.*': 'write' },
        edge_permissions: { 'test.relates': 'read', 'test.parent': 'write' },
      });
      const res = await link('test.relates', a, b, member.key).expect(403);
      expect(code(res)).toBe('edge_permission_denied');
      expect(res.body.error.details).toMatchObject({ missing: 'edge_type_write' });
      const none = await createKey(t, admin, { role: 'member', type_permissions: { 'core.*': 'write' } });
      expect(code(await link('test.relates', a, b, none.key).expect(403))).toBe('edge_permission_denied');
      await link('test.parent', a, b, member.key).expect(201);
    });

    it('applies the dual gate to deletion too', async () => {
      const e = await link('test.relates', a, bookmark).expect(201);
      const readOnlyEdges = await createKey(t, admin, { role: 'member', type_permissions: { '*': 'write' }, edge_permissions: { '*': 'read' } });
      const readOnlyItems = await createKey(t, admin, { role: 'member', type_permissions: { '*': 'read' }, edge_permissions: { '*': 'write' } });
      const writer = await createKey(t, admin, { role: 'member', type_permissions: { 'core.note': 'write', 'core.bookmark': 'read' }, edge_permissions: { 'test.*': 'write' } });
      expect(code(await del(readOnlyEdges.key, `/edges/${e.body.id}`).expect(403))).toBe('edge_permission_denied');
      expect(code(await del(readOnlyItems.key, `/edges/${e.body.id}`).expect(403))).toBe('edge_permission_denied');
      await get(admin, `/edges/${e.body.id}`).expect(200);
      const res = await del(writer.key, `/edges/${e.body.id}`).expect(200);
      expect(res.body).toEqual(e.body);
      expect(code(await get(admin, `/edges/${e.body.id}`).expect(404))).toBe('edge_not_found');
      expect(code(await del(admin, `/edges/${e.body.id}`).expect(404))).toBe('edge_not_found');
    });

    it('answers 404 item_not_found for a source or target the caller cannot see', async () => {
      const notesOnly = await createKey(t, admin, { role: 'member', type_permissions: { 'core.note': 'write' }, edge_permissions: { '*': 'write' } });
      const r1 = await link('test.relates', a, bookmark, notesOnly.key).expect(404);
      expect(code(r1)).toBe('item_not_found');
      expect(r1.body.error.details.field).toBe('target_id');
      const r2 = await link('test.bookmarks', bookmark, a, notesOnly.key).expect(404);
      expect(code(r2)).toBe('item_not_found');
      expect(r2.body.error.details.field).toBe('source_id');
      await link('test.relates', b, a, notesOnly.key).expect(201);
    });

    it('hides edges whose edge type or items the caller cannot read', async () => {
      const x = await item();
      const y = await item();
      const bm = await item(admin, 'core.bookmark');
      const toNote = await link('test.relates', x, y).expect(201);
      const toBookmark = await link('test.relates', x, bm).expect(201);
      const parent = await link('test.parent', x, y).expect(201);
      const reader = await createKey(t, admin, { role: 'member', type_permissions: { 'core.note': 'read' }, edge_permissions: { 'test.relates': 'read' } });
      await get(reader.key, `/edges/${toNote.body.id}`).expect(200);
      expect(code(await get(reader.key, `/edges/${toBookmark.body.id}`).expect(404))).toBe('edge_not_found');
      expect(code(await get(reader.key, `/edges/${parent.body.id}`).expect(404))).toBe('edge_not_found');
      const list = await get(reader.key, `/items/${x}/edges`).expect(200);
      expect(list.body.edges.map((e: { id: string }) => e.id)).toEqual([toNote.body.id]);
      expect(code(await get(reader.key, `/items/${bm}/edges`).expect(404))).toBe('item_not_found');
    });
  });

  describe('listing an item\'s edges', () => {
    let hub: string;
    let out1: string;
    let out2: string;
    let in1: string;
    const ids: Record<string, string> = {};
    beforeAll(async () => {
      hub = await item();
      out1 = await item();
      out2 = await item();
      in1 = await item();
      ids.out1 = (await link('test.relates', hub, out1).expect(201)).body.id;
      ids.out2 = (await link('test.parent', hub, out2).expect(201)).body.id;
      ids.in1 = (await link('test.relates', in1, hub).expect(201)).body.id;
      ids.in2 = (await link('test.depends_on', in1, hub).expect(201)).body.id;
    });

    const listed = async (query: string) =>
      (await get(admin, `/items/${hub}/edges${query}`).expect(200)).body.edges.map((e: { id: string }) => e.id).sort();

    it('lists by direction, both by default', async () => {
      expect(await listed('')).toEqual([ids.out1, ids.out2, ids.in1, ids.in2].sort());
      expect(await listed('?direction=both')).toEqual([ids.out1, ids.out2, ids.in1, ids.in2].sort());
      expect(await listed('?direction=outgoing')).toEqual([ids.out1, ids.out2].sort());
      expect(await listed('?direction=incoming')).toEqual([ids.in1, ids.in2].sort());
    });

    it('lists by edge type or pattern', async () => {
      expect(await listed('?type=test.relates')).toEqual([ids.out1, ids.in1].sort());
      expect(await listed('?type=test.relates&direction=incoming')).toEqual([ids.in1]);
      expect(await listed('?type=test.*')).toEqual([ids.out1, ids.out2, ids.in1, ids.in2].sort());
      expect(await listed('?type=other.*')).toEqual([]);
      expect(code(await get(admin, `/items/${hub}/edges?type=Not A Pattern`).expect(400))).toBe('validation_error');
      expect(code(await get(admin, `/items/${hub}/edges?direction=sideways`).expect(400))).toBe('validation_error');
    });

    it('pages with a cursor, newest first', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const res: { body: { edges: Array<{ id: string }>; next_cursor: string | null } } = await get(
          admin,
          `/items/${hub}/edges?limit=3${cursor ? `&cursor=${cursor}` : ''}`,
        ).expect(200);
        seen.push(...res.body.edges.map((e) => e.id));
        cursor = res.body.next_cursor;
        pages++;
      } while (cursor && pages < 10);
      expect(pages).toBe(2);
      expect(seen).toEqual([ids.in2, ids.in1, ids.out2, ids.out1]);
      expect(code(await get(admin, `/items/${hub}/edges?cursor=garbage`).expect(400))).toBe('validation_error');
    });

    it('answers 404 item_not_found for an unknown item', async () => {
      expect(code(await get(admin, `/items/${randomUUID()}/edges`).expect(404))).toBe('item_not_found');
    });
  });

  describe('listing the tenant\'s edges (GET /edges)', () => {
    // A tenant of its own, so the listing's whole content is known.
    let own: { key: string; tenantId: string };
    let note1: string;
    let note2: string;
    let bookmark: string;
    const made: Array<{ id: string; type: string; created_at: string }> = [];
    const newestFirst = () => [...made].reverse().map((e) => e.id);

    beforeAll(async () => {
      own = await createTenant(t, admin, 'edge-listing');
      for (const [name, targets] of [['l.relates', ['*']], ['l.cites', ['*']], ['m.other', ['*']]] as const) {
        await post(own.key, '/edge-types', { name, source_types: ['*'], target_types: targets }).expect(201);
      }
      note1 = await item(own.key);
      note2 = await item(own.key);
      bookmark = await item(own.key, 'core.bookmark');
      for (const [type, source, target] of [
        ['l.relates', note1, note2],
        ['l.cites', note1, bookmark],
        ['m.other', note2, note1],
        ['l.relates', bookmark, note1],
        ['l.relates', note2, note2],
      ] as const) {
        made.push((await link(type, source, target, own.key).expect(201)).body);
      }
      // Another tenant's edge of the same type name, which must never show.
      const neighbour = (await createTenant(t, admin, 'edge-listing-neighbour')).key;
      await post(neighbour, '/edge-types', { name: 'l.relates', source_types: ['*'], target_types: ['*'] }).expect(201);
      const theirs = await item(neighbour);
      await link('l.relates', theirs, theirs, neighbour).expect(201);
    });

    const all = async (key: string, query: Record<string, string | number> = {}) => {
      const seen: Array<{ id: string }> = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const res: { body: { edges: Array<{ id: string }>; next_cursor: string | null } } = await t.http
          .get('/edges')
          .query({ ...query, ...(cursor ? { cursor } : {}) })
          .set(bearer(key))
          .expect(200);
        seen.push(...res.body.edges);
        cursor = res.body.next_cursor;
        pages++;
      } while (cursor && pages < 20);
      return { ids: seen.map((e) => e.id), edges: seen, pages };
    };

    it('lists every edge of the tenant newest first, page by page, in the shape GET /edges/{id} has', async () => {
      const paged = await all(own.key, { limit: 2 });
      expect(paged.ids).toEqual(newestFirst());
      expect(paged.pages).toBe(3);
      const one = await get(own.key, `/edges/${made[0].id}`).expect(200);
      expect(paged.edges.find((e) => e.id === made[0].id)).toEqual(one.body);
      expect((await all(own.key)).ids).toEqual(newestFirst());
    });

    it('narrows by edge type name or pattern, and by a created_at window', async () => {
      const ofType = (type: string) => [...made].reverse().filter((e) => type === '*' || e.type === type || (type.endsWith('.*') && e.type.startsWith(type.slice(0, -1)))).map((e) => e.id);
      for (const type of ['l.relates', 'l.*', 'm.other', '*', 'n.*', 'l.none']) {
        expect([type, (await all(own.key, { type, limit: 2 })).ids]).toEqual([type, ofType(type)]);
      }
      const third = made[2].created_at;
      expect((await all(own.key, { since: third })).ids).toEqual(newestFirst().slice(0, 3));
      expect((await all(own.key, { until: third })).ids).toEqual(newestFirst().slice(3));
      expect((await all(own.key, { since: third, until: third })).ids).toEqual([]);
    });

    it('shows a member only the edges of readable edge types between items of readable types', async () => {
      const member = await createKey(t, own.key, { role: 'member', type_permissions: { 'core.note': 'read' }, edge_permissions: { 'l.*': 'read' } });
      // l.relates note1→note2 and note2→note2; not l.cites (to a bookmark), not m.other, not bookmark→note1.
      expect((await all(member.key)).ids).toEqual([made[4].id, made[0].id]);
      const none = await createKey(t, own.key, { role: 'member', type_permissions: { '*': 'read' } });
      expect((await all(none.key)).ids).toEqual([]);
    });

    it('refuses bad parameters with 400 validation_error naming them, and a cursor of another list', async () => {
      for (const [query, field] of [
        [{ type: 'Not A Pattern' }, 'type'],
        [{ since: 'yesterday' }, 'since'],
        [{ until: '2026-13-01T00:00:00Z' }, 'until'],
        [{ limit: 0 }, 'limit'],
        [{ cursor: 'garbage' }, 'cursor'],
        [{ direction: 'outgoing' }, 'direction'],
      ] as const) {
        const res = await t.http.get('/edges').query(query).set(bearer(own.key)).expect(400);
        expect([query, code(res), badFields(res)]).toEqual([query, 'validation_error', [field]]);
      }
      const itemCursor = (await get(own.key, `/items/${note1}/edges?limit=1`).expect(200)).body.next_cursor;
      const res = await t.http.get('/edges').query({ cursor: itemCursor }).set(bearer(own.key)).expect(400);
      expect([code(res), badFields(res)]).toEqual(['validation_error', ['cursor']]);
    });

    it('stamps created_at by the database\'s clock, whatever the server\'s own says, so since= selects alike on every instance', async () => {
      const [source, target] = [await item(own.key), await item(own.key)];
      const [{ before }] = await t.sql<{ before: Date }>(`SELECT date_trunc('milliseconds', now()) AS before`);
      const made = await withClockSkew(-120_000, () => link('l.relates', source, target, own.key));
      expect(made.status).toBe(201);
      const [{ after }] = await t.sql<{ after: Date }>(`SELECT now() AS after`);
      const at = Date.parse(made.body.created_at);
      expect([at >= before.getTime(), at <= after.getTime()]).toEqual([true, true]);
      expect((await all(own.key, { since: before.toISOString() })).ids).toEqual([made.body.id]);
      await del(own.key, `/edges/${made.body.id}`).expect(200);
    });

    it('is in /openapi.json', async () => {
      const doc = (await t.http.get('/openapi.json').expect(200)).body;
      const names = (doc.paths['/edges'].get.parameters as Array<{ name: string; in: string }>).filter((p) => p.in === 'query').map((p) => p.name).sort();
      expect(names).toEqual(['cursor', 'limit', 'since', 'type', 'until']);
    });
  });

  describe('tenant isolation', () => {
    it('hides one tenant\'s edges and edge types from another, and refuses links to its items', async () => {
      const a = await item();
      const b = await item();
      const e = await link('test.relates', a, b).expect(201);

      expect(code(await get(other, `/edges/${e.body.id}`).expect(404))).toBe('edge_not_found');
      expect(code(await del(other, `/edges/${e.body.id}`).expect(404))).toBe('edge_not_found');
      expect(code(await get(other, `/items/${a}/edges`).expect(404))).toBe('item_not_found');
      expect(code(await get(other, '/edge-types/test.relates').expect(404))).toBe('edge_type_not_found');
      expect(code(await del(other, '/edge-types/test.relates').expect(404))).toBe('edge_type_not_found');
      const list = await get(other, '/edge-types').expect(200);
      expect(list.body.edge_types).toEqual([]);

      // Its own edge type of the same name, but the first tenant's items stay out of reach.
      await post(other, '/edge-types', { name: 'test.relates', source_types: ['*'], target_types: ['*'] }).expect(201);
      const mine = await item(other);
      expect(code(await link('test.relates', a, b, other).expect(404))).toBe('item_not_found');
      expect(code(await link('test.relates', mine, a, other).expect(404))).toBe('item_not_found');
      expect(code(await link('test.relates', a, mine, other).expect(404))).toBe('item_not_found');
      expect(code(await link('test.parent', mine, mine, other).expect(404))).toBe('edge_type_not_found');
      await link('test.relates', mine, mine, other).expect(201);

      // The first tenant's view is untouched.
      await get(admin, `/edges/${e.body.id}`).expect(200);
      const own = await get(admin, '/edge-types/test.relates').expect(200);
      expect(own.body.target_types).toEqual(['*']);
      await del(other, '/edge-types/test.relates').expect(409);
    });
  });

  // These go through the items module: ItemsService fills Item.edges with
  // EdgesService.outgoingFor and creates a write's `edges` field with EdgesService.createMany.
  describe('Item.edges', () => {
    it('shows outgoing edges on the item, grouped by edge type in creation order', async () => {
      const a = await item();
      const b = await item();
      const c = await item();
      await link('test.relates', a, b).expect(201);
      await link('test.relates', a, c).expect(201);
      await link('test.parent', a, b).expect(201);
      await link('test.relates', c, a).expect(201); // incoming to a: not in a.edges
      const res = await get(admin, `/items/${a}`).expect(200);
      expect(res.body.edges).toEqual({ 'test.relates': [b, c], 'test.parent': [b] });
      const listed = await get(admin, `/items?limit=100`).expect(200);
      expect(listed.body.items.find((i: { id: string }) => i.id === a).edges).toEqual(res.body.edges);
    });

    it('leaves out edges of unreadable edge types and to invisible targets', async () => {
      const x = await item();
      const y = await item();
      const bm = await item(admin, 'core.bookmark');
      await link('test.relates', x, y).expect(201);
      await link('test.relates', x, bm).expect(201);
      await link('test.parent', x, y).expect(201);
      const reader = await createKey(t, admin, { role: 'member', type_permissions: { 'core.note': 'read' }, edge_permissions: { 'test.relates': 'read' } });
      const shown = await get(reader.key, `/items/${x}`).expect(200);
      expect(shown.body.edges).toEqual({ 'test.relates': [y] });
    });

    it('creates the `edges` of POST /items with the same rules', async () => {
      const b = await item();
      const c = await item();
      const res = await post(admin, '/items', {
        type: 'core.note',
        properties: { title: 'with edges' },
        source_id: 'edges-upsert-1',
        edges: { 'test.relates': [b, c], 'test.parent': [b] },
      }).expect(201);
      expect(res.body.edges).toEqual({ 'test.relates': [b, c], 'test.parent': [b] });
      const incoming = await get(admin, `/items/${b}/edges?direction=incoming`).expect(200);
      expect(incoming.body.edges.map((e: { source_id: string }) => e.source_id)).toEqual([res.body.id, res.body.id]);

      // Re-sending the upsert keeps the existing edges instead of calling them duplicates.
      const again = await post(admin, '/items', {
        type: 'core.note',
        properties: { title: 'with edges' },
        source_id: 'edges-upsert-1',
        edges: { 'test.relates': [b, c], 'test.parent': [b] },
      }).expect(200);
      expect(again.body.edges).toEqual({ 'test.relates': [b, c], 'test.parent': [b] });
      // A target named twice is one edge, as a tag sent twice is one tag.
      const twice = await post(admin, '/items', {
        type: 'core.note',
        properties: { title: 'with edges' },
        source_id: 'edges-upsert-1',
        edges: { 'test.relates': [b, b, c, c], 'test.parent': [b, b] },
      }).expect(200);
      expect(twice.body.edges).toEqual({ 'test.relates': [b, c], 'test.parent': [b] });
      const fresh = await post(admin, '/items', { type: 'core.note', properties: { title: 'twice' }, edges: { 'test.relates': [c, c] } }).expect(201);
      expect(fresh.body.edges).toEqual({ 'test.relates': [c] });
      // More than 1000 in one write, under one type or several: the field names the limit.
      for (const edges of [{ 'test.relates': Array(1001).fill(b) }, { 'test.relates': Array(600).fill(b), 'test.parent': Array(401).fill(c) }]) {
        const tooMany = await post(admin, '/items', { type: 'core.note', properties: { title: 'x' }, edges }).expect(400);
        expect(code(tooMany)).toBe('validation_error');
        expect(tooMany.body.error.details.fields).toEqual([expect.objectContaining({ field: 'edges', message: expect.stringContaining('1000') })]);
      }

      const bad = [
        [{ 'test.unknown': [b] }, 404, 'edge_type_not_found'],
        [{ 'test.relates': [randomUUID()] }, 404, 'item_not_found'],
        [{ 'test.relates': ['nope'] }, 400, 'invalid_id'],
        [{ 'test.parent': [b, c] }, 400, 'edge_constraint_violation'],
        [{ 'test.bookmarks': [b] }, 400, 'edge_constraint_violation'],
      ] as const;
      for (const [edges, status, errorCode] of bad) {
        const r = await post(admin, '/items', { type: 'core.note', properties: { title: 'x' }, edges }).expect(status);
        expect(code(r)).toBe(errorCode);
        // The item was not created: an error about it does not name it by an id that leads nowhere.
        if (errorCode === 'edge_constraint_violation') {
          const named = JSON.stringify(r.body.error).match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? [];
          expect(named.filter((id) => id !== b && id !== c)).toEqual([]);
        }
      }
      const noEdgeWrite = await createKey(t, admin, { role: 'member', type_permissions: { 'core.note': 'write' }, edge_permissions: { 'test.relates': 'read' } });
      const denied = await post(noEdgeWrite.key, '/items', { type: 'core.note', properties: { title: 'x' }, edges: { 'test.relates': [b] } }).expect(403);
      expect(code(denied)).toBe('edge_permission_denied');
    });
  });

  it(`caps an item's outgoing edges at ${MAX_OUTGOING_EDGES}, all types together`, async () => {
    const bulk = await post(admin, '/items/bulk', {
      mode: 'create_only',
      items: Array.from({ length: MAX_OUTGOING_EDGES }, (_, i) => ({ type: 'core.note', properties: { title: `member ${i}` } })),
    }).expect(200);
    const members: string[] = bulk.body.results.map((r: { id: string }) => r.id);
    const hub = (await post(admin, '/items', { type: 'core.note', properties: { title: 'hub' }, edges: { 'test.relates': members } }).expect(201)).body;
    const extra = await item();
    const refused = await link('test.parent', hub.id, extra);
    expectError(refused, 400, 'edge_constraint_violation');
    expect(refused.body.error.details).toMatchObject({ reason: 'limit', limit: MAX_OUTGOING_EDGES, existing: MAX_OUTGOING_EDGES });
    // Below the cap again, it links.
    await del(admin, `/edges/${(await get(admin, `/items/${hub.id}/edges`).expect(200)).body.edges[0].id}`).expect(200);
    expect((await link('test.parent', hub.id, extra)).status).toBe(201);
  });

  it('documents every edge route in the OpenAPI document', async () => {
    const res = await t.http.get('/openapi.json').expect(200);
    const paths = res.body.paths as Record<string, Record<string, unknown>>;
    expect(Object.keys(paths['/edge-types'] ?? {})).toEqual(expect.arrayContaining(['get', 'post']));
    expect(Object.keys(paths['/edge-types/{name}'] ?? {})).toEqual(expect.arrayContaining(['get', 'delete']));
    expect(Object.keys(paths['/edges'] ?? {}).sort()).toEqual(['get', 'head', 'post']);
    expect(Object.keys(paths['/edges/{id}'] ?? {})).toEqual(expect.arrayContaining(['get', 'delete']));
    expect(Object.keys(paths['/items/{id}/edges'] ?? {})).toEqual(['get', 'head']);
  });
  describe('beside a writer locking both ends in id order, as a purge does', () => {
    // The other session holds the lower id, the edge's write waits for it, and the session then
    // asks for the higher: an edge whose write had key-share locked one end already (the
    // foreign key checks did, one end after the other) deadlocked with it, one of the two lost.
    it.each([
      ['from the higher id to the lower', true],
      ['from the lower id to the higher', false],
    ])('an edge %s waits its turn and is written', async (_, higherFirst) => {
      const [low, high] = [await item(), await item()].sort();
      const holder = new Client({ connectionString: t.databaseUrl });
      await holder.connect();
      try {
        await holder.query(`SET deadlock_timeout = '60s'`); // were there a deadlock, the edge's write would be the one to lose it
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM items WHERE id = $1 FOR UPDATE', [low]);
        const [{ pid }] = (await holder.query('SELECT pg_backend_pid() AS pid')).rows;
        const edge = link('test.relates', higherFirst ? high : low, higherFirst ? low : high).then((r) => r);
        await waitFor(async () => (await t.sql(`SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, [pid])).length > 0, 'the edge waiting');
        await holder.query('SELECT 1 FROM items WHERE id = $1 FOR UPDATE', [high]);
        await holder.query('ROLLBACK');
        expect((await edge).status).toBe(201);
      } finally {
        await holder.end();
      }
    });
  });
});
