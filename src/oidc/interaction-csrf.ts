/**
 * CSRF tokens of the sign-in and consent forms: an HMAC of the interaction's uid under a key
 * derived from the service key. The form's POST is checked against it (constant-time), on top
 * of the provider's own interaction cookie, which a cross-site POST does not carry (SameSite=Lax).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export function csrfToken(key: Buffer, uid: string): string {
  return createHmac('sha256', key).update(`interaction:${uid}`).digest('base64url');
}

export function csrfValid(key: Buffer, uid: string, token: unknown): boolean {
  if (typeof token !== 'string') return false;
  const expected = Buffer.from(csrfToken(key, uid));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
