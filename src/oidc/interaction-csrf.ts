/**
 * CSRF tokens of the provider's forms: an HMAC, under a key derived from the service key, of
 * what the form is bound to (the interaction's uid; on the device page, a cookie nonce and the
 * user code). A POST is checked against it in constant time. The sign-in and consent forms are
 * also bound to the provider's interaction cookie, which a cross-site POST does not carry.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export function csrfToken(key: Buffer, binding: string): string {
  return createHmac('sha256', key).update(binding).digest('base64url');
}

export function csrfValid(key: Buffer, binding: string, token: unknown): boolean {
  if (typeof token !== 'string') return false;
  const expected = Buffer.from(csrfToken(key, binding));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
