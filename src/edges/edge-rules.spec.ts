import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { assertEdgeWrite, assertSourceWrite, canSeeEdge, endAllowed, lockKey } from './edge-rules';

const member = (typePerms: Principal['typePerms'], edgePerms: Principal['edgePerms']): Principal => ({
  tenantId: 't1',
  credentialId: 'k1',
  kind: 'api_key',
  role: 'member',
  isRootTenant: false,
  source: 's',
  defaultTier: 'library',
  typePerms,
  extensionPerms: {},
  edgePerms,
});

describe('edge rules', () => {
  it('matches item types against the edge type\'s patterns', () => {
    const et = { source_types: ['core.note', 'acme.*'], target_types: ['*'] };
    expect(endAllowed(et, 'source', 'core.note')).toBe(true);
    expect(endAllowed(et, 'source', 'acme')).toBe(true);
    expect(endAllowed(et, 'source', 'acme.recipe.vegan')).toBe(true);
    expect(endAllowed(et, 'source', 'core.note.sub')).toBe(false);
    expect(endAllowed(et, 'source', 'core.bookmark')).toBe(false);
    expect(endAllowed(et, 'target', 'anything.at.all')).toBe(true);
  });

  it('locks type-wide for acyclic types, per source for `one` types, not at all otherwise', () => {
    expect(lockKey('t', { name: 'a.b', cardinality: 'many', acyclic: true }, 's')).toBe('edges:t:a.b');
    expect(lockKey('t', { name: 'a.b', cardinality: 'one', acyclic: true }, 's')).toBe('edges:t:a.b');
    expect(lockKey('t', { name: 'a.b', cardinality: 'one', acyclic: false }, 's')).toBe('edges:t:a.b:s');
    expect(lockKey('t', { name: 'a.b', cardinality: 'many', acyclic: false }, 's')).toBeUndefined();
  });

  it('needs read on the edge type and both item types to see an edge', () => {
    const p = member({ 'core.note': 'read' }, { 'x.*': 'read' });
    expect(canSeeEdge(p, { edge_type: 'x.rel', source_type: 'core.note', target_type: 'core.note' })).toBe(true);
    expect(canSeeEdge(p, { edge_type: 'y.rel', source_type: 'core.note', target_type: 'core.note' })).toBe(false);
    expect(canSeeEdge(p, { edge_type: 'x.rel', source_type: 'core.note', target_type: 'core.bookmark' })).toBe(false);
  });

  it('gates mutations on both edge-type write and source item-type write', () => {
    const code = (fn: () => void) => {
      try {
        fn();
        return undefined;
      } catch (err) {
        return err instanceof ApiError ? [err.status, err.code, err.details?.missing] : err;
      }
    };
    const p = member({ 'core.note': 'write', 'core.task': 'read' }, { 'x.rel': 'write', 'x.ro': 'read' });
    expect(code(() => assertEdgeWrite(p, 'x.rel'))).toBeUndefined();
    expect(code(() => assertEdgeWrite(p, 'x.ro'))).toEqual([403, 'edge_permission_denied', 'edge_type_write']);
    expect(code(() => assertSourceWrite(p, 'core.note'))).toBeUndefined();
    expect(code(() => assertSourceWrite(p, 'core.task'))).toEqual([403, 'edge_permission_denied', 'item_type_write']);
    expect(code(() => assertEdgeWrite({ ...p, role: 'admin' }, 'anything'))).toBeUndefined();
  });
});
