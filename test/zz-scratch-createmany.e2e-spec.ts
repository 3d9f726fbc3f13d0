import { DataSource } from 'typeorm';
import { EdgesService } from '../src/edges/edges.service';
import type { Principal } from '../src/auth/principal';
import { bearer, bootstrapAdmin, startApp, TestApp } from './support/app';

describe('scratch createMany', () => {
  let t: TestApp;
  let key: string;
  let p: Principal;
  beforeAll(async () => {
    t = await startApp();
    const a = await bootstrapAdmin(t);
    key = a.key;
    p = { tenantId: a.tenantId, credentialId: a.id, kind: 'api_key', role: 'admin', isRootTenant: true, source: 's', defaultTier: 'library', typePerms: {}, extensionPerms: {}, edgePerms: {} };
    for (const body of [
      { name: 'x.rel', source_types: ['*'], target_types: ['*'] },
      { name: 'x.one', source_types: ['*'], target_types: ['*'], cardinality: 'one' },
      { name: 'x.dag', source_types: ['*'], target_types: ['*'], acyclic: true },
    ]) await t.http.post('/edge-types').set(bearer(key)).send(body).expect(201);
  });
  afterAll(() => t.close());
  const item = async () => (await t.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties: { title: 'x' } }).expect(201)).body.id;

  it('works', async () => {
    const svc = t.app.get(EdgesService);
    const db = t.app.get(DataSource);
    const [s, a, b, c] = [await item(), await item(), await item(), await item()];
    const src = { id: s, type: 'core.note' };
    const run = (edges: any) => db.transaction((m) => svc.createMany(m, p, src, edges));
    const created = await run({ 'x.rel': [a, b], 'x.one': [c], 'x.dag': [a] });
    expect(created.map((e) => `${e.type}:${e.target_id}`)).toEqual([`x.dag:${a}`, `x.one:${c}`, `x.rel:${a}`, `x.rel:${b}`]);
    expect(await run({ 'x.rel': [a, b], 'x.one': [c] })).toEqual([]); // idempotent
    expect(await run({})).toEqual([]);
    await expect(run({ 'x.one': [a] })).rejects.toMatchObject({ code: 'edge_constraint_violation', details: { reason: 'cardinality' } });
    await expect(run({ 'x.rel': [c, c] })).rejects.toMatchObject({ code: 'edge_constraint_violation', details: { reason: 'duplicate' } });
    await expect(run({ 'x.dag': [s] })).rejects.toMatchObject({ code: 'edge_cycle' });
    await db.transaction((m) => svc.createMany(m, p, { id: a, type: 'core.note' }, { 'x.dag': [b] }));
    await expect(db.transaction((m) => svc.createMany(m, p, { id: b, type: 'core.note' }, { 'x.dag': [c, s] }))).rejects.toMatchObject({ code: 'edge_cycle', details: { target_id: s } });
    await expect(run({ 'x.nope': [a] })).rejects.toMatchObject({ code: 'edge_type_not_found' });
    await expect(run({ 'x.rel': ['bad'] })).rejects.toMatchObject({ code: 'invalid_id', details: { field: 'edges.x.rel[0]' } });
    await expect(run({ 'x.rel': 'bad' })).rejects.toMatchObject({ code: 'validation_error' });
    await expect(run({ 'x.rel': ['6f1c1a34-98b1-4e6b-9c43-3c1d5c0b3f3e'] })).rejects.toMatchObject({ code: 'item_not_found' });
    const member = { ...p, role: 'member' as const, typePerms: { 'core.note': 'write' as const }, edgePerms: { 'x.rel': 'read' as const } };
    await expect(db.transaction((m) => svc.createMany(m, member, src, { 'x.rel': [a] }))).rejects.toMatchObject({ code: 'edge_permission_denied' });
    const out = await svc.outgoingFor(p, [s, a, c]);
    expect(out.get(s)).toEqual({ 'x.rel': [a, b], 'x.one': [c], 'x.dag': [a] });
    expect(out.get(a)).toEqual({ 'x.dag': [b] });
    expect(out.get(c)).toEqual({});
    const memberRead = { ...member, edgePerms: { 'x.rel': 'read' as const } };
    expect((await svc.outgoingFor(memberRead, [s])).get(s)).toEqual({ 'x.rel': [a, b] });
    expect((await svc.outgoingFor(p, [])).size).toBe(0);
    const many = [] as string[];
    for (let i = 0; i < 12; i++) many.push(await item());
    const z = await item();
    await db.transaction((m) => svc.createMany(m, p, { id: z, type: 'core.note' }, { 'x.rel': many }));
    expect((await svc.outgoingFor(p, [z])).get(z)).toEqual({ 'x.rel': many });
    const listed = await t.http.get(`/items/${z}/edges?limit=5`).set(bearer(key)).expect(200);
    expect(listed.body.edges.map((e: any) => e.target_id)).toEqual([...many].reverse().slice(0, 5));
  });
});
