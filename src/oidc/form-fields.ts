/**
 * The fields of a browser form post to the sign-in, consent and account pages: `{}` when the
 * request has no body or not an object, so that a bare POST gets the page's own refusal (an
 * expired form) rather than a 500.
 */
import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';

export type FormBody = Record<string, unknown>;

export const FormFields = createParamDecorator((_: unknown, ctx: ExecutionContext): FormBody => {
  const body = ctx.switchToHttp().getRequest<FastifyRequest>().body;
  return body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as FormBody) : {};
});
