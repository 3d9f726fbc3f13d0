/**
 * What the browser pages (sign-in, consent, device, account) read from a request, shaped so
 * that odd input gets the page's own answer rather than a 500: the fields of a form post (`{}`
 * when the request has no body or not an object, so that a bare POST gets the page's refusal,
 * an expired form; a route that takes JSON refuses a non-object with `refuseNonObjectJson`), and
 * a query parameter's text.
 */
import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createQueryDecorator } from '../auth/decorators';
import { giveOnce, nonObjectBodyError } from '../common/validation';
import { errorPage } from './pages';
import { sendPage } from './send-page';

export type FormBody = Record<string, unknown>;

const isFields = (body: unknown): body is FormBody => body !== null && typeof body === 'object' && !Array.isArray(body);

export const FormFields = createParamDecorator((_: unknown, ctx: ExecutionContext): FormBody => {
  const body = ctx.switchToHttp().getRequest<FastifyRequest>().body;
  return isFields(body) ? body : {};
});

/**
 * For a route that also takes JSON (the account pages' revoke routes): a JSON body that is not
 * an object is refused as the API refuses one (400 validation_error on `(body)`), not read as no
 * fields. body-parser lets only arrays through; the other shapes it refuses itself.
 */
export function refuseNonObjectJson(req: FastifyRequest): void {
  if (req.body !== undefined && !isFields(req.body)) throw nonObjectBodyError();
}

/**
 * A query parameter of a page: its text when given once, else undefined (a handler refuses a
 * repeated one first, `refusedRepeat`). Other parameters are ignored, as pages do (a link may
 * carry tracking ones).
 */
export const PageQuery = createQueryDecorator((name: string, ctx: ExecutionContext): string | undefined => {
  const value = (ctx.switchToHttp().getRequest<FastifyRequest>().query as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value : undefined;
});

/**
 * Whether one of the single-valued fields `names` the page reads was given more than once in
 * `fields` (its query or form: a repeated one arrives as an array), and if so sends a 400 page
 * that says which, in the API's words ("give uid once"). Taking the first (or none) would act on a
 * request nobody can say was meant: `decision=approve&decision=deny`, two codes, two sign-ins.
 */
export async function refusedRepeat(reply: FastifyReply, fields: Record<string, unknown> | undefined, names: readonly string[]): Promise<boolean> {
  const repeated = names.filter((name) => Array.isArray(fields?.[name]));
  if (!repeated.length) return false;
  await sendPage(reply, 400, errorPage('Invalid request', `This request is not valid: ${repeated.map(giveOnce).join('; ')}. Go back and start again.`));
  return true;
}
