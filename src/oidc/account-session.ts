/**
 * The account pages' own sign-in (grants, sessions, security): a cookie `svc_account` holding
 * `<user id>.<expiry>.<HMAC>` under a key derived from the service key, HttpOnly, SameSite=Lax,
 * scoped to /auth. Verified in constant time; 12 hours.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createHmac, timingSafeEqual } from 'node:crypto';

export const ACCOUNT_COOKIE = 'svc_account';
const TTL_SECONDS = 12 * 3600;

const sign = (key: Buffer, body: string) => createHmac('sha256', key).update(`account:${body}`).digest('base64url');

export function cookieOf(req: FastifyRequest, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return undefined;
}

export function setAccountCookie(reply: FastifyReply, key: Buffer, userId: string, secure: boolean): void {
  const body = `${userId}.${Math.floor(Date.now() / 1000) + TTL_SECONDS}`;
  reply.header('Set-Cookie', `${ACCOUNT_COOKIE}=${body}.${sign(key, body)}; Path=/auth; HttpOnly; SameSite=Lax; Max-Age=${TTL_SECONDS}${secure ? '; Secure' : ''}`);
}

export function clearAccountCookie(reply: FastifyReply): void {
  reply.header('Set-Cookie', `${ACCOUNT_COOKIE}=; Path=/auth; HttpOnly; SameSite=Lax; Max-Age=0`);
}

/** The signed-in user's id, or undefined. */
export function accountOf(req: FastifyRequest, key: Buffer): string | undefined {
  const value = cookieOf(req, ACCOUNT_COOKIE);
  const parts = value?.split('.');
  if (!parts || parts.length !== 3) return undefined;
  const [userId, exp, mac] = parts;
  const expected = Buffer.from(sign(key, `${userId}.${exp}`));
  const given = Buffer.from(mac);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  return Number(exp) > Date.now() / 1000 ? userId : undefined;
}
