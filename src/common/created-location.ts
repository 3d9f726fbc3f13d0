/**
 * `Location` on a 201 (RFC 9110 15.3.2), one rule for every route that creates something a GET
 * reads back: the header names that resource by its path relative to the service root (as the
 * 202 of POST /items/bulk_action names its job), and the OpenAPI 201 response documents it.
 *
 * `@Created({ type, path })` does both for a route that returns its body; a route that sends its
 * own reply (the streamed blob upload) calls `setCreatedLocation` with `ApiCreatedLocation`'s
 * documentation. Only a 201 gets the header: a route that answers 200 for an existing resource
 * (POST /items through its natural key, a blob already held) is not a creation.
 *
 * With `@Idempotent()`, in either order, a replay carries the same Location: the interceptor
 * replays the one the first response had, and the replayed body would give the same path.
 */
import { applyDecorators, CallHandler, ExecutionContext, NestInterceptor, Type, UseInterceptors } from '@nestjs/common';
import { ApiCreatedResponse } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { map, Observable } from 'rxjs';

/** A path segment of a Location: ids are UUIDs, but type names and integration ids are the caller's text. */
const segment = (value: string) => encodeURIComponent(value);

/** `/webhooks/{id}` with `{id}` taken from `body.id` (or any named field), each encoded. */
export function locationOf(template: string, fields: object): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => segment(String((fields as Record<string, unknown>)[name])));
}

export function setCreatedLocation(reply: FastifyReply, template: string, fields: object): void {
  reply.header('Location', locationOf(template, fields));
}

/** The OpenAPI 201 response of a creation at `template`, with its Location header. */
export const ApiCreatedLocation = (type: Type<unknown>, template: string, description = 'Created') =>
  ApiCreatedResponse({
    type,
    description,
    headers: { Location: { description: `The created resource, relative to the service root: ${template}`, schema: { type: 'string' } } },
  });

class CreatedLocationInterceptor implements NestInterceptor {
  constructor(
    private readonly template: string,
    private readonly fields: (body: never) => object,
  ) {}

  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    const reply = ctx.switchToHttp().getResponse<FastifyReply>();
    return next.handle().pipe(
      map((body: unknown) => {
        // The status as the handler left it (Nest set the route's 201 before it ran).
        if (reply.statusCode === 201 && body) setCreatedLocation(reply, this.template, this.fields(body as never));
        return body;
      }),
    );
  }
}

/**
 * A creation route answering 201 with the body `type` and `Location: template`, whose `{name}`
 * placeholders are filled from the body's fields (or from what `fields` picks out of it).
 */
export function Created<T = object>(options: { type: Type<unknown>; path: string; fields?: (body: T) => object; description?: string }) {
  const fields = options.fields ?? ((body: T) => body as object);
  return applyDecorators(
    UseInterceptors(new CreatedLocationInterceptor(options.path, fields as (body: never) => object)),
    ApiCreatedLocation(options.type, options.path, options.description),
  );
}
