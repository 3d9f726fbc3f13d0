import { isApiScope, isKnownScope, parseScope, permissionsOf } from './scopes';

describe('the scope grammar (SPEC 5.4)', () => {
  it.each([
    ['core.note:read', { kind: 'type', name: 'core.note', access: 'read' }],
    ['core.bookmark.*:write', { kind: 'type', name: 'core.bookmark.*', access: 'write' }],
    ['*:read', { kind: 'type', name: '*', access: 'read' }],
    ['edge.acme.links:write', { kind: 'edge', name: 'acme.links', access: 'write' }],
    ['metadata:read', { kind: 'metadata', name: 'metadata:read' }],
    ['metadata.types:write', { kind: 'metadata', name: 'metadata.types:write' }],
  ])('%s parses', (scope, parsed) => expect(parseScope(scope)).toEqual(parsed));

  it.each(['core.note', 'core.note:delete', ':read', 'Core.Note:read', 'core..note:read', 'edge.:read', 'edge.*:read', 'metadata.types:read', 'core.*.x:read', 'openid'])(
    '%s is not an API scope',
    (scope) => expect(isApiScope(scope)).toBe(false),
  );

  it('knows the OIDC scopes besides the grammar', () => {
    expect(['openid', 'profile', 'email', 'offline_access', 'core.note:read'].every(isKnownScope)).toBe(true);
    expect(isKnownScope('admin')).toBe(false);
  });

  it('turns scopes into the permission maps of an API key, write winning over read', () => {
    expect(permissionsOf(['core.note:read', 'core.note:write', 'core.*:read', 'edge.acme.links:read', 'metadata:write', 'openid'])).toEqual({
      typePerms: { 'core.note': 'write', 'core.*': 'read' },
      edgePerms: { 'acme.links': 'read' },
    });
  });
});
