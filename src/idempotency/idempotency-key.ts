/**
 * The pure rules of idempotency keys: what a valid `Idempotency-Key` header is, who it
 * belongs to, and the fingerprint that tells a retry from a different request under one key.
 */
import { createHash } from 'node:crypto';
import { ownerCredential, type Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { canonicalJson } from '../common/canonical-json';
import { validationError } from '../common/validation';

export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

const KEY_RE = /^[\x21-\x7e]{1,255}$/;

/** Keys are per credential, as in Stripe. */
export interface KeyOwner {
  tenantId: string;
  credentialId: string;
}

export function ownerOf(principal: Principal): KeyOwner {
  // A client's tokens share their keys across secret rotations (ownerCredential).
  return { tenantId: principal.tenantId, credentialId: ownerCredential(principal.credentialId) };
}

/** The header's value, checked: 1-255 visible ASCII characters (a repeated header arrives joined by ", " and fails). */
export function parseIdempotencyKey(value: string | string[]): string {
  if (typeof value === 'string' && KEY_RE.test(value)) return value;
  throw validationError([{ field: IDEMPOTENCY_KEY_HEADER, message: 'must be 1-255 visible ASCII characters (no spaces)' }], 'The Idempotency-Key header is invalid');
}

/**
 * SHA-256 of method, full URL (path and query) and canonical body, and for an OAuth token its
 * scopes: tokens of one grant or client share its keys, and a narrower token must not be
 * replayed a response kept for a wider one (what it could not have asked for itself).
 */
export function requestFingerprint(method: string, originalUrl: string, body: unknown, tokenScopes: readonly string[] | null = null): string {
  const scopes = tokenScopes ? `\n${[...new Set(tokenScopes)].sort().join(' ')}` : '';
  return createHash('sha256').update(`${method.toUpperCase()}\n${originalUrl}\n${canonicalJson(body)}${scopes}`).digest('hex');
}

/** The stored form of the key: its SHA-256, so the table never holds what unlocks the stored responses. */
export function keyDigest(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** 409 about the key; with `retryAfterSeconds`, one that a retry later may get past (ApiError.busy). */
export function keyConflict(key: string, message: string, retryAfterSeconds?: number): ApiError {
  return ApiError.conflict('conflict', message, { idempotency_key: key, ...(retryAfterSeconds === undefined ? {} : { retry_after: retryAfterSeconds }) });
}
