import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { Created } from '../common/created-location';
import { PageQuery } from '../common/pagination';
import { NoStore } from '../common/security-headers';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ClientGrantList } from './account.dto';
import { ListClientsQuery, OAuthClient, OAuthClientList, ParseClientIdPipe, RegisteredClient, RegisterClientDto, RotateClientSecretDto, RotatedClient, UpdateClientDto } from './clients.dto';
import { ClientsService } from './clients.service';
import { GrantsService } from './grants.service';

const WHO_MANAGES = 'Admins manage their tenant\'s clients; a root-tenant admin also manages clients made by open registration (RFC 7591), which have no tenant. Any other client is 404 `not_found`.';

@ApiTags('oauth')
@Controller('auth/clients')
export class ClientsController {
  constructor(
    private readonly clients: ClientsService,
    private readonly grants: GrantsService,
  ) {}

  @Post()
  @Requires({ admin: true })
  // The secret is shown only in the response: a retry after losing it gets it again.
  @Idempotent()
  @NoStore()
  @ApiOperation({
    summary: 'Register a first-party OAuth client of the caller\'s tenant (admin)',
    description:
      'RFC 7591 metadata. The client belongs to the tenant (so it may use client_credentials) and carries a default extension grant. ' +
      'Clients that authenticate with a secret get a `client_secret`, shown only here and stored encrypted; `token_endpoint_auth_method: none` makes a public client (PKCE, no secret), `private_key_jwt` one that signs assertions with its own key, published at `jwks_uri` (no secret).',
  })
  @Created({ type: RegisteredClient, path: '/auth/clients/{client_id}' })
  @ApiErrors(400, 401, 403, 429)
  register(@Caller() p: Principal, @Body() dto: RegisterClientDto): Promise<RegisteredClient> {
    return this.clients.register(p, dto);
  }

  @Get()
  @Requires({ admin: true })
  @ApiOperation({ summary: 'List the OAuth clients the caller manages (admin), newest first; secrets never included', description: WHO_MANAGES })
  @ApiOkResponse({ type: OAuthClientList })
  @ApiErrors(400, 401, 403, 429)
  list(@Caller() p: Principal, @Query() query: ListClientsQuery): Promise<OAuthClientList> {
    return this.clients.list(p, query.limit, query.cursor, query.registration);
  }

  @Get(':client_id')
  @Requires({ admin: true })
  @ApiOperation({ summary: 'Retrieve an OAuth client (admin); its secret is never included', description: WHO_MANAGES })
  @ApiOkResponse({ type: OAuthClient })
  @ApiErrors(400, 401, 403, 404, 429)
  get(@Caller() p: Principal, @Param('client_id', ParseClientIdPipe) clientId: string): Promise<OAuthClient> {
    return this.clients.get(p, clientId);
  }

  @Get(':client_id/grants')
  @Requires({ admin: true })
  @ApiOperation({
    summary: 'The users of the caller\'s tenant who connected an OAuth client, newest first: its grants, with the scopes each holds (admin); paged',
    description:
      'The grants the client holds from the caller\'s tenant\'s users only, also for an openly registered client that serves every tenant\'s users; ' +
      'expired ones are left out. Revoke one at `DELETE /users/{id}/grants/{grant_id}`. ' +
      WHO_MANAGES,
  })
  @ApiOkResponse({ type: ClientGrantList })
  @ApiErrors(400, 401, 403, 404, 429)
  async listGrants(@Caller() p: Principal, @Param('client_id', ParseClientIdPipe) clientId: string, @Query() query: PageQuery): Promise<ClientGrantList> {
    await this.clients.get(p, clientId);
    return this.grants.clientPage(p.tenantId, clientId, query.limit, query.cursor);
  }

  @Patch(':client_id')
  @Requires({ admin: true })
  @ApiOperation({
    summary: 'Change an OAuth client\'s name, redirect URIs, scope or descriptive URIs (admin); its id, secret and grants stay',
    description:
      'Absent fields stay as they are; `null` removes an optional one. The result is checked as registration checks a client (400 `validation_error` naming `(client)`: ' +
      'plain http redirect URIs only to a loopback host, …) and holds from the next request on every instance. A redirect URI taken away is refused by the next ' +
      'authorization, and codes not yet exchanged and sign-ins in progress for it end. Scopes taken away leave the users\' grants and the tokens they issued at once ' +
      '(refreshes included), without revoking them; the client-credentials tokens follow the client\'s scope as well. The kind of client (`grant_types`, ' +
      '`response_types`, `token_endpoint_auth_method`, `application_type`) and `extension_permissions` cannot be changed: register a new client. ' +
      WHO_MANAGES,
  })
  @ApiOkResponse({ type: OAuthClient, description: 'The client as changed' })
  @ApiErrors(400, 401, 403, 404, 429)
  update(@Caller() p: Principal, @Param('client_id', ParseClientIdPipe) clientId: string, @Body() dto: UpdateClientDto): Promise<OAuthClient> {
    return this.clients.update(p, clientId, dto);
  }

  @Delete(':client_id')
  @HttpCode(200)
  @Requires({ admin: true })
  @ApiOperation({
    summary: 'Delete an OAuth client (admin) with everything it holds; its tokens get 401 from the next request',
    description:
      'Ends its grants (each audited as `auth.grant.revoked` with `details.by` `client_deleted`) with their access and refresh tokens and codes, ' +
      'its client-credentials tokens, pending device codes and its place in browser sessions. Its secret no longer authenticates. ' +
      WHO_MANAGES,
  })
  @ApiOkResponse({ type: OAuthClient, description: 'The deleted client' })
  @ApiErrors(400, 401, 403, 404, 429)
  remove(@Caller() p: Principal, @Param('client_id', ParseClientIdPipe) clientId: string): Promise<OAuthClient> {
    return this.clients.remove(p, clientId);
  }

  @Post(':client_id/secret')
  @HttpCode(200)
  @Requires({ admin: true })
  @Idempotent()
  @NoStore()
  @ApiOperation({
    summary: 'Rotate a confidential OAuth client\'s secret (admin): the new one is shown once; the old one fails at once, or keeps authenticating beside it for `expire_previous_in` seconds',
    description:
      'The new secret is stored encrypted, as at registration. The client\'s client-credentials tokens end with the old secret (401 from the next request); ' +
      'the grants users gave, and their tokens, stay. With `expire_previous_in` (at most 604800), the old secret keeps authenticating the client ' +
      '(`client_secret_basic`, `client_secret_post`; a `client_secret_jwt` client switches at once) until `previous_secret_expires_at`, and its tokens, with what they ' +
      'started, keep working until then; then they end as at once. A rotation meanwhile ends the older secret at once. ' +
      'A client without a secret (`token_endpoint_auth_method` `none` or `private_key_jwt`): 409 `conflict`. ' +
      WHO_MANAGES,
  })
  @ApiOkResponse({ type: RotatedClient })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  rotateSecret(@Caller() p: Principal, @Param('client_id', ParseClientIdPipe) clientId: string, @Body() dto: RotateClientSecretDto): Promise<RotatedClient> {
    return this.clients.rotateSecret(p, clientId, dto);
  }
}
