/**
 * Sends one of the provider's HTML pages (pages.ts), uncached, never framed, no script allowed.
 * `X-Content-Type-Options` and `Referrer-Policy: no-referrer` (the consent and device pages' URLs
 * carry codes) come with every response (security-headers.ts), these pages' included.
 */
import type { FastifyReply } from 'fastify';

const PAGE_HEADERS = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
};

export async function sendPage(reply: FastifyReply, status: number, html: string): Promise<void> {
  await reply.status(status).headers(PAGE_HEADERS).send(html);
}

/**
 * The same, for the pages oidc-provider renders through its Koa context (errors, logout): a
 * framed logout confirmation would let another site click "sign out" for the user.
 */
export function setPage(ctx: { set(headers: Record<string, string>): void; body: unknown }, html: string): void {
  ctx.set(PAGE_HEADERS);
  ctx.body = html;
}
