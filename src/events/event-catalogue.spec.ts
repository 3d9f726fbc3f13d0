import type { Principal } from '../auth/principal';
import { TypeCatalog } from '../types/type-catalog';
import { isEventPattern, lineageTypes, mayReceive, renderBody, selects, StoredEvent } from './event-catalogue';

const member = (over: Partial<Principal>): Principal => ({
  tenantId: 't', credentialId: 'k', kind: 'api_key', role: 'member', isRootTenant: false, source: 's', defaultTier: 'library',
  typePerms: {}, extensionPerms: {}, edgePerms: {}, ...over,
});

const item = {
  id: 'i', type: 'acme.doc.memo', properties: {}, state: 'active', version: 1, schema_version: 1, source: 's', source_id: null,
  timestamp: '', created_at: '', updated_at: '', tier: 'library', tenant_id: 't', device: null, capture_latitude: null,
  capture_longitude: null, edges: {}, extensions: { 'pub.a': { x: 1 }, 'secret.b': { y: 2 } }, tags: ['red'],
} as const;

const itemEvent: StoredEvent = {
  tenant_id: 't', id: 'e1', seq: '1', name: 'item.created', created_at: '',
  audience: { item_type: 'acme.doc.memo' }, payload: { item: item as never },
};
const edge = { id: 'x', type: 'acme.cites', source_id: 'a', target_id: 'b', properties: {}, created_at: '' };
const edgeEvent: StoredEvent = {
  tenant_id: 't', id: 'e2', seq: '2', name: 'edge.created', created_at: '',
  audience: { edge_type: 'acme.cites', source_type: 'core.note', target_type: 'acme.doc.memo' },
  payload: { edge },
};

