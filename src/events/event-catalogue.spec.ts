import type { Principal } from '../auth/principal';
import { TypeCatalog } from '../types/types.service';
import { isEventPattern, mayReceive, renderBody, selects, StoredEvent } from './event-catalogue';

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
});
