/** Sends one of the provider's HTML pages (pages.ts), uncached, never framed, no script allowed. */
import type { FastifyReply } from 'fastify';

export async function sendPage(reply: FastifyReply, status: number, html: string): Promise<void> {
  await reply
    .status(status)
    .header('Content-Type', 'text/html; charset=utf-8')
    .header('Cache-Control', 'no-store')
    .header('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
    .header('X-Frame-Options', 'DENY')
    .send(html);
}
