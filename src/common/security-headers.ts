/**
 * Response headers that protect a browser-held answer, whoever writes it.
 *
 * Every response: `X-Content-Type-Options: nosniff` (a body is read as its Content-Type says,
 * never sniffed into HTML or script) and `Referrer-Policy: no-referrer` (a page opened from the
 * consent or device pages does not learn their URLs, which carry codes). They are set on the raw
 * response from the first onRequest hook, so they reach the answers oidc-provider writes itself
 * (oidc-mount.ts hands it the raw request, and Fastify's onSend never runs for those) as well as
 * Fastify's; a route that sets one of them again (blob downloads) replaces it, never doubles it.
 *
 * `@NoStore()`: the route's answer shows a secret once (a new API key, client or webhook secret),
 * so no cache, shared or the browser's, may keep it (as RFC 6749 5.1 asks of token responses).
 */
import { applyDecorators, Header } from '@nestjs/common';
import { ApiExtension } from '@nestjs/swagger';
import type { FastifyReply, onRequestHookHandler } from 'fastify';

export const EVERY_RESPONSE = { 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' } as const;

export function setSecurityHeaders(reply: FastifyReply): void {
  for (const [name, value] of Object.entries(EVERY_RESPONSE)) reply.raw.setHeader(name, value);
}

/**
 * A fastify onRequest hook; app.factory.ts registers it first. An answer to a request that
 * carries a credential is `Cache-Control: no-store` unless its route says otherwise (a blob, kept
 * privately by its content hash): a shared cache may not store it anyway (RFC 9111 3.5), but a
 * browser's or a client library's would keep lists of keys, users and audit rows on disk.
 */
export const securityHeaders: onRequestHookHandler = (request, reply, done) => {
  setSecurityHeaders(reply);
  if (request.headers.authorization !== undefined) reply.raw.setHeader('Cache-Control', 'no-store');
  done();
};

/** Marks an operation whose successes openapi.ts documents with `Cache-Control: no-store`. */
export const NO_STORE_EXTENSION = 'x-no-store';

export const NoStore = () => applyDecorators(Header('Cache-Control', 'no-store'), ApiExtension(NO_STORE_EXTENSION, true));
