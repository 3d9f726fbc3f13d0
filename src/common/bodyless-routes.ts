/**
 * Routes that take no body refuse one, as a route with a body refuses unknown fields.
 *
 * A body's fields are checked by the validation pipe against the handler's @Body() DTO, which a
 * handler without one never runs: so `DELETE /items/{id}` with `{"x":1}` or `[1,2]` would be
 * answered as if nothing had been sent. This guard, after the bearer, permission and input
 * guards (so 401, 403, an unparsable body and a refused query come first), holds such a route
 * to what the README's input rules say of every API route: its body is absent, or the empty
 * object `{}` (what some clients send with a DELETE or a POST without data); a field in it is
 * an unknown field (400 `validation_error`, `is not a known field`, as the pipe names one), and
 * JSON that is not an object the usual `(body)` refusal. A body announced in a media type other
 * than JSON is 415, as InputGuard answers it on POST, PUT and PATCH (here also on DELETE, which
 * InputGuard leaves alone and which would otherwise skip the body unread).
 *
 * A route reads a body when its handler takes one (@Body(), @RawBody(), files), declares the
 * media types it reads (@Accepts: the form pages, userinfo's POST, and @StreamedBody's blob
 * upload), or takes the request itself (@Req(), or a decorator made with createQueryDecorator
 * such as @LenientRequest(): the browser pages and the OAuth endpoints read what they want of
 * it). The OIDC provider's own endpoints are answered before Nest's routing (oidc-mount.ts) and
 * never reach a guard. GET and HEAD bodies are dropped before the request is handled
 * (protocol-errors.ts).
 */
import { CanActivate, ExecutionContext } from '@nestjs/common';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import type { FastifyRequest } from 'fastify';
import { ACCEPTS, takesParam } from '../auth/decorators';
import { JSON_MEDIA_TYPES, unacceptedMediaType } from './body-parsing';
import { nonObjectBodyError, unknownFieldsError } from './validation';

/** Parameters through which a handler reads the body, or the whole request. */
const BODY_READERS = [RouteParamtypes.BODY, RouteParamtypes.RAW_BODY, RouteParamtypes.FILE, RouteParamtypes.FILES, RouteParamtypes.REQUEST];

const readsBody = new WeakMap<object, boolean>();

const routeReadsBody = (ctx: ExecutionContext): boolean =>
  Reflect.getMetadata(ACCEPTS, ctx.getHandler()) !== undefined || Reflect.getMetadata(ACCEPTS, ctx.getClass()) !== undefined || takesParam(ctx, BODY_READERS, readsBody);

export class BodylessRouteGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    if (req.method === 'GET' || req.method === 'HEAD' || routeReadsBody(ctx)) return true;
    const refused = unacceptedMediaType(req, JSON_MEDIA_TYPES);
    if (refused) throw refused;
    const body: unknown = req.body;
    if (body === undefined) return true;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw nonObjectBodyError();
    const fields = Object.keys(body);
    if (fields.length) throw unknownFieldsError(fields);
    return true;
  }
}
