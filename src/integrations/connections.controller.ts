import { applyDecorators, Controller, Delete, ExecutionContext, Get, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import { ApiExtension, ApiOkResponse, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Caller, createQueryDecorator, Public, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { ParseIdPipe } from '../common/ids';
import { createValidationPipe } from '../common/validation';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiHeadSuccesses } from '../openapi/api-head.decorator';
import { ConnectionList, ConnectionResponse, ConnectorCallbackQuery, ListConnectionsQuery, StartConnectionQuery, UPSTREAM_REDIRECT_PARAMS } from './connections.dto';
import { ConnectionsService } from './connections.service';

/**
 * The query of the upstream's redirect, validated with unknown parameters dropped: RFC 6749
 * 4.1.2 has a client ignore those it does not know, and upstreams add their own (`scope`,
 * `authuser`, `prompt`, `session_state`, `error_uri`). The global pipe, which refuses unknown
 * fields, does not apply to a custom parameter decorator.
 */
const upstreamQuery = createQueryDecorator((_: unknown, ctx: ExecutionContext) => ctx.switchToHttp().getRequest<FastifyRequest>().query);
const UpstreamRedirect = () => upstreamQuery(createValidationPipe({ unknownFields: 'drop' }));
const ApiUpstreamRedirectQuery = () =>
  applyDecorators(
    ...Object.entries(UPSTREAM_REDIRECT_PARAMS).map(([name, { description, maxLength }]: [string, { description?: string; maxLength?: number }]) =>
      ApiQuery({ name, required: false, description, schema: { type: 'string', maxLength } }),
    ),
  );

/** The JSON body of a 302, for callers that do not follow redirects: the Location, under `field`. */
const redirectBody = (field: string, description: string) => ({ type: 'object' as const, properties: { [field]: { type: 'string' as const, format: 'uri', description } }, required: [field] });

/** A 302's headers: where to, and that no cache may keep it (its URL carries a single-use state or the connection's id). */
const redirectHeaders = (location: string) => ({
  Location: { description: location, schema: { type: 'string', format: 'uri' } },
  'Cache-Control': { $ref: '#/components/headers/Cache-Control' },
});

@ApiTags('integrations')
@Controller()
export class ConnectionsController {
  constructor(private readonly connections: ConnectionsService) {}

  @Get('oauth/start')
  @Requires({ admin: true })
  @ApiOperation({
    summary: 'Start connecting an integration to its upstream (admin): 302 to the upstream\'s authorize URL, with PKCE S256 and a sealed, single-use state',
    description: 'The JSON body repeats the URL as `authorize_url` for callers that do not follow redirects.',
  })
  @ApiResponse({ status: 302, description: 'To the upstream (Location); the body repeats it', schema: redirectBody('authorize_url', 'The upstream\'s authorize URL'), headers: redirectHeaders('The upstream\'s authorize URL') })
  @ApiErrors(400, 401, 403, 404, 429)
  async start(@Caller() caller: Principal, @Query() q: StartConnectionQuery, @Res() reply: FastifyReply): Promise<void> {
    const url = await this.connections.start(caller, q.integration_id, q.redirect_uri);
    await reply.status(302).header('Location', url).header('Cache-Control', 'no-store').send({ authorize_url: url });
  }

  @Get('oauth/callback/:provider')
  @Public()
  @ApiOperation({
    summary: 'Where the upstream sends the user back: exchanges the code, stores the tokens sealed in a connection, and redirects to the redirect_uri with connection_id (or error)',
    description: 'HEAD answers 200 with no body and does nothing else: it neither exchanges the code nor uses up the single-use state.',
  })
  @ApiResponse({
    status: 302,
    description: 'To the redirect_uri given at /oauth/start (Location), with `connection_id` or `error`; the body repeats it',
    schema: redirectBody('redirect_to', 'Where the Location header sends the browser'),
    headers: redirectHeaders('The redirect_uri given at /oauth/start, with `connection_id` or `error`'),
  })
  @ApiHeadSuccesses({ 200: 'Nothing else is done: the code is not exchanged and the single-use state is not spent' })
  @ApiErrors(400, 429)
  @ApiUpstreamRedirectQuery()
  // Upstreams add parameters of their own to the redirect (RFC 6749 3.1.2: the client ignores them).
  @ApiExtension('x-unknown-query', 'ignored')
  async callback(@Param('provider') provider: string, @UpstreamRedirect() q: ConnectorCallbackQuery, @Res() reply: FastifyReply): Promise<void> {
    // Fastify answers HEAD with this route too. Link checkers and mail scanners probe a URL with
    // HEAD before the user's browser follows it: exchanging there would spend the state and leave
    // the user's own GET to fail.
    if (reply.request.method === 'HEAD') {
      await reply.status(200).header('Cache-Control', 'no-store').send();
      return;
    }
    const to = await this.connections.callback(provider, q);
    await reply.status(302).header('Location', to).header('Cache-Control', 'no-store').send({ redirect_to: to });
  }

  @Get('connections')
  @Requires({ admin: true })
  @ApiOperation({ summary: 'The tenant\'s connections, newest first (tokens are never returned)' })
  @ApiOkResponse({ type: ConnectionList })
  @ApiErrors(400, 401, 403, 429)
  list(@Caller() caller: Principal, @Query() q: ListConnectionsQuery): Promise<ConnectionList> {
    return this.connections.list(caller, q);
  }

  @Get('connections/:id')
  @Requires({ admin: true })
  @ApiOperation({ summary: 'One connection of the tenant (tokens are never returned); 404 `not_found` for an unknown id or another tenant\'s' })
  @ApiOkResponse({ type: ConnectionResponse })
  @ApiErrors(400, 401, 403, 404, 429)
  get(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<ConnectionResponse> {
    return this.connections.get(caller, id);
  }

  @Delete('connections/:id')
  @Requires({ admin: true })
  @HttpCode(200)
  @ApiOperation({ summary: 'Delete a connection and its stored tokens' })
  @ApiOkResponse({ type: ConnectionResponse })
  @ApiErrors(400, 401, 403, 404, 429)
  remove(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<ConnectionResponse> {
    return this.connections.remove(caller, id);
  }

  @Post('connections/:id/refresh')
  @Requires({ admin: true })
  @Idempotent()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Get a new upstream access token with the stored refresh token',
    description:
      'One refresh of a connection at a time calls the upstream. A refresh sent while another is under way waits for it and answers as it did (200 with the tokens it stored, or its error), without calling the upstream; 409 `conflict` when that one does not finish in time or its result is not known.',
  })
  @ApiOkResponse({ type: ConnectionResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429, 502)
  refresh(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<ConnectionResponse> {
    return this.connections.refresh(caller, id);
  }
}
