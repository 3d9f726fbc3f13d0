/** Route metadata read by the bearer and permission guards, and the Principal parameter. */
import { createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';
import { CUSTOM_ROUTE_ARGS_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import type { Access } from '../keys/api-key.entity';
import type { Principal } from './principal';

export const PUBLIC_ROUTE = 'svc:public';
export const BOOTSTRAP_ROUTE = 'svc:bootstrap';
export const REQUIREMENT = 'svc:requirement';
export const ACCEPTS = 'svc:accepts';

/** No bearer token needed. */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/** Reachable without a token only while the server has no keys (SPEC 4.5 bootstrap). */
export const AllowBootstrap = () => SetMetadata(BOOTSTRAP_ROUTE, true);

/** Body media types a route takes instead of JSON (form posts, blob uploads). `*` takes any. */
export const Accepts = (...types: string[]) => SetMetadata(ACCEPTS, types);

export type Requirement =
  | { admin: true; rootTenant?: boolean }
  | { apiKey: true }
  | { type: string; access: Access }
  | { extension: string; access: Access }
  | { edge: string; access: Access }
  | { scope: string };

/**
 * A permission every caller of the route must hold, checked by PermissionGuard before the
 * handler runs. Checks that depend on the request's data (the item's type, say) are made in
 * services through the same functions in permissions.ts.
 */
export const Requires = (requirement: Requirement) => SetMetadata(REQUIREMENT, requirement);

export interface AuthedRequest {
  principal?: Principal;
  authError?: 'unauthorized' | 'expired_token';
  /** The token could not be checked (a dependency is away): answered once the rate limit has counted the request. */
  credentialError?: Error;
}

declare module 'fastify' {
  // Set by CredentialHook, read by the guards and @Caller().
  interface FastifyRequest extends AuthedRequest {}
}

const queryReaders = new WeakSet<object>();

/**
 * A parameter decorator that reads the query string itself (and decides what to do with
 * parameters it does not know). InputGuard refuses unknown query parameters on a route that
 * reads the query through neither `@Query()` nor one of these.
 */
export function createQueryDecorator<T>(factory: (data: T, ctx: ExecutionContext) => unknown): ReturnType<typeof createParamDecorator<T>> {
  queryReaders.add(factory);
  return createParamDecorator(factory);
}

export const readsQueryItself = (factory: unknown): boolean => typeof factory === 'function' && queryReaders.has(factory);

/**
 * Whether a route's handler takes a parameter of one of `kinds` (RouteParamtypes), or one made
 * with createQueryDecorator, which reads the request itself. Asked once per handler: `cache`.
 */
export function takesParam(ctx: ExecutionContext, kinds: readonly RouteParamtypes[], cache: WeakMap<object, boolean>): boolean {
  const handler = ctx.getHandler();
  let takes = cache.get(handler);
  if (takes === undefined) {
    const args: Record<string, { factory?: unknown }> = Reflect.getMetadata(ROUTE_ARGS_METADATA, ctx.getClass(), handler.name) ?? {};
    const named = new Set(kinds.map(String));
    takes = Object.entries(args).some(([key, arg]) => (key.includes(CUSTOM_ROUTE_ARGS_METADATA) ? readsQueryItself(arg.factory) : named.has(key.split(':')[0])));
    cache.set(handler, takes);
  }
  return takes;
}

/**
 * The raw request, on a route that ignores query parameters it does not know: the browser pages
 * (a link may gain tracking parameters on its way) and the OAuth endpoints (RFC 6749 3.1: a
 * server ignores parameters it does not recognise). `@Req()` leaves a route under InputGuard's rule.
 */
export const LenientRequest = createQueryDecorator((_: unknown, ctx: ExecutionContext) => ctx.switchToHttp().getRequest());

/** The caller. On a bootstrap route it is undefined while bootstrap is open. */
export const Caller = createParamDecorator((_: unknown, ctx: ExecutionContext) => ctx.switchToHttp().getRequest<AuthedRequest>().principal);