describe('event catalogue', () => {
  const types = new TypeCatalog([
    { name: 'core.note', parent: null },
    { name: 'acme.doc', parent: null },
    { name: 'acme.doc.memo', parent: 'acme.doc' },
  ]);

  it('knows which patterns name events', () => {
    expect(['*', 'item.*', 'edge.created', 'item.state_changed'].every(isEventPattern)).toBe(true);
    expect(['item.exploded', 'job.*', 'items'].some(isEventPattern)).toBe(false);
  });

  it('selects by event pattern, and by type_filter for item events only', () => {
    expect(selects(['item.*'], null, itemEvent, types)).toBe(true);
    expect(selects(['edge.*'], null, itemEvent, types)).toBe(false);
    expect(selects(['*'], ['acme.doc.*'], itemEvent, types)).toBe(true);
    expect(selects(['*'], ['core.*'], itemEvent, types)).toBe(false);
    expect(selects(['*'], ['core.*'], edgeEvent, types)).toBe(true);
  });

  it('lets a credential receive only what it may read (an edge needs its type and both ends)', () => {
    expect(mayReceive(member({ typePerms: { 'acme.doc.*': 'read' } }), itemEvent, types)).toBe(true);
    expect(mayReceive(member({ typePerms: { 'core.*': 'read' } }), itemEvent, types)).toBe(false);
    expect(mayReceive(member({ typePerms: { '*': 'read' } }), edgeEvent, types)).toBe(false);
    expect(mayReceive(member({ typePerms: { '*': 'read' }, edgePerms: { 'acme.cites': 'read' } }), edgeEvent, types)).toBe(true);
  });

  it('renders the body without unreadable extensions, and without tags for OAuth tokens lacking metadata:read', () => {
    const body = JSON.parse(renderBody(member({ extensionPerms: { 'pub.*': 'read' } }), itemEvent, types));
    expect(body.event).toBe('item.created');
    expect(body.item.extensions).toEqual({ 'pub.a': { x: 1 } });
    expect(body.item.tags).toEqual(['red']);
    expect(JSON.parse(renderBody(member({ kind: 'oauth', scopes: [] }), itemEvent, types)).item).not.toHaveProperty('tags');
    expect(JSON.parse(renderBody(member({}), edgeEvent, types))).toEqual({ event: 'edge.created', edge });
  });

  it('keeps an outgoing edge only when the receiver may read its edge type and its target\'s type, as GET /items/{id}', () => {
    const linked: StoredEvent = {
      ...itemEvent,
      payload: {
        item: { ...item, edges: { 'acme.cites': ['n1', 'm1'], 'secret.link': ['d1'] } } as never,
        edge_targets: { n1: 'core.note', m1: 'acme.doc.memo', d1: 'acme.doc' },
      },
    };
    const edgesFor = (p: Principal, e = linked) => JSON.parse(renderBody(p, e, types)).item.edges;
    expect(edgesFor(member({ typePerms: { 'acme.doc.*': 'read' } }))).toEqual({});
    expect(edgesFor(member({ typePerms: { 'acme.doc.*': 'read' }, edgePerms: { 'acme.*': 'read' } }))).toEqual({ 'acme.cites': ['m1'] });
    expect(edgesFor(member({ typePerms: { '*': 'read' }, edgePerms: { '*': 'read' } }))).toEqual({ 'acme.cites': ['n1', 'm1'], 'secret.link': ['d1'] });
    expect(edgesFor(member({ role: 'admin' }))).toEqual({ 'acme.cites': ['n1', 'm1'], 'secret.link': ['d1'] });
    // The field keeps its place in the item, and the target types are never sent.
    const body = JSON.parse(renderBody(member({ role: 'admin' }), linked, types));
    expect(Object.keys(body)).toEqual(['event', 'item']);
    expect(Object.keys(body.item).indexOf('edges')).toBe(Object.keys(item).indexOf('edges'));
    // Stored without target types (before they were kept): an admin's only.
    const unknown: StoredEvent = { ...linked, payload: { item: (linked.payload as { item: never }).item } };
    expect(edgesFor(member({ typePerms: { '*': 'read' }, edgePerms: { '*': 'read' } }), unknown)).toEqual({});
    expect(edgesFor(member({ role: 'admin' }), unknown)).toEqual({ 'acme.cites': ['n1', 'm1'], 'secret.link': ['d1'] });
  });

  it('keeps in the lineage the types of an item\'s edge targets beside its own, once each', () => {
    expect(lineageTypes(itemEvent)).toEqual(['acme.doc.memo']);
    expect(lineageTypes({ ...itemEvent, payload: { item: item as never, edge_targets: { n1: 'core.note', m1: 'acme.doc.memo', n2: 'core.note' } } })).toEqual(['acme.doc.memo', 'core.note']);
    expect(lineageTypes(edgeEvent)).toEqual(['core.note', 'acme.doc.memo']);
    expect(lineageTypes({ ...edgeEvent, audience: { job_credential: 'k' }, payload: { job: {} } })).toEqual([]);
  });

  it('judges an edge target\'s type by its parents when the event was written, else (not in the lineage) as it is now', () => {
    // `acme.task` was under `acme.doc` when written; a type of that name is now under `zz.base`.
    const now = new TypeCatalog([{ name: 'core.note', parent: null }, { name: 'zz.base', parent: null }, { name: 'acme.task', parent: 'zz.base' }]);
    const written = (lineage?: Record<string, string[]>): StoredEvent => ({
      ...itemEvent,
      audience: { item_type: 'core.note', ...(lineage && { lineage }) },
      payload: { item: { ...item, type: 'core.note', edges: { 'acme.cites': ['t1'] } } as never, edge_targets: { t1: 'acme.task' } },
    });
    const readerOf = (parent: string) => member({ typePerms: { 'core.note': 'read', [`${parent}.*`]: 'read' }, edgePerms: { 'acme.cites': 'read' } });
    const edgesFor = (parent: string, e: StoredEvent) => JSON.parse(renderBody(readerOf(parent), e, now)).item.edges;
    const settled = written({ 'core.note': [], 'acme.task': ['acme.doc'] });
    expect(edgesFor('acme.doc', settled)).toEqual({ 'acme.cites': ['t1'] });
    expect(edgesFor('zz.base', settled)).toEqual({});
    // Stored before the lineage covered edge targets, or before there was one: as the types are now.
    for (const before of [written({ 'core.note': [] }), written()]) {
      expect(edgesFor('acme.doc', before)).toEqual({});
      expect(edgesFor('zz.base', before)).toEqual({ 'acme.cites': ['t1'] });
    }
  });
});
