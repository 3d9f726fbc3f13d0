/**
 * The account pages' own sign-in (grants, sessions, security): a cookie `svc_account` holding
 * `<user id>.<session epoch>.<expiry>.<HMAC>` under a key derived from the service key,
 * HttpOnly, SameSite=Lax, scoped to /auth. Verified in constant time; 12 hours.
 *
 * "Sign out everywhere" must end these cookies too, in every browser, though nothing stores
 * them: a cookie counts only while the epoch it was stamped with is still the user's
 * `session_epoch`, which every account request checks (`signedInAs`) and which signing out
 * everywhere increments (grants.service.ts).
 *
 * Signing out in one browser (the provider's RP-initiated logout, which the pages' "Sign out"
 * leads to) drops the cookie from that browser only (provider-logout.ts): the epoch stays,
 * so the user's other browsers stay signed in.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createHmac, timingSafeEqual } from 'node:crypto';

export const ACCOUNT_COOKIE = 'svc_account';
/** One set of attributes for setting and clearing: a browser clears only a cookie of the same path. */
const attributes = (secure: boolean) => `Path=/auth; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
const TTL_SECONDS = 12 * 3600;

// `v2`: a cookie of the earlier form (`<user id>.<expiry>`), which no sign out could end, is not taken.
const sign = (key: Buffer, body: string) => createHmac('sha256', key).update(`account:v2:${body}`).digest('base64url');

export function cookieOf(req: FastifyRequest, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return undefined;
}

export function setAccountCookie(reply: FastifyReply, key: Buffer, user: { id: string; session_epoch: string | number }, secure: boolean): void {
  const body = `${user.id}.${user.session_epoch}.${Math.floor(Date.now() / 1000) + TTL_SECONDS}`;
  reply.header('Set-Cookie', `${ACCOUNT_COOKIE}=${body}.${sign(key, body)}; ${attributes(secure)}; Max-Age=${TTL_SECONDS}`);
}

/** The Set-Cookie value that drops the account cookie from the browser (the provider's logout sends it too). */
export function clearedAccountCookie(secure: boolean): string {
  return `${ACCOUNT_COOKIE}=; ${attributes(secure)}; Max-Age=0`;
}

export function clearAccountCookie(reply: FastifyReply, secure: boolean): void {
  reply.header('Set-Cookie', clearedAccountCookie(secure));
}

/** The user id and session epoch of a genuine, unexpired account cookie, or undefined. */
function accountOf(req: FastifyRequest, key: Buffer): { userId: string; epoch: string } | undefined {
  const value = cookieOf(req, ACCOUNT_COOKIE);
  const parts = value?.split('.');
  if (!parts || parts.length !== 4) return undefined;
  const [userId, epoch, exp, mac] = parts;
  const expected = Buffer.from(sign(key, `${userId}.${epoch}.${exp}`));
  const given = Buffer.from(mac);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  return Number(exp) > Date.now() / 1000 ? { userId, epoch } : undefined;
}

/** The signed-in user: the cookie's, unless they signed out everywhere since it was set. */
export async function signedInAs<U extends { session_epoch: string | number }>(
  req: FastifyRequest,
  key: Buffer,
  userById: (id: string) => Promise<U | undefined>,
): Promise<U | undefined> {
  const cookie = accountOf(req, key);
  const user = cookie && (await userById(cookie.userId));
  return user && String(user.session_epoch) === cookie.epoch ? user : undefined;
}
