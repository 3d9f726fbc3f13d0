/**
 * The permission check, in one place. Admins pass everything; members are limited by their
 * three maps, where the most specific matching pattern decides and `write` implies `read`.
 * OAuth tokens arrive here already translated into the same maps (plus scopes for metadata).
 */
import type { Access, PermissionMap } from '../keys/api-key.entity';
import { bestMatch, bestMatchOfName, TypeRef } from '../common/type-pattern';
import type { Principal } from './principal';

function allows(map: PermissionMap, name: string | TypeRef, access: Access): boolean {
  const pattern = typeof name === 'string' ? bestMatchOfName((p) => Object.hasOwn(map, p), name) : bestMatch(Object.keys(map), name);
  if (pattern === undefined) return false;
  const granted = map[pattern];
  return granted === 'write' || access === 'read';
}

export function isAdmin(p: Principal): boolean {
  return p.role === 'admin';
}

/**
 * The same credential seeing the whole tenant: for what the service records on its own
 * account (an event's full subject), never for answering the caller.
 */
export function tenantWide(p: Principal): Principal {
  return { ...p, role: 'admin' };
}

/** Uploading a blob: an admin, or a member who may write some type (someone who can make items). */
export function canUpload(p: Principal): boolean {
  return isAdmin(p) || Object.values(p.typePerms).includes('write');
}

/** `type` is a TypeRef wherever an item's type is checked, so `parent.*` grants cover subtypes. */
export function canType(p: Principal, type: string | TypeRef, access: Access): boolean {
  return isAdmin(p) || allows(p.typePerms, type, access);
}

export function canExtension(p: Principal, namespace: string, access: Access): boolean {
  return isAdmin(p) || allows(p.extensionPerms, namespace, access);
}

export function canEdgeType(p: Principal, edgeType: string, access: Access): boolean {
  return isAdmin(p) || allows(p.edgePerms, edgeType, access);
}

/** Tags: API keys follow the item's type permission; OAuth tokens also need metadata scopes. */
export function canMetadata(p: Principal, access: Access): boolean {
  if (isAdmin(p) || p.kind === 'api_key') return true;
  const scopes = p.scopes ?? [];
  return scopes.includes(`metadata:write`) || (access === 'read' && scopes.includes('metadata:read'));
}

/** A scope-gated capability such as `metadata.types:write` (admins and OAuth scopes only). */
export function hasScope(p: Principal, scope: string): boolean {
  return isAdmin(p) || (p.scopes ?? []).includes(scope);
}
