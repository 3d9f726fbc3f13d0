/**
 * The guards of the request pipeline, in order: bearer (is there a caller?), permission
 * (may it call this route?), input (does the request pass the input policy, did its body
 * parse, and is it something this route reads?).
 */
import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../common/api-error';
import { ACCEPT_PATCH, JSON_MEDIA_TYPES, unacceptedMediaType, unsupportedPatch } from '../common/body-parsing';
import { inputIssues } from '../common/input-policy';
import { unknownFieldsError, validationError } from '../common/validation';
import { bootstrapClosed, KeysService } from '../keys/keys.service';
import { ACCEPTS, BOOTSTRAP_ROUTE, PUBLIC_ROUTE, REQUIREMENT, Requirement, takesParam } from './decorators';
import { canEdgeType, canExtension, canType, hasScope, isAdmin } from './permissions';

function meta<T>(reflector: Reflector, key: string, ctx: ExecutionContext): T | undefined {
  return reflector.getAllAndOverride<T>(key, [ctx.getHandler(), ctx.getClass()]);
}

@Injectable()
export class BearerGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly keys: KeysService,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    if (meta<boolean>(this.reflector, PUBLIC_ROUTE, ctx)) return true;
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    if (req.principal) return true;
    // Decided here, before the body is looked at: once bootstrap is closed, an anonymous caller
    // gets 401 whatever it sent (an Idempotency-Key included: the root admin key is never kept
    // for replay). The bootstrap itself re-checks.
    if (!req.authError && !req.headers.authorization && meta<boolean>(this.reflector, BOOTSTRAP_ROUTE, ctx)) {
      if (await this.keys.bootstrapOpen()) return true;
      throw bootstrapClosed();
    }
    throw req.authError === 'expired_token'
      ? ApiError.unauthorized('The access token has expired', 'expired_token')
      : ApiError.unauthorized();
  }
}

@Injectable()
export class PermissionGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(ctx: ExecutionContext): boolean {
    const requirement = meta<Requirement>(this.reflector, REQUIREMENT, ctx);
    const principal = ctx.switchToHttp().getRequest<FastifyRequest>().principal;
    if (!requirement || !principal) return true; // public and bootstrap routes decide for themselves
    let ok: boolean;
    if ('admin' in requirement) ok = isAdmin(principal) && (!requirement.rootTenant || principal.isRootTenant);
    else if ('apiKey' in requirement) ok = principal.kind === 'api_key';
    else if ('type' in requirement) ok = canType(principal, requirement.type, requirement.access);
    else if ('extension' in requirement) ok = canExtension(principal, requirement.extension, requirement.access);
    else if ('edge' in requirement) ok = canEdgeType(principal, requirement.edge, requirement.access);
    else ok = hasScope(principal, requirement.scope);
    if (!ok) throw ApiError.forbidden(describe(requirement));
    return true;
  }
}

function describe(r: Requirement): string {
  if ('admin' in r) return r.rootTenant ? 'This needs an admin key of the root tenant' : 'This needs an admin credential';
  if ('scope' in r) return `This needs an admin credential or the ${r.scope} scope`;
  if ('apiKey' in r) return 'This needs an API key';
  const [what, name] = 'type' in r ? ['type', r.type] : 'extension' in r ? ['extension namespace', r.extension] : ['edge type', r.edge];
  return `This needs ${r.access} permission on ${what} ${name}`;
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

const readsQuery = new WeakMap<object, boolean>();

/**
 * Whether a route reads the query string: through `@Query()` or a decorator made with
 * createQueryDecorator. A route that reads it neither way has no query DTO to refuse unknown
 * parameters with, so the guard refuses them for it (a route taking `@Req()` too).
 */
const routeReadsQuery = (ctx: ExecutionContext): boolean => takesParam(ctx, [RouteParamtypes.QUERY], readsQuery);

@Injectable()
export class InputGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(ctx: ExecutionContext): boolean {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    // Path parameters and the query string pass the same text policy as bodies (input-policy.ts).
    const issues = [...inputIssues(req.params), ...inputIssues(req.query)];
    if (issues.length) throw validationError(issues, 'The URL is not acceptable input');
    const unread = routeReadsQuery(ctx) ? [] : Object.keys(req.query ?? {});
    if (unread.length) throw unknownFieldsError(unread);
    const patch = unsupportedPatch(req);
    if (patch) {
      ctx.switchToHttp().getResponse<FastifyReply>().header('Accept-Patch', ACCEPT_PATCH);
      throw patch;
    }
    // Set aside by body-parsing.ts to be answered here, after the caller is known.
    if (req.bodyError) throw req.bodyError;
    const refused = BODY_METHODS.has(req.method) && unacceptedMediaType(req, meta<string[]>(this.reflector, ACCEPTS, ctx) ?? JSON_MEDIA_TYPES);
    if (refused) throw refused;
    return true;
  }
}
