import { thrownApiError } from '../../test/support/thrown';
import type { Principal } from '../auth/principal';
import { assertEdgeWrite, assertSourceWrite, canSeeEdge, endAllowed, lockKey } from './edge-rules';
import { TypeCatalog } from '../types/type-catalog';

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
    const p = member({ 'core.note.*': 'read' }, { 'x.*': 'read' });
    const types = new TypeCatalog([
      { name: 'core.note', parent: null },
      { name: 'core.bookmark', parent: null },
      { name: 'acme.recipe', parent: 'core.note' },
    ]);
    expect(canSeeEdge(p, { edge_type: 'x.rel', source_type: 'core.note', target_type: 'core.note' }, types)).toBe(true);
    expect(canSeeEdge(p, { edge_type: 'y.rel', source_type: 'core.note', target_type: 'core.note' }, types)).toBe(false);
    expect(canSeeEdge(p, { edge_type: 'x.rel', source_type: 'core.note', target_type: 'core.bookmark' }, types)).toBe(false);
    // A subtype of core.note is covered by `core.note.*` whatever its own name.
    expect(canSeeEdge(p, { edge_type: 'x.rel', source_type: 'acme.recipe', target_type: 'core.note' }, types)).toBe(true);
  });

  it('gates mutations on both edge-type write and source item-type write', () => {
    const code = (fn: () => void) => {
      const err = thrownApiError(fn);
      return err && [err.status, err.code, err.details?.missing];
    };
    const p = member({ 'core.note': 'write', 'core.task': 'read' }, { 'x.rel': 'write', 'x.ro': 'read' });
    expect(code(() => assertEdgeWrite(p, 'x.rel'))).toBeUndefined();
    expect(code(() => assertEdgeWrite(p, 'x.ro'))).toEqual([403, 'edge_permission_denied', 'edge_type_write']);
    expect(code(() => assertSourceWrite(p, { name: 'core.note', ancestors: [] }))).toBeUndefined();
    expect(code(() => assertSourceWrite(p, { name: 'core.task', ancestors: [] }))).toEqual([403, 'edge_permission_denied', 'item_type_write']);
    expect(code(() => assertEdgeWrite({ ...p, role: 'admin' }, 'anything'))).toBeUndefined();
  });
});
