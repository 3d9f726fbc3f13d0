import type { PermissionMap } from '../keys/api-key.entity';
import { canEdgeType, canExtension, canMetadata, canType, hasScope, isAdmin } from './permissions';
import type { Principal } from './principal';

function principal(over: Partial<Principal> = {}): Principal {
  return {
    tenantId: 't1',
    credentialId: 'k1',
    kind: 'api_key',
    role: 'member',
    isRootTenant: false,
    source: 'src',
    defaultTier: 'library',
    typePerms: {},
    extensionPerms: {},
    edgePerms: {},
    ...over,
  };
}

describe('permissions', () => {
  it('admins pass every check, with empty maps and no scopes', () => {
    const admin = principal({ role: 'admin' });
    expect(isAdmin(admin)).toBe(true);
    expect(canType(admin, 'core.note', 'write')).toBe(true);
    expect(canExtension(admin, 'acme', 'write')).toBe(true);
    expect(canEdgeType(admin, 'links_to', 'write')).toBe(true);
    expect(canMetadata(admin, 'write')).toBe(true);
    expect(canMetadata({ ...admin, kind: 'oauth', scopes: [] }, 'write')).toBe(true);
    expect(hasScope(admin, 'metadata.types:write')).toBe(true);
  });

  it('members with empty maps may do nothing', () => {
    const m = principal();
    expect(isAdmin(m)).toBe(false);
    expect(canType(m, 'core.note', 'read')).toBe(false);
    expect(canExtension(m, 'acme', 'read')).toBe(false);
    expect(canEdgeType(m, 'links_to', 'read')).toBe(false);
    expect(hasScope(m, 'metadata.types:write')).toBe(false);
  });

  it('write implies read; read does not imply write', () => {
    const m = principal({ typePerms: { 'core.note': 'write', 'core.bookmark': 'read' } });
    expect(canType(m, 'core.note', 'read')).toBe(true);
    expect(canType(m, 'core.note', 'write')).toBe(true);
    expect(canType(m, 'core.bookmark', 'read')).toBe(true);
    expect(canType(m, 'core.bookmark', 'write')).toBe(false);
    expect(canType(m, 'core.task', 'read')).toBe(false);
  });

  it('the most specific pattern decides, in either direction', () => {
    const perms: PermissionMap = { '*': 'read', 'core.*': 'write', 'core.secret': 'read' };
    const m = principal({ typePerms: perms });
    expect(canType(m, 'acme.recipe', 'read')).toBe(true);
    expect(canType(m, 'acme.recipe', 'write')).toBe(false);
    expect(canType(m, 'core.note', 'write')).toBe(true);
    expect(canType(m, 'core.secret', 'read')).toBe(true);
    expect(canType(m, 'core.secret', 'write')).toBe(false);

    const narrowWrite = principal({ typePerms: { 'core.note.*': 'read', 'core.note': 'write' } });
    expect(canType(narrowWrite, 'core.note', 'write')).toBe(true);
    expect(canType(narrowWrite, 'core.note.draft', 'write')).toBe(false);
  });

  it('the three maps are independent', () => {
    const m = principal({ typePerms: { '*': 'write' }, extensionPerms: { 'acme.*': 'read' }, edgePerms: { links_to: 'write' } });
    expect(canExtension(m, 'acme.geo', 'read')).toBe(true);
    expect(canExtension(m, 'acme.geo', 'write')).toBe(false);
    expect(canExtension(m, 'other', 'read')).toBe(false);
    expect(canEdgeType(m, 'links_to', 'write')).toBe(true);
    expect(canEdgeType(m, 'parent_of', 'read')).toBe(false);
  });

  describe('canMetadata', () => {
    it('API keys follow their type permissions, so metadata itself is open to them', () => {
      expect(canMetadata(principal(), 'write')).toBe(true);
    });

    it('OAuth tokens need metadata scopes; write implies read', () => {
      const oauth = (scopes?: string[]) => principal({ kind: 'oauth', scopes });
      expect(canMetadata(oauth(undefined), 'read')).toBe(false);
      expect(canMetadata(oauth([]), 'read')).toBe(false);
      expect(canMetadata(oauth(['items:read']), 'read')).toBe(false);
      expect(canMetadata(oauth(['metadata:read']), 'read')).toBe(true);
      expect(canMetadata(oauth(['metadata:read']), 'write')).toBe(false);
      expect(canMetadata(oauth(['metadata:write']), 'write')).toBe(true);
      expect(canMetadata(oauth(['metadata:write']), 'read')).toBe(true);
    });

    it('hasScope is satisfied by the exact scope only', () => {
      const oauth = principal({ kind: 'oauth', scopes: ['metadata.types:read'] });
      expect(hasScope(oauth, 'metadata.types:read')).toBe(true);
      expect(hasScope(oauth, 'metadata.types:write')).toBe(false);
    });
  });
});
